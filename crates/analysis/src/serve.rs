//! Request-level figures of a serve worker: latency, queueing and service, batch sizes, SLO
//! attainment and the overload verdict, streamed from `requests.jsonl`.
//!
//! Only requests whose scheduled arrival lies in the common interval count. A request is
//! completed when its batch completed by the interval's end; the others (queued or running at
//! the end) are never dropped: they count as requests, as SLO misses in the attainment, and rank
//! above every completed request in the latency percentiles (pessimistic: a percentile judged
//! this way can only be too high, never too low). LoadGen's early-stopping test counts the ones
//! still within the objective at the end (the window closed on them) as *censored*, neither met
//! nor missed: otherwise the last arrivals of every window would count against it.
//!
//! The file is read once, line by line; memory is three fixed histograms
//! ([`crate::histogram::LogHistogram`]) and a few counters, whatever the number of requests.
//! SLO attainment is counted exactly, request by request, not read off a histogram.

use std::collections::BTreeMap;
use std::path::Path;

use coload_cohort_schema::{
    RequestLatencyMs, RequestReader, SchemaError, ServeSummary, SloAttainment,
};

use statrs::function::beta::checked_beta_reg;

use crate::histogram::{LogHistogram, RELATIVE_ERROR};
use crate::interval::Span;
use crate::stats::{P50, P90, P99, P999, nearest_rank};

/// Nanoseconds per millisecond.
const NS_PER_MS: f64 = 1e6;

/// The share of requests that may be unfinished at the interval's end before the run counts as
/// overloaded (together with [`BACKLOG_BATCHES`]). A server that keeps up ends with at most the
/// batch it is running and the requests waiting to form the next one; 1 % leaves room for that
/// at low rates, and a backlog growing for the whole window exceeds it quickly (a server 1 %
/// short of the offered rate for 45 s leaves about 1 % unfinished, and the growth rule below
/// catches what is less).
pub const BACKLOG_FRACTION: f64 = 0.01;

/// Unfinished requests always allowed, in batches of `max_batch`: the batch running at the end
/// and the one forming.
pub const BACKLOG_BATCHES: u64 = 2;

/// The backlog counts as growing when the mean queueing delay of requests arriving in the last
/// quarter of the interval exceeds this multiple of the first quarter's ...
pub const GROWTH_RATIO: f64 = 2.0;

/// ... plus this floor, nanoseconds, so that microsecond jitter around a small wait is not
/// mistaken for growth. A stable queue's mean wait is the same in both quarters up to noise; an
/// overloaded one grows linearly, so its last quarter waits about seven times its first.
pub const GROWTH_FLOOR_NS: u64 = 1_000_000;

/// The confidence of the early-stopping test, as in MLPerf LoadGen (`loadgen/results.cc`).
pub const EARLY_STOPPING_CONFIDENCE: f64 = 0.99;

/// The probability of `misses` or fewer misses in `met + misses` independent requests that
/// each meet the objective with probability `p`: the binomial CDF, written as the regularized
/// incomplete beta `I_p(met, misses + 1)` as LoadGen's `early_stopping.cc` does.
#[must_use]
pub fn early_stopping_odds(met: u64, misses: u64, p: f64) -> f64 {
    if met == 0 {
        return 1.0;
    }
    checked_beta_reg(met as f64, (misses + 1) as f64, p).unwrap_or(1.0)
}

/// The fewest requests meeting the objective that, with `misses` misses, pass LoadGen's early
/// stopping test for quantile `p`: the least `met` with
/// `early_stopping_odds(met, misses, p) <= 1 - EARLY_STOPPING_CONFIDENCE` (459 for p99 without a
/// miss, as in LoadGen). The odds fall as `met` grows, so a doubling then a bisection finds it.
#[must_use]
pub fn early_stopping_min_met(misses: u64, p: f64) -> u64 {
    let limit = 1.0 - EARLY_STOPPING_CONFIDENCE;
    let mut hi = 1u64;
    while early_stopping_odds(hi, misses, p) > limit {
        if hi > 1 << 40 {
            return u64::MAX;
        }
        hi *= 2;
    }
    let mut lo = hi / 2 + 1;
    if hi == 1 {
        return 1;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if early_stopping_odds(mid, misses, p) <= limit {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// What one serve worker's `requests.jsonl` reduces to.
#[derive(Debug, Clone)]
pub(crate) struct ServeScan {
    /// Requests listed in the whole file.
    pub(crate) file_requests: u64,
    /// Dispatched batches listed in the whole file.
    pub(crate) file_batches: u64,
    requests: u64,
    completed: u64,
    max_age_ns: Option<u64>,
    latency: LogHistogram,
    queueing: LogHistogram,
    service: LogHistogram,
    slo_met: u64,
    /// Requests not completed by the end whose age then was still within the objective.
    slo_censored: u64,
    batches: u64,
    batch_requests: u64,
    batch_sizes: BTreeMap<u32, u64>,
    padded_sizes: BTreeMap<u32, u64>,
    quarter_wait_sum_ns: [u128; 4],
    quarter_count: [u64; 4],
}

/// Streams `path`, keeping the requests whose arrival lies in `common`; `slo_ns` counts those
/// completing within it.
pub(crate) fn scan_requests(
    path: &Path,
    common: Span,
    slo_ns: Option<u64>,
) -> Result<ServeScan, SchemaError> {
    let reader = RequestReader::open(path)?;
    let (start, end) = (common.start_unix_ns, common.end_unix_ns);
    let len = common.len_ns().max(1);
    let mut s = ServeScan {
        file_requests: 0,
        file_batches: 0,
        requests: 0,
        completed: 0,
        max_age_ns: None,
        latency: LogHistogram::new(),
        queueing: LogHistogram::new(),
        service: LogHistogram::new(),
        slo_met: 0,
        slo_censored: 0,
        batches: 0,
        batch_requests: 0,
        batch_sizes: BTreeMap::new(),
        padded_sizes: BTreeMap::new(),
        quarter_wait_sum_ns: [0; 4],
        quarter_count: [0; 4],
    };
    for line in reader {
        let line = line?;
        s.file_requests += line.arrivals_unix_ns.len() as u64;
        if let Some(dispatch) = line.dispatch_unix_ns {
            s.file_batches += 1;
            if dispatch >= start && dispatch < end {
                let n = line.arrivals_unix_ns.len() as u32;
                s.batches += 1;
                s.batch_requests += u64::from(n);
                *s.batch_sizes.entry(n).or_default() += 1;
                *s.padded_sizes.entry(line.padded).or_default() += 1;
            }
        }
        let done = line
            .dispatch_unix_ns
            .zip(line.complete_unix_ns)
            .filter(|&(_, c)| c <= end);
        for &a in &line.arrivals_unix_ns {
            if a < start || a >= end {
                continue;
            }
            s.requests += 1;
            let quarter = ((u128::from(a - start) * 4) / u128::from(len)).min(3) as usize;
            let wait = if let Some((dispatch, complete)) = done {
                s.completed += 1;
                let latency = complete - a;
                s.latency.record(latency);
                s.queueing.record(dispatch - a);
                s.service.record(complete - dispatch);
                if slo_ns.is_some_and(|slo| latency <= slo) {
                    s.slo_met += 1;
                }
                dispatch - a
            } else {
                let age = end - a;
                s.max_age_ns = Some(s.max_age_ns.map_or(age, |m| m.max(age)));
                // The window closed on it before it could miss: censored, not a miss.
                if slo_ns.is_some_and(|slo| age <= slo) {
                    s.slo_censored += 1;
                }
                // Its wait so far: to its dispatch if it ran across the end, else to the end.
                line.dispatch_unix_ns.map_or(age, |d| d.min(end) - a)
            };
            s.quarter_wait_sum_ns[quarter] += u128::from(wait);
            s.quarter_count[quarter] += 1;
        }
    }
    Ok(s)
}

/// The objective to judge requests by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Slo {
    pub(crate) ms: f64,
    pub(crate) quantile: f64,
}

impl Slo {
    pub(crate) fn ns(self) -> u64 {
        (self.ms * NS_PER_MS).round() as u64
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS
}

/// Percentiles over `requests` values of which `hist` holds the completed ones (the rest rank
/// above them).
fn request_latency(hist: &LogHistogram, requests: u64) -> RequestLatencyMs {
    let ranks = [P50, P90, P99, P999].map(|p| {
        if requests == 0 {
            0
        } else {
            nearest_rank(requests, p)
        }
    });
    let picked = hist.at_ranks(&ranks);
    RequestLatencyMs {
        p50: picked[0].map(ms),
        p90: picked[1].map(ms),
        p99: picked[2].map(ms),
        p999: picked[3].map(ms),
        mean: hist.mean().map(|m| m / NS_PER_MS),
        max: hist.max().map(ms),
    }
}

/// The figures of one serve worker over an interval of `common_s` seconds.
pub(crate) fn serve_summary(
    scan: &ServeScan,
    common_s: f64,
    max_batch: u32,
    slo: Option<Slo>,
) -> ServeSummary {
    let not_completed = scan.requests - scan.completed;
    let mut reasons = Vec::new();
    let allowance = ((scan.requests as f64 * BACKLOG_FRACTION).ceil() as u64)
        .max(BACKLOG_BATCHES * u64::from(max_batch));
    if not_completed > allowance {
        reasons.push(format!(
            "{not_completed} of {} requests ({:.1} %) were still queued or running at the end \
             (allowed: {allowance}): the completed rate {:.1}/s fell short of the offered {:.1}/s",
            scan.requests,
            100.0 * not_completed as f64 / scan.requests.max(1) as f64,
            scan.completed as f64 / common_s,
            scan.requests as f64 / common_s
        ));
    }
    let quarter_mean = |q: usize| {
        (scan.quarter_count[q] > 0)
            .then(|| scan.quarter_wait_sum_ns[q] as f64 / scan.quarter_count[q] as f64)
    };
    if let (Some(first), Some(last)) = (quarter_mean(0), quarter_mean(3))
        && last > GROWTH_RATIO * first + GROWTH_FLOOR_NS as f64
    {
        reasons.push(format!(
            "the backlog kept growing: the mean queueing delay rose from {:.3} ms (requests of \
             the first quarter of the interval) to {:.3} ms (last quarter)",
            first / NS_PER_MS,
            last / NS_PER_MS
        ));
    }
    let overloaded = !reasons.is_empty();
    let slo = slo.map(|slo| {
        let needed = if scan.requests == 0 {
            1
        } else {
            nearest_rank(scan.requests, (slo.quantile * 1000.0).round() as u32)
        };
        let percentile_met = scan.requests > 0 && scan.slo_met >= needed;
        // In-flight requests the window's end cut off before they could miss are neither
        // met nor missed in the test; every other unanswered request is a miss.
        let misses = scan.requests - scan.slo_met - scan.slo_censored;
        let min_met = early_stopping_min_met(misses, slo.quantile);
        let early_stopping_pass = scan.slo_met >= min_met;
        SloAttainment {
            slo_ms: slo.ms,
            quantile: slo.quantile,
            met: scan.slo_met,
            attainment: scan.slo_met as f64 / scan.requests.max(1) as f64,
            percentile_met,
            early_stopping_pass,
            early_stopping_requests_needed: min_met.saturating_add(misses),
            censored: scan.slo_censored,
            meets: percentile_met && early_stopping_pass && !overloaded,
        }
    });
    ServeSummary {
        requests: scan.requests,
        completed: scan.completed,
        not_completed,
        not_completed_max_age_ms: scan.max_age_ns.map(ms),
        offered_per_s: scan.requests as f64 / common_s,
        completed_per_s: scan.completed as f64 / common_s,
        latency_ms: request_latency(&scan.latency, scan.requests),
        queueing_ms: request_latency(&scan.queueing, scan.completed),
        service_ms: request_latency(&scan.service, scan.completed),
        batches: scan.batches,
        mean_batch_size: if scan.batches == 0 {
            0.0
        } else {
            scan.batch_requests as f64 / scan.batches as f64
        },
        batch_size_histogram: scan.batch_sizes.clone(),
        padded_size_histogram: scan.padded_sizes.clone(),
        slo,
        overloaded,
        overload_reasons: reasons,
        percentiles_are_lower_bounds: overloaded,
        percentile_relative_error: RELATIVE_ERROR,
    }
}

/// The request latency at `quantile` among those a summary keeps (p50, p90, p99, p99.9),
/// milliseconds; `None` for another quantile, or where the summary has none (the quantile falls
/// on an unfinished request). A capacity search's objective sits at one of these quantiles in
/// practice (p99 by default); the load curve of the report reads it here.
#[must_use]
pub fn request_latency_at(l: &RequestLatencyMs, quantile: f64) -> Option<f64> {
    [(P50, l.p50), (P90, l.p90), (P99, l.p99), (P999, l.p999)]
        .into_iter()
        .find(|(per_mille, _)| (f64::from(*per_mille) / 1000.0 - quantile).abs() < 1e-9)
        .and_then(|(_, ms)| ms)
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "the figures are exact by construction and the tests assert them exactly"
)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    const MS: u64 = 1_000_000;

    /// Writes a requests.jsonl of (dispatch, complete, padded, arrivals) batches (ms), then the
    /// queued arrivals.
    fn file(batches: &[(u64, u64, u32, &[u64])], queued: &[u64]) -> tempfile::TempPath {
        let mut text = String::new();
        let mut first = 0;
        for (i, (d, c, p, arr)) in batches.iter().enumerate() {
            let arr: Vec<String> = arr.iter().map(|a| (a * MS).to_string()).collect();
            writeln!(
                text,
                r#"{{"batch":{i},"first_request":{first},"dispatch_unix_ns":{},"complete_unix_ns":{},"padded":{p},"arrivals_unix_ns":[{}]}}"#,
                d * MS,
                c * MS,
                arr.join(",")
            )
            .unwrap();
            first += arr.len();
        }
        if !queued.is_empty() {
            let arr: Vec<String> = queued.iter().map(|a| (a * MS).to_string()).collect();
            writeln!(
                text,
                r#"{{"batch":null,"first_request":{first},"dispatch_unix_ns":null,"complete_unix_ns":null,"padded":0,"arrivals_unix_ns":[{}]}}"#,
                arr.join(",")
            )
            .unwrap();
        }
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f.into_temp_path()
    }

    fn span(a_ms: u64, b_ms: u64) -> Span {
        Span {
            start_unix_ns: a_ms * MS,
            end_unix_ns: b_ms * MS,
        }
    }

    #[test]
    fn requests_outside_the_interval_are_left_out_and_unfinished_ones_kept() {
        // Interval [10, 100) ms. Request at 5 ms: outside. Batch 1 (arrivals 10, 12; dispatch
        // 14, complete 20): latencies 10 and 8. Batch 2 (arrival 95; dispatch 96, complete 104):
        // running at the end. Queued: 99. So 4 requests, 2 completed.
        let p = file(
            &[(5, 9, 1, &[5]), (14, 20, 2, &[10, 12]), (96, 104, 1, &[95])],
            &[99],
        );
        let scan = scan_requests(&p, span(10, 100), Some(9 * MS)).unwrap();
        assert_eq!((scan.file_requests, scan.file_batches), (5, 3));
        let s = serve_summary(
            &scan,
            0.09,
            1,
            Some(Slo {
                ms: 9.0,
                quantile: 0.5,
            }),
        );
        assert_eq!((s.requests, s.completed, s.not_completed), (4, 2, 2));
        assert_eq!(s.not_completed_max_age_ms, Some(5.0));
        // Ranks: p50 -> 2nd of 4 (10 ms); p90 -> 4th: not completed, so null.
        assert_eq!(s.latency_ms.p50, Some(10.0));
        assert_eq!(s.latency_ms.p90, None);
        assert_eq!(s.latency_ms.max, Some(10.0));
        assert_eq!(s.latency_ms.mean, Some(9.0));
        assert_eq!(s.queueing_ms.p50, Some(2.0));
        assert_eq!(s.service_ms.max, Some(6.0));
        // Batches dispatched in the interval: sizes 2 and 1.
        assert_eq!(s.batches, 2);
        assert_eq!(s.batch_size_histogram, BTreeMap::from([(1, 1), (2, 1)]));
        assert_eq!(s.mean_batch_size, 1.5);
        // SLO 9 ms: only the 8 ms request meets it; 1 of 4 < the 2 needed for p50.
        let slo = s.slo.unwrap();
        assert_eq!(
            (slo.met, slo.attainment, slo.percentile_met),
            (1, 0.25, false)
        );
        assert!(!slo.meets);
        // The two the end cut off (ages 5 and 1 ms, within 9) are censored in the early-stopping
        // test: 1 met against 1 missed (the 10 ms request), not against 3.
        assert_eq!(slo.censored, 2);
        assert_eq!(
            slo.early_stopping_requests_needed,
            early_stopping_min_met(1, 0.5) + 1
        );
        // 2 unfinished of 4 exceeds the allowance of max(1, 2 * 1).
        assert!(!s.overloaded, "{:?}", s.overload_reasons);
    }

    #[test]
    fn a_growing_backlog_is_overloaded() {
        // Arrivals every 10 ms over [0, 400); service 15 ms each: the wait grows by 5 ms a
        // request. 40 requests, about 26 served, the rest queued.
        let mut batches = Vec::new();
        let arrivals: Vec<u64> = (0..40).map(|i| i * 10).collect();
        let mut t = 0;
        let mut served = 0;
        for a in &arrivals {
            let d = t.max(*a);
            if d >= 400 {
                break;
            }
            batches.push((d, d + 15, 1, std::slice::from_ref(a)));
            t = d + 15;
            served += 1;
        }
        let p = file(&batches, &arrivals[served..]);
        let scan = scan_requests(&p, span(0, 400), None).unwrap();
        let s = serve_summary(&scan, 0.4, 1, None);
        assert!(s.overloaded);
        assert!(s.percentiles_are_lower_bounds);
        assert_eq!(s.overload_reasons.len(), 2, "{:?}", s.overload_reasons);
        assert!(s.overload_reasons[0].contains("fell short of the offered 100.0/s"));
        assert!(s.overload_reasons[1].contains("kept growing"));
    }

    #[test]
    fn a_server_that_keeps_up_is_not_overloaded() {
        // Arrivals every 10 ms, service 5 ms: no wait, nothing left at the end but the last.
        let arrivals: Vec<u64> = (0..40).map(|i| i * 10).collect();
        let batches: Vec<(u64, u64, u32, &[u64])> = arrivals
            .iter()
            .map(|a| (*a, a + 5, 1, std::slice::from_ref(a)))
            .collect();
        let p = file(&batches, &[]);
        let scan = scan_requests(&p, span(0, 400), Some(5 * MS)).unwrap();
        let s = serve_summary(
            &scan,
            0.4,
            1,
            Some(Slo {
                ms: 5.0,
                quantile: 0.99,
            }),
        );
        assert!(!s.overloaded, "{:?}", s.overload_reasons);
        assert_eq!(s.completed, 40);
        assert_eq!(s.latency_ms.p99, Some(5.0));
        let slo = s.slo.unwrap();
        assert_eq!(
            (slo.met, slo.attainment, slo.percentile_met),
            (40, 1.0, true)
        );
        // 40 requests cannot show p99 with 99 % confidence (LoadGen needs 459).
        assert!(!slo.early_stopping_pass && !slo.meets);
        assert_eq!(slo.early_stopping_requests_needed, 459);
        // An objective 1 ns tighter is missed by every request.
        let scan = scan_requests(&p, span(0, 400), Some(5 * MS - 1)).unwrap();
        assert_eq!(scan.slo_met, 0);
    }

    #[test]
    fn early_stopping_matches_loadgen() {
        // LoadGen's reference value: 459 requests without a miss for p99
        // (ceil(ln 0.01 / ln 0.99)); the rest by direct binomial sums (Python, exact).
        assert_eq!(early_stopping_min_met(0, 0.99), 459);
        assert_eq!(early_stopping_min_met(1, 0.99), 661);
        assert_eq!(early_stopping_min_met(10, 0.99), 2000);
        assert_eq!(early_stopping_min_met(0, 0.9), 44);
        assert_eq!(early_stopping_min_met(5, 0.9), 122);
        assert_eq!(early_stopping_min_met(100, 0.9), 1146);
        assert_eq!(early_stopping_min_met(0, 0.5), 7);
        // 0.99^459 <= 0.01 < 0.99^458.
        assert!(early_stopping_odds(459, 0, 0.99) <= 0.01);
        assert!(early_stopping_odds(458, 0, 0.99) > 0.01);
        assert!((early_stopping_odds(10, 0, 0.5) - 0.5f64.powi(10)).abs() < 1e-12);
    }

    #[test]
    fn the_latency_at_a_quantile_is_read_only_where_the_summary_keeps_it() {
        let l = RequestLatencyMs {
            p50: Some(1.0),
            p90: Some(2.0),
            p99: Some(3.0),
            p999: None,
            mean: Some(1.5),
            max: Some(9.0),
        };
        assert_eq!(request_latency_at(&l, 0.5), Some(1.0));
        assert_eq!(request_latency_at(&l, 0.9), Some(2.0));
        assert_eq!(request_latency_at(&l, 0.99), Some(3.0));
        assert_eq!(request_latency_at(&l, 0.999), None, "unfinished at p99.9");
        assert_eq!(request_latency_at(&l, 0.95), None, "not kept");
    }
}
