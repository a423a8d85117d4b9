//! No `batches.jsonl` content may panic the streaming reader; the statistics over whatever it
//! accepts must not panic either.
#![no_main]

use std::path::Path;

use coload_analysis::interval::{Span, common_interval, overlap_fraction};
use coload_analysis::stats;
use coload_cohort_schema::BatchReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut durations = Vec::new();
    let mut spans = Vec::new();
    for record in BatchReader::new(Path::new("batches.jsonl"), data) {
        let Ok(r) = record else { break };
        durations.push(r.duration_ns());
        spans.push(Span {
            start_unix_ns: r.start_unix_ns,
            end_unix_ns: r.end_unix_ns,
        });
    }
    durations.sort_unstable();
    let _ = stats::latency_ms(&[&durations]);
    let _ = stats::cdf_ms(&durations);
    let common = common_interval(&spans);
    for s in &spans {
        let o = overlap_fraction(*s, common);
        assert!((0.0..=1.0).contains(&o));
    }
});
