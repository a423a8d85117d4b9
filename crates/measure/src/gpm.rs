//! GPM readings over a window: what the worker records for its own window and the summarizer
//! for the cohort's common interval, by one rule.

use coload_cohort_schema::{ActivityScope, GpmMetrics, GpmRecord, GpmStats, MeanMax};

/// Mean and maximum of each metric over the `records` of `scope` lying entirely inside
/// `[start_unix_ns, end_unix_ns]`, and how many there were.
///
/// The mean weights each reading by its interval's length (a GPM reading is a rate over its
/// interval, and intervals stretch when the sampling thread is late), so it is the metric over
/// the time the readings cover. A metric missing from a reading is left out of that metric
/// only. A reading that crosses either end is left out, as batches are.
#[must_use]
pub fn gpm_window(
    records: &[GpmRecord],
    scope: ActivityScope,
    start_unix_ns: u64,
    end_unix_ns: u64,
) -> (GpmStats, u64) {
    let inside: Vec<&GpmRecord> = records
        .iter()
        .filter(|r| {
            r.scope == scope
                && r.start_unix_ns >= start_unix_ns
                && r.end_unix_ns <= end_unix_ns
                && r.end_unix_ns > r.start_unix_ns
        })
        .collect();
    let stats = GpmMetrics::from_fn(|i| {
        let (mut weight, mut sum, mut max) = (0.0, 0.0, f64::NEG_INFINITY);
        for r in &inside {
            if let (_, Some(v)) = r.metrics.fields()[i] {
                let w = (r.end_unix_ns - r.start_unix_ns) as f64;
                weight += w;
                sum += w * v;
                max = max.max(*v);
            }
        }
        (weight > 0.0).then(|| MeanMax {
            mean: sum / weight,
            max,
        })
    });
    (stats, inside.len() as u64)
}
