//! The `serve-llm` workers' request figures, for both summary outputs.

use coload_cohort_schema::{CohortSummary, RequestLatencyMs};

use super::LlmServeRow;
use super::document::{Table, f2, f3};

fn opt_ms(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), f3)
}

/// What the columns mean, printed under the table.
pub(crate) const SERVE_LLM_NOTE: &str = "TTFT = first token - scheduled arrival (queueing \
     included); TPOT = (last - first token) / (output - 1), completed requests; ITL = gap \
     between two tokens of a request; - = the percentile falls on a request without a first \
     token (TTFT) or not completed (e2e) by the end; SLO = requests meeting both objectives, \
     goodput = those per second";

fn pair(l: &RequestLatencyMs) -> String {
    format!("{} / {}", opt_ms(l.p50), opt_ms(l.p99))
}

/// The `serve-llm` workers' figures, when the cohort has any.
pub(crate) fn serve_llm_table(s: &CohortSummary) -> Option<Table> {
    let mut t = Table::new(&[
        "replica",
        "model",
        "requests",
        "offered/s",
        "completed/s",
        "unfinished",
        "not admitted",
        "tokens/s",
        "TTFT p50/p99 ms",
        "TPOT p50/p99 ms",
        "ITL p50/p99 ms",
        "e2e p50/p99 ms",
        "KV cache MiB",
        "SLO",
        "verdict",
    ]);
    let mut any = false;
    for w in &s.workers {
        let Some(v) = &w.serve_llm else { continue };
        any = true;
        let slo = v.slo.map_or_else(
            || "-".to_owned(),
            |a| {
                let verdict = if a.meets {
                    "met".to_owned()
                } else if !a.ttft_met || !a.tpot_met {
                    "missed".to_owned()
                } else if v.overloaded {
                    "missed: overloaded".to_owned()
                } else {
                    match a.early_stopping_requests_needed {
                        Some(n) => format!("not shown: needs {n} requests"),
                        None => "not shown: too few requests".to_owned(),
                    }
                };
                format!(
                    "TTFT {} ms, TPOT {} ms at p{}: {:.2} %, goodput {:.2}/s ({verdict})",
                    a.ttft_slo_ms,
                    a.tpot_slo_ms,
                    a.quantile * 100.0,
                    a.attainment * 100.0,
                    a.goodput_per_s
                )
            },
        );
        t.row(vec![
            w.replica.to_string(),
            w.model.clone().unwrap_or_else(|| "-".to_owned()),
            v.requests.to_string(),
            f2(v.offered_per_s),
            f2(v.completed_per_s),
            v.unfinished.to_string(),
            v.not_admitted.to_string(),
            f2(v.output_tokens_per_s),
            pair(&v.ttft_ms),
            pair(&v.tpot_ms),
            pair(&v.itl_ms),
            pair(&v.e2e_ms),
            v.kv_cache_bytes
                .map_or_else(|| "-".to_owned(), |b| f2(b as f64 / (1u64 << 20) as f64)),
            slo,
            if v.overloaded {
                "OVERLOADED (percentiles are lower bounds)".to_owned()
            } else {
                "ok".to_owned()
            },
        ]);
    }
    any.then_some(t)
}

/// Why each overloaded `serve-llm` worker is judged so.
pub(crate) fn llm_overload_lines(s: &CohortSummary) -> Vec<String> {
    s.workers
        .iter()
        .filter_map(|w| w.serve_llm.as_ref().map(|v| (w.replica, v)))
        .flat_map(|(r, v)| {
            v.overload_reasons
                .iter()
                .map(move |reason| format!("replica {r} overloaded: {reason}"))
        })
        .collect()
}

/// A study's `serve-llm` cohorts: TTFT and TPOT p99 against the offered rate per policy, the
/// capacity at the objective of a search's probes, and each worker's KV cache.
#[must_use]
pub(crate) fn llm_serve_table(rows: &[LlmServeRow]) -> Table {
    let mut t = Table::new(&[
        "policy",
        "cohort",
        "offered/s",
        "TTFT p99 ms",
        "TPOT p99 ms",
        "tokens/s",
        "SLO",
        "verdict",
        "KV cache MiB",
        "capacity",
    ]);
    let mut sorted: Vec<&LlmServeRow> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        a.policy
            .cmp(&b.policy)
            .then(a.offered_per_s.total_cmp(&b.offered_per_s))
    });
    for r in sorted {
        let kv: Vec<String> = r
            .kv_cache_bytes
            .iter()
            .map(|b| b.map_or_else(|| "-".to_owned(), |b| f2(b as f64 / (1u64 << 20) as f64)))
            .collect();
        t.row(vec![
            format!("{} ({})", r.policy, r.mode),
            r.cohort.clone(),
            f2(r.offered_per_s),
            opt_ms(r.ttft_p99_ms),
            opt_ms(r.tpot_p99_ms),
            f2(r.output_tokens_per_s),
            r.slo.clone().unwrap_or_else(|| "-".to_owned()),
            if r.overloaded { "overloaded" } else { "ok" }.to_owned(),
            kv.join(", "),
            r.capacity.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    t
}
