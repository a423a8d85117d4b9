//! Property tests of the percentile and overlap rules against their definitions.

use coload_analysis::interval::{Span, common_interval, overlap_fraction};
use coload_analysis::stats::{latency_ms, nearest_rank, percentile};
use proptest::prelude::*;

proptest! {
    /// The nearest-rank percentile is a measured value with at least `p * n` values at or below
    /// it and fewer than `p * n` strictly below it: the definition, checked by counting.
    #[test]
    fn percentile_matches_its_definition(
        mut v in prop::collection::vec(0u64..1_000, 1..300),
        permille in 0u32..=1000,
    ) {
        v.sort_unstable();
        let n = v.len() as u64;
        let x = percentile(&v, permille).unwrap();
        prop_assert!(v.contains(&x));
        let at_or_below = v.iter().filter(|&&y| y <= x).count() as u64;
        let below = v.iter().filter(|&&y| y < x).count() as u64;
        // In integers: at_or_below / n >= permille / 1000 > below / n, except that the rank is
        // at least 1 (p = 0 gives the minimum).
        prop_assert!(at_or_below * 1000 >= u64::from(permille) * n);
        prop_assert!(permille == 0 || below * 1000 < u64::from(permille) * n);
        let rank = nearest_rank(n, permille);
        prop_assert!((1..=n).contains(&rank));
        prop_assert_eq!(v[(rank - 1) as usize], x);
    }

    /// Percentiles never decrease with p, and the pooled statistics of several sorted parts are
    /// those of their concatenation.
    #[test]
    fn percentiles_are_monotone_and_pooling_is_concatenation(
        parts in prop::collection::vec(prop::collection::vec(0u64..10_000_000, 0..50), 1..6),
    ) {
        let mut sorted_parts = parts.clone();
        for p in &mut sorted_parts {
            p.sort_unstable();
        }
        let mut all: Vec<u64> = parts.concat();
        all.sort_unstable();
        let slices: Vec<&[u64]> = sorted_parts.iter().map(Vec::as_slice).collect();
        let pooled = latency_ms(&slices);
        let whole = latency_ms(&[&all]);
        prop_assert_eq!(pooled.map(|l| (l.p50, l.p90, l.p99, l.p999, l.min, l.max)),
                        whole.map(|l| (l.p50, l.p90, l.p99, l.p999, l.min, l.max)));
        if let Some(l) = whole {
            prop_assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99);
            prop_assert!(l.p99 <= l.p999 && l.p999 <= l.max);
            prop_assert!(l.min <= l.mean && l.mean <= l.max);
            prop_assert!(l.stddev >= 0.0);
        }
    }

    /// The common interval lies inside every window; overlap fractions are in [0, 1] and
    /// equal |common| / |own|; the worker(s) whose window is the common interval get exactly 1.
    #[test]
    fn overlap_is_common_over_own(
        windows in prop::collection::vec((0u64..1_000, 1u64..10_000), 1..8),
    ) {
        let spans: Vec<Span> = windows
            .iter()
            .map(|&(start, len)| Span { start_unix_ns: start, end_unix_ns: start + len })
            .collect();
        let common = common_interval(&spans);
        for s in &spans {
            let o = overlap_fraction(*s, common);
            prop_assert!((0.0..=1.0).contains(&o));
            match common {
                Some(c) => {
                    prop_assert!(c.start_unix_ns >= s.start_unix_ns && c.end_unix_ns <= s.end_unix_ns);
                    let expected = c.len_ns() as f64 / s.len_ns() as f64;
                    prop_assert!((o - expected).abs() < 1e-12);
                    if *s == c {
                        prop_assert!((o - 1.0).abs() < f64::EPSILON);
                    }
                }
                None => prop_assert!(o.abs() < f64::EPSILON),
            }
        }
    }
}

/// Exhaustive small cases: every n up to 30 and every p in parts per thousand.
#[test]
fn nearest_rank_exhaustive_small() {
    for n in 1u64..=30 {
        for permille in 0u32..=1000 {
            let r = nearest_rank(n, permille);
            // The smallest rank r >= 1 with r / n >= p.
            let expected = (1..=n)
                .find(|&r| r * 1000 >= u64::from(permille) * n)
                .unwrap_or(n);
            assert_eq!(r, expected, "n {n}, permille {permille}");
        }
    }
}
