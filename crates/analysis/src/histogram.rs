//! A fixed-size log-linear latency histogram for request latencies.
//!
//! A serve worker may record tens of millions of requests; exact nearest-rank percentiles would
//! need every value in memory (80 MB per 10 M requests, growing with the file). This histogram
//! has a fixed size whatever the count, in the style of HdrHistogram (Gil Tene): values below
//! 2^11 ns get a bucket each, and every power-of-two range above is split into 2^11 equal
//! buckets, so a bucket is never wider than 1/2048 of its lower edge.
//!
//! Each bucket keeps its count and the **largest value it received**. A percentile is found by
//! walking the counts to the bucket that holds the nearest-rank value, and is reported as that
//! bucket's largest value. So the reported percentile is always a value that was measured, at
//! least the exact nearest-rank value and at most 1/2048 (0.049 %) above it, and it is exact
//! when the bucket holds one distinct value (as in hand-computed fixtures). Rounding up, never
//! down, keeps an SLO judged on it on the safe side. Memory: two `u64` per bucket, 83 968 buckets,
//! 1.3 MiB per histogram.

/// Bits of sub-bucket resolution per power of two.
pub const SUB_BITS: u32 = 11;
/// Buckets per power of two (and the values below it that get one bucket each).
const SUB: u64 = 1 << SUB_BITS;
/// The highest power of two with its own buckets: 2^50 ns is 13 days. Larger values share the
/// last bucket (its largest value is still kept exactly).
const MAX_EXPONENT: u32 = 50;
/// Number of buckets.
const BUCKETS: usize = (SUB + (MAX_EXPONENT - SUB_BITS + 1) as u64 * SUB) as usize;

/// The largest relative amount by which a reported percentile exceeds the exact one.
pub const RELATIVE_ERROR: f64 = 1.0 / SUB as f64;

/// A log-linear histogram of nanosecond values with each bucket's largest value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHistogram {
    counts: Vec<u64>,
    maxes: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LogHistogram {
    /// An empty histogram (allocates its fixed buckets).
    #[must_use]
    pub fn new() -> Self {
        LogHistogram {
            counts: vec![0; BUCKETS],
            maxes: vec![0; BUCKETS],
            total: 0,
            sum: 0,
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let exponent = v.ilog2();
        if exponent > MAX_EXPONENT {
            return BUCKETS - 1;
        }
        let shift = exponent - SUB_BITS;
        let mantissa = (v >> shift) - SUB;
        (SUB + u64::from(exponent - SUB_BITS) * SUB + mantissa) as usize
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = Self::index(v);
        self.counts[i] += 1;
        if v > self.maxes[i] {
            self.maxes[i] = v;
        }
        self.total += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Their exact mean (`None` when empty).
    #[must_use]
    pub fn mean(&self) -> Option<f64> {
        (self.total > 0).then(|| self.sum as f64 / self.total as f64)
    }

    /// Their exact maximum (`None` when empty).
    #[must_use]
    pub fn max(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max)
    }

    /// The values at the given ascending 1-based ranks (the largest value of the bucket holding
    /// each rank); `None` for a rank beyond the values recorded.
    #[must_use]
    pub fn at_ranks(&self, ranks: &[u64]) -> Vec<Option<u64>> {
        let mut out = Vec::with_capacity(ranks.len());
        let mut seen = 0u64;
        let mut bucket = 0usize;
        for &rank in ranks {
            if rank == 0 || rank > self.total {
                out.push(None);
                continue;
            }
            while seen + self.counts[bucket] < rank {
                seen += self.counts[bucket];
                bucket += 1;
            }
            out.push(Some(self.maxes[bucket]));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_2048_and_narrow_above() {
        for v in [0, 1, 2047] {
            assert_eq!(LogHistogram::index(v), v as usize);
        }
        assert_eq!(LogHistogram::index(2048), 2048);
        assert_eq!(LogHistogram::index(4095), 4095);
        assert_eq!(LogHistogram::index(4096), 4096);
        assert_eq!(LogHistogram::index(4097), 4096, "width 2 from 4096");
        // Monotone, and never wider than 1/2048 of the value.
        let mut previous = 0;
        for k in 0..2000u64 {
            let v = k * k * 997 + k;
            let i = LogHistogram::index(v);
            assert!(i >= previous);
            previous = i;
        }
        assert_eq!(LogHistogram::index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_are_measured_values_within_the_bound() {
        let mut h = LogHistogram::new();
        let values: Vec<u64> = (1..=100_000u64)
            .map(|i| i * 7919 % 1_000_003 * 1000)
            .collect();
        for &v in &values {
            h.record(v);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        let ranks = [1, 500, 50_000, 99_000, 99_900, 100_000];
        for (rank, got) in ranks.iter().zip(h.at_ranks(&ranks)) {
            let exact = sorted[(*rank - 1) as usize];
            let got = got.unwrap();
            assert!(got >= exact, "rank {rank}: {got} < {exact}");
            assert!(
                (got - exact) as f64 <= exact as f64 * RELATIVE_ERROR,
                "rank {rank}: {got} vs {exact}"
            );
            assert!(values.contains(&got), "a reported value was measured");
        }
        assert_eq!(h.at_ranks(&[100_001, 0]), [None, None]);
        assert_eq!(h.max(), sorted.last().copied());
        assert_eq!(h.count(), 100_000);
    }

    #[test]
    fn distinct_values_in_distinct_buckets_are_exact() {
        let mut h = LogHistogram::new();
        for v in [5_000_000u64, 20_000_000, 7_000_000, 7_000_000] {
            h.record(v);
        }
        assert_eq!(
            h.at_ranks(&[1, 2, 3, 4]),
            [
                Some(5_000_000),
                Some(7_000_000),
                Some(7_000_000),
                Some(20_000_000)
            ]
        );
        assert_eq!(h.mean(), Some(9_750_000.0));
        assert!(LogHistogram::new().mean().is_none());
    }
}
