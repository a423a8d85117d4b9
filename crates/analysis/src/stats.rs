//! Descriptive statistics of batch latencies and worker rates.
//!
//! - Percentiles are **nearest-rank**: the `ceil(p * n)`-th smallest of `n` values (rank at least
//!   1), as defined in NIST's Engineering Statistics Handbook and Hyndman & Fan (1996), "Sample
//!   Quantiles in Statistical Packages", definition 1. It always returns a value that was
//!   measured, never an interpolation between two batches. `p` is given in parts per thousand so
//!   that the rank is computed in integers: `0.999 * 1000` in floating point is not exactly 999
//!   and `ceil` would then pick the wrong rank.
//! - Standard deviation is the sample one (divisor `n - 1`), 0 for a single value.
//! - Jain's fairness index (Jain, Chiu & Hawe, "A Quantitative Measure of Fairness and
//!   Discrimination for Resource Allocation in Shared Computer Systems", DEC-TR-301, 1984):
//!   `(sum x)^2 / (n * sum x^2)`, 1 when every worker gets the same rate, `1/n` when one gets
//!   everything.
//! - Confidence intervals of a mean are two-sided Student-t intervals (NIST handbook, section
//!   7.2.2.1): `mean +- t(0.975, n - 1) * s / sqrt(n)`.

use coload_cohort_schema::{Estimate, LatencyMs};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Nanoseconds per millisecond.
const NS_PER_MS: f64 = 1e6;

/// The percentiles a [`LatencyMs`] reports, in parts per thousand.
pub const P50: u32 = 500;
/// 90th percentile, parts per thousand.
pub const P90: u32 = 900;
/// 99th percentile, parts per thousand.
pub const P99: u32 = 990;
/// 99.9th percentile, parts per thousand.
pub const P999: u32 = 999;
/// 99.99th percentile, parts per ten thousand (finer than the permille constants above).
pub const P9999_PER_10K: u64 = 9999;

/// The 1-based nearest rank of the percentile `per_10k / 10000` among `n` values (the same rule
/// as [`nearest_rank`], at a finer step, for p99.99).
#[must_use]
pub fn nearest_rank_10k(n: u64, per_10k: u64) -> u64 {
    let rank = (u128::from(per_10k.min(10_000)) * u128::from(n)).div_ceil(10_000);
    (rank as u64).clamp(1, n.max(1))
}

/// The 1-based nearest rank of percentile `permille` among `n` values: `ceil(permille * n /
/// 1000)`, at least 1 and at most `n`. `n` must be positive.
#[must_use]
pub fn nearest_rank(n: u64, permille: u32) -> u64 {
    let permille = u128::from(permille.min(1000));
    let rank = (permille * u128::from(n)).div_ceil(1000);
    (rank as u64).clamp(1, n.max(1))
}

/// The nearest-rank percentile of `sorted` (ascending): the `ceil(permille / 1000 * n)`-th
/// smallest value; `permille = 0` gives the minimum. `None` for no values.
#[must_use]
pub fn percentile(sorted: &[u64], permille: u32) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = nearest_rank(sorted.len() as u64, permille);
    sorted.get((rank - 1) as usize).copied()
}

/// The fewest values for which the nearest-rank percentile `permille` is not simply the
/// maximum: `1 / (1 - p)` (10 for p90, 100 for p99, 1000 for p99.9).
#[must_use]
pub fn min_count_for(permille: u32) -> u64 {
    let tail = u64::from(1000u32.saturating_sub(permille).max(1));
    1000u64.div_ceil(tail)
}

/// Values taken at the given ascending ranks (1-based) from the union of several ascending
/// slices, walking them once like a merge, without copying them into one.
fn select_ranks(parts: &[&[u64]], ranks: &[u64]) -> Vec<u64> {
    let mut cursors = vec![0usize; parts.len()];
    let mut out = Vec::with_capacity(ranks.len());
    let mut seen = 0u64;
    let mut next = ranks.iter().peekable();
    while next.peek().is_some() {
        // The smallest head among the parts is the next value of the union.
        let mut best: Option<(usize, u64)> = None;
        for (i, part) in parts.iter().enumerate() {
            if let Some(&v) = part.get(cursors[i])
                && best.is_none_or(|(_, b)| v < b)
            {
                best = Some((i, v));
            }
        }
        let Some((i, v)) = best else { break };
        cursors[i] += 1;
        seen += 1;
        while next.peek().is_some_and(|&&r| r == seen) {
            out.push(v);
            next.next();
        }
    }
    out
}

/// Latency statistics, in milliseconds, of the union of ascending slices of nanosecond
/// durations. `None` when there is no value at all.
#[must_use]
pub fn latency_ms(parts: &[&[u64]]) -> Option<LatencyMs> {
    let n: u64 = parts.iter().map(|p| p.len() as u64).sum();
    if n == 0 {
        return None;
    }
    let sum: u128 = parts
        .iter()
        .flat_map(|p| p.iter())
        .map(|&v| u128::from(v))
        .sum();
    let mean_ns = sum as f64 / n as f64;
    let stddev_ns = if n < 2 {
        0.0
    } else {
        let ss: f64 = parts
            .iter()
            .flat_map(|p| p.iter())
            .map(|&v| {
                let d = v as f64 - mean_ns;
                d * d
            })
            .sum();
        (ss / (n - 1) as f64).sqrt()
    };
    let min = parts.iter().filter_map(|p| p.first()).min().copied()?;
    let max = parts.iter().filter_map(|p| p.last()).max().copied()?;
    let ranks = [
        nearest_rank(n, P50),
        nearest_rank(n, P90),
        nearest_rank(n, P99),
        nearest_rank(n, P999),
        nearest_rank_10k(n, P9999_PER_10K),
    ];
    let picked = if let [one] = parts {
        ranks.iter().map(|&r| one[(r - 1) as usize]).collect()
    } else {
        select_ranks(parts, &ranks)
    };
    let ms = |ns: u64| ns as f64 / NS_PER_MS;
    Some(LatencyMs {
        p50: ms(picked[0]),
        p90: ms(picked[1]),
        p99: ms(picked[2]),
        p999: ms(picked[3]),
        p9999: Some(ms(picked[4])),
        mean: mean_ns / NS_PER_MS,
        stddev: stddev_ns / NS_PER_MS,
        min: ms(min),
        max: ms(max),
    })
}

/// The nearest-rank percentiles 0%, 1%, ..., 100% of `sorted`, in milliseconds (101 values;
/// empty for no values).
#[must_use]
pub fn cdf_ms(sorted: &[u64]) -> Vec<f64> {
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..=100u32)
        .filter_map(|pct| percentile(sorted, pct * 10))
        .map(|ns| ns as f64 / NS_PER_MS)
        .collect()
}

/// Jain's fairness index of `rates`: `(sum x)^2 / (n * sum x^2)`.
///
/// Degenerate cases: no rates, or every rate 0 (nobody got anything, so nobody got more than
/// another), give 1.
#[must_use]
pub fn jain_fairness(rates: &[f64]) -> f64 {
    let sum: f64 = rates.iter().sum();
    let sum_sq: f64 = rates.iter().map(|x| x * x).sum();
    if rates.is_empty() || sum_sq == 0.0 {
        return 1.0;
    }
    sum * sum / (rates.len() as f64 * sum_sq)
}

/// Arithmetic mean and sample standard deviation (`n - 1`; 0 for one value). `None` for none.
#[must_use]
pub fn mean_stddev(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return Some((mean, 0.0));
    }
    let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    Some((mean, (ss / (n - 1.0)).sqrt()))
}

/// The two-sided 97.5% quantile of Student's t with `n - 1` degrees of freedom, for a 95%
/// confidence interval of a mean of `n` values. `None` for `n < 2`.
#[must_use]
pub fn t_975(n: usize) -> Option<f64> {
    if n < 2 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
    Some(t.inverse_cdf(0.975))
}

/// Mean, standard deviation and 95% Student-t confidence interval of `values`. `None` for
/// none; the interval is absent for a single value.
#[must_use]
pub fn estimate(values: &[f64]) -> Option<Estimate> {
    let (mean, stddev) = mean_stddev(values)?;
    let half = t_975(values.len()).map(|t| t * stddev / (values.len() as f64).sqrt());
    Some(Estimate {
        n: values.len() as u32,
        mean,
        stddev,
        ci95_low: half.map(|h| mean - h),
        ci95_high: half.map(|h| mean + h),
    })
}

/// [`estimate`] of a quantity that cannot be negative (a rate, a latency): the interval's low
/// end is cut at zero. Two or three noisy repeats (CPU cohorts) can give a half-width above the
/// mean, and `[-120 to 900] samples/s` says nothing a reader can use.
#[must_use]
pub fn estimate_nonnegative(values: &[f64]) -> Option<Estimate> {
    estimate(values).map(|e| Estimate {
        ci95_low: e.ci95_low.map(|l| l.max(0.0)),
        ..e
    })
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "the figures are exact by construction and the tests assert them exactly"
)]
mod tests {
    #[test]
    fn p99_99_takes_the_nearest_rank_at_a_finer_step() {
        assert_eq!(nearest_rank_10k(10_000, P9999_PER_10K), 9999);
        assert_eq!(nearest_rank_10k(20_000, P9999_PER_10K), 19_998);
        // Below 10000 values it is the maximum.
        assert_eq!(nearest_rank_10k(5_000, P9999_PER_10K), 5_000);
        let values: Vec<u64> = (1..=20_000).collect();
        let l = latency_ms(&[&values[..10_000], &values[10_000..]]).unwrap();
        assert_eq!(l.p9999, Some(19_998.0 / 1e6));
    }

    use super::*;

    #[test]
    fn nearest_rank_by_hand() {
        // n = 10: p50 -> 5th, p90 -> 9th, p99 -> ceil(9.9) = 10th, p99.9 -> 10th.
        let v: Vec<u64> = (1..=10).map(|i| i * 100).collect();
        assert_eq!(percentile(&v, P50), Some(500));
        assert_eq!(percentile(&v, P90), Some(900));
        assert_eq!(percentile(&v, P99), Some(1000));
        assert_eq!(percentile(&v, P999), Some(1000));
        assert_eq!(percentile(&v, 0), Some(100));
        assert_eq!(percentile(&v, 1000), Some(1000));
        // n = 1000: p99.9 is exactly rank 999, not 1000 (the floating-point trap).
        assert_eq!(nearest_rank(1000, P999), 999);
        assert_eq!(nearest_rank(100, P99), 99);
        assert_eq!(nearest_rank(101, P99), 100);
    }

    #[test]
    fn degenerate_percentiles() {
        assert_eq!(percentile(&[], P50), None);
        assert_eq!(percentile(&[7], P50), Some(7));
        assert_eq!(percentile(&[7], P999), Some(7));
        assert_eq!(percentile(&[7], 0), Some(7));
        assert!(latency_ms(&[]).is_none());
        assert!(latency_ms(&[&[], &[]]).is_none());
    }

    #[test]
    fn one_batch_has_zero_stddev() {
        let l = latency_ms(&[&[2_500_000]]).unwrap();
        assert_eq!(l.stddev, 0.0);
        assert_eq!(l.p50, 2.5);
        assert_eq!(l.min, 2.5);
        assert_eq!(l.max, 2.5);
    }

    #[test]
    fn latency_of_ten_values_by_hand() {
        let v: Vec<u64> = (1..=10).map(|i| i * 100_000_000).collect();
        let l = latency_ms(&[&v]).unwrap();
        assert_eq!(
            (l.p50, l.p90, l.p99, l.p999),
            (500.0, 900.0, 1000.0, 1000.0)
        );
        assert_eq!(l.mean, 550.0);
        // Deviations +-50, 150, 250, 350, 450 ms twice: 825000 / 9.
        assert!((l.stddev - (825_000.0f64 / 9.0).sqrt()).abs() < 1e-9);
    }

    #[test]
    fn pooled_equals_concatenated() {
        let a = [1u64, 4, 9, 12];
        let b = [2u64, 3, 10];
        let c: [u64; 0] = [];
        let pooled = latency_ms(&[&a, &b, &c]).unwrap();
        let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
        all.sort_unstable();
        assert_eq!(pooled, latency_ms(&[&all]).unwrap());
    }

    #[test]
    fn min_counts() {
        assert_eq!(min_count_for(P90), 10);
        assert_eq!(min_count_for(P99), 100);
        assert_eq!(min_count_for(P999), 1000);
        assert_eq!(min_count_for(1000), 1000);
    }

    #[test]
    fn jain_by_hand() {
        assert_eq!(jain_fairness(&[5.0, 5.0, 5.0]), 1.0);
        assert_eq!(jain_fairness(&[9.0, 0.0, 0.0]), 1.0 / 3.0);
        // (1 + 3)^2 / (2 * (1 + 9)) = 16 / 20.
        assert_eq!(jain_fairness(&[1.0, 3.0]), 0.8);
        assert_eq!(jain_fairness(&[]), 1.0);
        assert_eq!(jain_fairness(&[0.0, 0.0]), 1.0);
        assert_eq!(jain_fairness(&[4.0]), 1.0);
    }

    #[test]
    fn estimate_by_hand() {
        // n = 3: mean 2, s = 1, t(0.975, 2) = 4.302652729749464.
        let e = estimate(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((e.n, e.mean, e.stddev), (3, 2.0, 1.0));
        let half = 4.302_652_729_749_464 / 3f64.sqrt();
        assert!((e.ci95_low.unwrap() - (2.0 - half)).abs() < 1e-9);
        assert!((e.ci95_high.unwrap() - (2.0 + half)).abs() < 1e-9);
        let one = estimate(&[5.0]).unwrap();
        assert_eq!((one.n, one.mean, one.stddev), (1, 5.0, 0.0));
        assert_eq!((one.ci95_low, one.ci95_high), (None, None));
        assert!(estimate(&[]).is_none());
        // Wide noise: the plain interval goes below zero, the non-negative one stops there.
        let wide = [10.0, 400.0];
        assert!(estimate(&wide).unwrap().ci95_low.unwrap() < 0.0);
        let cut = estimate_nonnegative(&wide).unwrap();
        assert_eq!(cut.ci95_low, Some(0.0));
        assert_eq!(cut.ci95_high, estimate(&wide).unwrap().ci95_high);
        assert_eq!(
            estimate_nonnegative(&[10.0, 11.0, 12.0]),
            estimate(&[10.0, 11.0, 12.0])
        );
    }

    #[test]
    fn cdf_has_101_points() {
        let v: Vec<u64> = (1..=200).map(|i| i * 1_000_000).collect();
        let c = cdf_ms(&v);
        assert_eq!(c.len(), 101);
        assert_eq!(c[0], 1.0);
        assert_eq!(c[50], 100.0);
        assert_eq!(c[100], 200.0);
        assert!(cdf_ms(&[]).is_empty());
    }
}
