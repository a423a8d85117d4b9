//! `summary.json`: what `bench-summarize` emits for one cohort.
//!
//! These types grow with the analysis; see `docs/schema.md` for the field-by-field contract.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{Mode, WorkerConfig, Workload};

/// The summary of one validated cohort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortSummary {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// The declared sharing mode.
    pub mode: Mode,
    /// Number of workers.
    pub count: u32,
    /// The configuration every worker shared (replica 0's, `workload` aside).
    pub config: WorkerConfig,
    /// Workers per workload (`{"infer": 1, "train": 6}`).
    pub workload_mix: BTreeMap<Workload, u32>,
    /// The interval every worker was timing.
    pub common_interval: CommonInterval,
    /// Where the workers ran, and whether that fits the declared mode.
    pub colocation: Colocation,
    /// One entry per worker, by replica.
    pub workers: Vec<WorkerSummary>,
    /// One entry per workload present. Training and inference are never added together.
    pub groups: BTreeMap<Workload, GroupSummary>,
    /// Things a reader must know about these numbers (small samples, mismatches, ...).
    pub warnings: Vec<String>,
    /// Limits of the method that hold for every cohort.
    pub caveats: Vec<String>,
}

/// `[latest window start, earliest window end]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CommonInterval {
    /// Latest window start, unix nanoseconds.
    pub start_unix_ns: u64,
    /// Earliest window end, unix nanoseconds.
    pub end_unix_ns: u64,
    /// Its length, seconds.
    pub seconds: f64,
}

/// Latency statistics of batch execution, milliseconds.
///
/// Percentiles are nearest-rank: the `ceil(p * n)`-th smallest value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile (needs at least 100 batches to mean anything).
    pub p99: f64,
    /// 99.9th percentile (needs at least 1000 batches).
    pub p999: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1), 0 for one batch.
    pub stddev: f64,
    /// Fastest batch.
    pub min: f64,
    /// Slowest batch.
    pub max: f64,
}

/// One worker's figures over the common interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSummary {
    /// Replica id.
    pub replica: u32,
    /// Its workload.
    pub workload: Workload,
    /// Batches entirely inside the common interval.
    pub batches: u64,
    /// Samples in those batches.
    pub samples: u64,
    /// Kept samples / common seconds.
    pub samples_per_s: f64,
    /// Common interval / own window.
    pub overlap_fraction: f64,
    /// Latency of the kept batches.
    pub latency_ms: LatencyMs,
    /// Physical GPU UUID, where known.
    pub gpu_uuid: Option<String>,
    /// MIG instance UUID, where it ran on one.
    pub mig_uuid: Option<String>,
    /// Peak device memory, bytes, where known.
    pub peak_device_bytes: Option<u64>,
    /// How late its first batch began after the scheduled start, nanoseconds.
    pub lateness_ns: Option<i64>,
}

/// Min, mean and max of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MinMeanMax {
    /// Smallest.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Largest.
    pub max: f64,
}

/// The workers of one workload, taken together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// Number of workers in the group.
    pub workers: u32,
    /// Sum of the workers' samples/s.
    pub aggregate_samples_per_s: f64,
    /// Spread of the workers' samples/s.
    pub per_worker_samples_per_s: MinMeanMax,
    /// Jain's fairness index over the workers' samples/s: 1 is perfectly even, 1/n is one
    /// worker taking everything.
    pub jain_fairness: f64,
    /// Latency of every kept batch of the group pooled together.
    pub latency_ms: LatencyMs,
}

/// Where the workers ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Colocation {
    /// Distinct physical GPU UUIDs seen.
    pub physical_gpus: Vec<String>,
    /// Distinct MIG instance UUIDs seen.
    pub mig_devices: Vec<String>,
    /// Whether the placement fits the declared mode.
    pub fits_mode: bool,
    /// Why it does or does not fit, in words.
    pub explanation: String,
    /// Memory per shared device: the workers on it and their summed peaks against its size.
    pub devices: Vec<DeviceMemory>,
}

/// The memory of one device (a physical GPU or a MIG instance) and the workers on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// The GPU or MIG UUID (`cpu` for CPU cohorts).
    pub device: String,
    /// Replicas that ran on it.
    pub replicas: Vec<u32>,
    /// The device's memory, bytes, where known.
    pub memory_total_bytes: Option<u64>,
    /// Sum of those replicas' peak device memory, bytes, where known.
    pub peak_sum_bytes: Option<u64>,
    /// `memory_total - peak_sum`, bytes (negative means the peaks could not all have coexisted).
    pub headroom_bytes: Option<i64>,
}
