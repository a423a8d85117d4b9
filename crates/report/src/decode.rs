//! The decode workers' token figures, for both summary outputs.

use coload_cohort_schema::{CohortSummary, LatencyMs};

use super::document::{Table, f2, f3};

/// What the decode columns mean, printed under the table.
pub(crate) const DECODE_NOTE: &str = "TPOT = time per output token: one decode step of the \
     batch (every sequence gets one token); prefill = the batch's prompt pass, which yields the \
     first token; nearest-rank percentiles over the common interval; read GB/s = the bytes a \
     decode step must read (weights and KV cache, as the worker recorded them) over the TPOT \
     p50, to hold against the card's copy bandwidth (the floor is those bytes over it)";

fn ms(x: Option<&LatencyMs>, pick: fn(&LatencyMs) -> f64) -> String {
    x.map_or_else(|| "-".to_owned(), |l| f3(pick(l)))
}

/// The read rate a decode step implies, GB/s: its bytes over the median step.
fn read_rate_gb_s(bytes: Option<u64>, tpot: Option<&LatencyMs>) -> Option<f64> {
    let (bytes, ms) = (bytes?, tpot?.p50);
    (ms > 0.0).then(|| bytes as f64 / (ms * 1e-3) / 1e9)
}

/// The decode workers' figures, when the cohort has any.
pub(crate) fn decode_table(s: &CohortSummary) -> Option<Table> {
    let mut t = Table::new(&[
        "replica",
        "model",
        "batch",
        "prompt",
        "output",
        "tokens/s",
        "prefills",
        "prefill p50 ms",
        "prefill p99 ms",
        "TPOT p50 ms",
        "TPOT p90 ms",
        "TPOT p99 ms",
        "TPOT p99.9 ms",
        "KV cache MiB",
        "read MB a step",
        "read GB/s at TPOT p50",
    ]);
    let mut any = false;
    for w in &s.workers {
        let Some(d) = &w.decode else { continue };
        any = true;
        t.row(vec![
            w.replica.to_string(),
            w.model.clone().unwrap_or_else(|| "-".to_owned()),
            d.batch_size.to_string(),
            d.prompt_tokens.to_string(),
            d.output_tokens.to_string(),
            f2(d.tokens_per_s),
            d.prefills.to_string(),
            ms(d.prefill_ms.as_ref(), |l| l.p50),
            ms(d.prefill_ms.as_ref(), |l| l.p99),
            ms(d.tpot_ms.as_ref(), |l| l.p50),
            ms(d.tpot_ms.as_ref(), |l| l.p90),
            ms(d.tpot_ms.as_ref(), |l| l.p99),
            ms(d.tpot_ms.as_ref(), |l| l.p999),
            d.kv_cache_bytes
                .map_or_else(|| "-".to_owned(), |b| f2(b as f64 / (1u64 << 20) as f64)),
            d.decode_read_bytes
                .map_or_else(|| "-".to_owned(), |b| f2(b as f64 / 1e6)),
            read_rate_gb_s(d.decode_read_bytes, d.tpot_ms.as_ref())
                .map_or_else(|| "-".to_owned(), f2),
        ]);
    }
    any.then_some(t)
}
