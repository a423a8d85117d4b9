//! The `hog` workload's record and the isolation result of a cohort that holds one.
//!
//! A hog worker takes device memory in steps, up to `--hog-bytes` or until CUDA refuses, and
//! holds it through the window. It writes `hold.json` ([`HoldMarker`]) as soon as it holds its
//! memory, before it joins the barrier, so that a launcher can start the other workers only then
//! (the hog allocates first, every time), and `worker.json` carries the same [`HogReport`].
//! The isolation result ([`IsolationResult`]) then says, per cohort, who failed, at what
//! allocation and with what error: whether the sharing mode kept one tenant's memory from the
//! others.

use serde::{Deserialize, Serialize};

use crate::config::{Mode, Workload};
use crate::failure::{FailureKind, Stage, Status};
use crate::share::DeclaredShare;

/// Why the hog stopped allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HogStop {
    /// It holds everything `--hog-bytes` asked for.
    TargetReached,
    /// CUDA refused the next allocation, even at the smallest step: the hog holds all the
    /// device (or its share of it) would give.
    Refused,
}

/// What the hog took and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HogReport {
    /// `--hog-bytes`, or `null` to take all CUDA grants.
    pub target_bytes: Option<u64>,
    /// The first step's size, bytes; after a refusal the step halves down to
    /// [`HogReport::min_step_bytes`].
    pub step_bytes: u64,
    /// The smallest step tried after a refusal, bytes.
    pub min_step_bytes: u64,
    /// Device memory held through the window, bytes (the sum of the allocations granted).
    pub granted_bytes: u64,
    /// Allocations granted.
    pub allocations: u32,
    /// Why it stopped.
    pub stopped_by: HogStop,
    /// CUDA's message at the first refusal, when there was one.
    pub refusal: Option<String>,
    /// `cudaMemGetInfo`'s free memory once the hog held its memory, bytes.
    pub memory_free_after_bytes: Option<u64>,
    /// When it began holding, unix nanoseconds.
    pub holding_since_unix_ns: u64,
    /// The length of one hold interval, seconds: the hog records one batch (of 0 samples) per
    /// interval in the window, to show it held its memory throughout.
    pub hold_interval_s: f64,
}

/// `hold.json`: written by a hog worker into its `--out` as soon as it holds its memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldMarker {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// The hog's replica id.
    pub replica: u32,
    /// What it holds.
    pub hog: HogReport,
}

/// Whether the sharing mode kept the hog's memory from the other workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationOutcome {
    /// CUDA stopped the hog at a limit, and every other worker completed its window.
    Contained,
    /// At least one other worker ran out of device memory while the hog held its memory.
    NotContained,
    /// Neither could be shown (the hog never met a limit, failed before holding, or other
    /// workers failed for reasons other than memory); the explanation says which.
    Inconclusive,
}

impl IsolationOutcome {
    /// The name used in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationOutcome::Contained => "contained",
            IsolationOutcome::NotContained => "not_contained",
            IsolationOutcome::Inconclusive => "inconclusive",
        }
    }
}

/// One worker of a hog cohort, as the isolation result tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantOutcome {
    /// Replica id.
    pub replica: u32,
    /// Its workload (`hog` for the hog).
    pub workload: Workload,
    /// Complete or failed.
    pub status: Status,
    /// Where it failed.
    pub stage: Option<Stage>,
    /// How it failed.
    pub kind: Option<FailureKind>,
    /// CUDA's or the worker's message.
    pub message: Option<String>,
    /// The allocation CUDA refused, as its message states it (`20.00 MiB`), when it does.
    pub refused_allocation: Option<String>,
    /// `cudaMemGetInfo`'s free memory before the worker built its workload, bytes.
    pub memory_free_at_start_bytes: Option<u64>,
    /// Peak device memory the worker used, bytes, when it got that far.
    pub peak_device_bytes: Option<u64>,
    /// The hog's record, for a hog.
    pub hog: Option<HogReport>,
}

/// `isolation.json`: the memory-isolation result of one cohort that holds a hog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationResult {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// The declared sharing mode.
    pub mode: Mode,
    /// The declared MPS share (mode `mps`).
    pub share: Option<DeclaredShare>,
    /// The result.
    pub outcome: IsolationOutcome,
    /// The result in words: who failed, at what allocation, with what error.
    pub explanation: String,
    /// Every worker, hog first, then by replica.
    pub workers: Vec<TenantOutcome>,
}
