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
    /// Samples (images) in the batch; for an LLM worker, the tokens it generated.
    pub samples: u32,
    /// An LLM worker's iteration kind; absent for other workloads, and in documents
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// A `serve-llm` iteration's sequences (its batch occupancy: the newly admitted requests of
    /// a prefill, every running request of a decode); absent for other workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequences: Option<u32>,
    /// KV-cache tokens reserved by every running request during a `serve-llm` iteration; absent
    /// for other workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_reserved_tokens: Option<u64>,
}

/// What an LLM iteration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Processed the prompts and produced each sequence's first token.
    Prefill,
    /// Produced one more token per running sequence from the KV cache.
    Decode,
}

impl Phase {
    /// The name in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
        }
    }
}

impl BatchRecord {
    /// The batch's duration, nanoseconds.
    #[must_use]
    pub fn duration_ns(&self) -> u64 {
        self.end_unix_ns.saturating_sub(self.start_unix_ns)
    }
}
