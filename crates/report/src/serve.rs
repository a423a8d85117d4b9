//! The serve workers' request figures, for both summary outputs.

use coload_cohort_schema::CohortSummary;

use super::document::{Table, f2, f3};

fn opt_ms(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), f3)
}

/// What the request columns mean, printed under the table.
pub(crate) const SERVE_NOTE: &str = "request latency = completion - scheduled arrival (queueing + \
     service); - = the percentile falls on a request still queued or running at the end";

/// The serve workers' request figures, when the cohort has any.
pub(crate) fn serve_table(s: &CohortSummary) -> Option<Table> {
    let mut t = Table::new(&[
        "replica",
        "requests",
        "offered/s",
        "completed/s",
        "not done",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "queue p99 ms",
        "service p99 ms",
        "mean batch",
        "SLO",
        "verdict",
    ]);
    let mut any = false;
    for w in &s.workers {
        let Some(v) = &w.serve else { continue };
        any = true;
        let slo = v.slo.map_or_else(
            || "-".to_owned(),
            |a| {
                let verdict = if a.meets {
                    "met".to_owned()
                } else if !a.percentile_met {
                    "missed".to_owned()
                } else if v.overloaded {
                    "missed: overloaded".to_owned()
                } else {
                    format!(
                        "not shown: needs {} requests",
                        a.early_stopping_requests_needed
                    )
                };
                format!(
                    "{} ms at p{}: {:.2} % ({verdict})",
                    a.slo_ms,
                    a.quantile * 100.0,
                    a.attainment * 100.0,
                )
            },
        );
        t.row(vec![
            w.replica.to_string(),
            v.requests.to_string(),
            f2(v.offered_per_s),
            f2(v.completed_per_s),
            v.not_completed.to_string(),
            opt_ms(v.latency_ms.p50),
            opt_ms(v.latency_ms.p90),
            opt_ms(v.latency_ms.p99),
            opt_ms(v.latency_ms.p999),
            opt_ms(v.latency_ms.max),
            opt_ms(v.queueing_ms.p99),
            opt_ms(v.service_ms.p99),
            f2(v.mean_batch_size),
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

/// Why each overloaded serve worker is judged so.
pub(crate) fn overload_lines(s: &CohortSummary) -> Vec<String> {
    s.workers
        .iter()
        .filter_map(|w| w.serve.as_ref().map(|v| (w.replica, v)))
        .flat_map(|(r, v)| {
            v.overload_reasons
                .iter()
                .map(move |reason| format!("replica {r} overloaded: {reason}"))
        })
        .collect()
}
