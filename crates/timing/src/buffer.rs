//! Batch records kept in memory preallocated before the window.

use std::time::Instant;

use coload_cohort_schema::BatchRecord;

use crate::clock::Clock;

/// One batch as the runner saw it: monotonic instants, converted to unix time after the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawBatch {
    /// When the step was called.
    pub start: Instant,
    /// When it returned (device work complete).
    pub end: Instant,
    /// Samples it processed.
    pub samples: u32,
}

/// A fixed-capacity store of batch records that never reallocates.
#[derive(Debug)]
pub struct BatchBuffer {
    records: Vec<RawBatch>,
}

impl BatchBuffer {
    /// Preallocates room for `capacity` batches.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        BatchBuffer {
            records: Vec::with_capacity(capacity),
        }
    }

    /// A capacity for a window of `window_s` seconds whose batches take at least
    /// `fastest_batch_s` seconds (the fastest warmup batch), with a factor of four to spare for
    /// batches that run faster once the device is warm, and never less than one batch per
    /// 100 us of window: with one or two warmup batches the fastest is still cold (seen: a first
    /// CPU batch of 4.8 ms, then 1.1 ms in the window), and a full buffer ends the window. The
    /// floor costs 40 bytes a record, 18 MB for a 45 s window, reserved but only touched as
    /// batches are recorded.
    #[must_use]
    pub fn capacity_for(window_s: f64, fastest_batch_s: f64) -> usize {
        const SPARE_FACTOR: f64 = 4.0;
        const MINIMUM: usize = 1024;
        const FLOOR_PERIOD_S: f64 = 100e-6;
        let fastest = fastest_batch_s.max(1e-6);
        let window_s = window_s.max(0.0);
        let estimate = (window_s / fastest * SPARE_FACTOR)
            .max(window_s / FLOOR_PERIOD_S)
            .ceil();
        // Cap at 4 Mi records (160 MiB): no real window needs more (that is a batch every
        // 43 us for 45 s), and a bogus estimate must not take the host's memory.
        (estimate.min(f64::from(1u32 << 22)) as usize).max(MINIMUM)
    }

    /// Appends a record; returns `false` (and keeps nothing) when full, never reallocating.
    #[inline]
    pub fn push(&mut self, batch: RawBatch) -> bool {
        if self.records.len() == self.records.capacity() {
            return false;
        }
        self.records.push(batch);
        true
    }

    /// Batches recorded.
    #[must_use]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether none were recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The preallocated capacity.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.records.capacity()
    }

    /// Forgets every record, keeping the allocation.
    pub fn clear(&mut self) {
        self.records.clear();
    }

    /// The raw records.
    #[must_use]
    pub fn raw(&self) -> &[RawBatch] {
        &self.records
    }

    /// The records as `batches.jsonl` lines, times on `clock`.
    #[must_use]
    pub fn records(&self, clock: &Clock) -> Vec<BatchRecord> {
        self.records
            .iter()
            .enumerate()
            .map(|(i, r)| BatchRecord {
                index: i as u64,
                start_unix_ns: clock.to_unix_ns(r.start),
                end_unix_ns: clock.to_unix_ns(r.end),
                samples: r.samples,
                phase: None,
                sequences: None,
                kv_reserved_tokens: None,
            })
            .collect()
    }

    /// Total samples recorded.
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.records.iter().map(|r| u64::from(r.samples)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_refuses_past_capacity_without_reallocating() {
        let mut b = BatchBuffer::with_capacity(2);
        let cap = b.capacity();
        let now = Instant::now();
        let r = RawBatch {
            start: now,
            end: now,
            samples: 1,
        };
        let mut pushed = 0;
        while b.push(r) {
            pushed += 1;
        }
        assert_eq!(pushed, cap);
        assert_eq!(b.capacity(), cap);
        assert!(!b.push(r));
    }

    #[test]
    fn capacity_estimate_has_room_and_bounds() {
        // A 10 ms warmup batch: four times its rate would be 18,000, but the floor of one batch
        // per 100 us gives more room.
        assert_eq!(BatchBuffer::capacity_for(45.0, 0.01), 450_000);
        // A fast step: four times its rate (9,000,000 here), capped at 4 Mi records.
        assert_eq!(BatchBuffer::capacity_for(45.0, 20e-6), 1 << 22);
        assert_eq!(BatchBuffer::capacity_for(1.0, 50e-6), 80_000);
        // A cold single warmup batch (4.8 ms, then 1.1 ms in the window) still fits: the case
        // that filled the buffer before the floor existed.
        assert!(BatchBuffer::capacity_for(1.5, 0.00478) >= (1.5 / 0.0011) as usize * 4);
        assert_eq!(BatchBuffer::capacity_for(0.1, 0.01), 1024);
        assert_eq!(BatchBuffer::capacity_for(45.0, 0.0), 1 << 22);
        assert_eq!(BatchBuffer::capacity_for(f64::NAN, 0.01), 1024);
    }
}
