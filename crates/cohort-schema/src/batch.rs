//! One line of `batches.jsonl`.

use serde::{Deserialize, Serialize};

/// One timed batch: its position, its wall-clock interval and how many samples it processed.
///
/// Times are wall-clock nanoseconds derived from one monotonic clock anchored once to the wall
/// clock, so durations never jump with NTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// 0-based position in the window.
    pub index: u64,
    /// When the batch started, unix nanoseconds.
    pub start_unix_ns: u64,
    /// When its device work had completed, unix nanoseconds.
    pub end_unix_ns: u64,
    /// Samples (images) in the batch.
    pub samples: u32,
}

impl BatchRecord {
    /// The batch's duration, nanoseconds.
    #[must_use]
    pub fn duration_ns(&self) -> u64 {
        self.end_unix_ns.saturating_sub(self.start_unix_ns)
    }
}
