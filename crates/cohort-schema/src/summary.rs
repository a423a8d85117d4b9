//! `summary.json` and `comparison.json`: what `bench-summarize` writes.
//!
//! These are the analysis artifacts; `docs/schema.md` holds the field-by-field contract. Every
//! figure carries its unit in its name (`samples_per_s`, `latency_ms`, `..._bytes`, `..._ns`);
//! ratios and fractions are plain numbers.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::activity::{ActivityScope, GpmStats};
use crate::config::{Execution, Mode, WorkerConfig, Workload};
use crate::hog::{HogReport, IsolationResult};
use crate::share::{DeclaredShare, ShareReport};

/// The summary of one validated cohort (`summary.json`).
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
    pub warnings: Vec<SummaryWarning>,
    /// Limits of the method that hold for every cohort.
    pub caveats: Vec<String>,
    /// The MPS share the cohort declared (mode `mps`; absent otherwise and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<DeclaredShare>,
    /// The memory-isolation result, for a cohort that holds a hog worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<IsolationResult>,
    /// GPU activity counters (NVML GPM) over the common interval: one entry per physical GPU
    /// (scope `device`) and per MIG instance a worker ran on (scope `mig`). Empty when no worker
    /// recorded GPM.
    #[serde(default)]
    pub gpm: Vec<GpmDeviceSummary>,
    /// Device-wide energy over the common interval, summed over the cohort's physical GPUs;
    /// `null` when a GPU's energy counter was not recorded.
    #[serde(default)]
    pub energy: Option<EnergySummary>,
}

/// GPM over the common interval for one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpmDeviceSummary {
    /// The physical GPU UUID (scope `device`) or MIG UUID (scope `mig`).
    pub device: String,
    /// Whole GPU or MIG GPU instance.
    pub scope: ActivityScope,
    /// The replica whose readings these are (every worker on a GPU samples the same device-wide
    /// counters; the lowest replica with readings is used).
    pub replica: Option<u32>,
    /// GPM readings lying entirely inside the common interval.
    pub samples: u64,
    /// The sampling interval, seconds.
    pub interval_s: Option<f64>,
    /// Mean (interval-weighted) and maximum of each metric over those readings.
    pub metrics: GpmStats,
    /// Why there are no readings, when there are none.
    pub reason: Option<String>,
}

/// Device-wide energy over the common interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergySummary {
    /// Always `device`: the whole GPUs, shared by every workload group (and, under MIG, by
    /// instances outside the cohort).
    pub scope: ActivityScope,
    /// Joules over the common interval, summed over the physical GPUs.
    pub joules: f64,
    /// `joules / common interval seconds`.
    pub mean_power_w: f64,
    /// Each physical GPU.
    pub devices: Vec<DeviceEnergy>,
}

/// One physical GPU's energy over the common interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceEnergy {
    /// The GPU UUID.
    pub device: String,
    /// The replica whose counter readings were used.
    pub replica: u32,
    /// Joules over the common interval (the counter interpolated at both ends).
    pub joules: f64,
}

/// A named warning attached to a summary or a comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryWarning {
    /// A stable `snake_case` name (`few_batches`, `placement_mismatch`, `worker_warning`, ...).
    pub kind: String,
    /// The human-readable message, naming the replica or device concerned.
    pub message: String,
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
    /// 90th percentile (needs at least 10 batches to differ from the maximum).
    pub p90: f64,
    /// 99th percentile (needs at least 100 batches).
    pub p99: f64,
    /// 99.9th percentile (needs at least 1000 batches).
    pub p999: f64,
    /// 99.99th percentile (needs at least 10000 batches; below that it is the maximum). Added
    /// for the report's percentile plot; `null` in summaries written before.
    #[serde(default)]
    pub p9999: Option<f64>,
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
    /// Its model ([`WorkerConfig::model_label`]: `resnet50`, `torchscript:<sha256 prefix>`);
    /// `null` in summaries written before models were recorded.
    #[serde(default)]
    pub model: Option<String>,
    /// Batches entirely inside the common interval (the kept batches).
    pub batches: u64,
    /// Samples in those batches.
    pub samples: u64,
    /// Batches the worker recorded in its whole window, kept or not.
    pub batches_recorded: u64,
    /// Kept samples / common interval seconds.
    pub samples_per_s: f64,
    /// Common interval length / own window length (`1.0` when the worker's window is the
    /// common interval).
    pub overlap_fraction: f64,
    /// Latency of the kept batches.
    pub latency_ms: LatencyMs,
    /// The latency distribution of the kept batches: element `i` (0..=100) is the nearest-rank
    /// percentile `i / 100` in milliseconds (element 0 is the minimum, 100 the maximum). Enough
    /// to draw a CDF without the raw records.
    pub latency_cdf_ms: Vec<f64>,
    /// Physical GPU UUID, where known.
    pub gpu_uuid: Option<String>,
    /// MIG instance UUID, where it ran on one.
    pub mig_uuid: Option<String>,
    /// Peak device memory, bytes, where known.
    pub peak_device_bytes: Option<u64>,
    /// How late its first batch began after the scheduled start, nanoseconds.
    pub lateness_ns: Option<i64>,
    /// The share it declared and what the CUDA runtime reported to it (the limits applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<ShareReport>,
    /// What a hog worker held. A hog's batches are hold intervals of 0 samples, so its
    /// `latency_ms` describes those intervals, and it is in no group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hog: Option<HogReport>,
    /// A serve worker's request-level figures (absent for other workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeSummary>,
    /// A decode worker's token figures by phase (absent for other workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<DecodeSummary>,
    /// A `serve-llm` worker's request-level figures (absent for other workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_llm: Option<ServeLlmSummary>,
}

/// A `serve-llm` worker's requests over the common interval: those whose scheduled arrival lies
/// in it.
///
/// A request is *completed* when its last token was out by the interval's end, *unfinished*
/// when it was admitted by then but is not complete, *not admitted* otherwise. Percentiles are
/// nearest-rank and exact. TTFT ranks the requests without a first token by the end above every
/// other (a percentile falling on them is null), as the end-to-end latency ranks the requests
/// not completed; TPOT is over the completed requests of at least two tokens (vLLM's
/// benchmark), and the inter-token latencies over every gap between two tokens out by the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeLlmSummary {
    /// Prompt length of every request, tokens.
    pub prompt_tokens: u32,
    /// Output length of every request, tokens.
    pub output_tokens: u32,
    /// The most requests running at once.
    pub max_batch: u32,
    /// The KV-cache token budget.
    pub kv_budget_tokens: u64,
    /// Requests whose scheduled arrival lies in the common interval.
    pub requests: u64,
    /// Those whose last token was out by the interval's end.
    pub completed: u64,
    /// Those admitted by the end but not complete.
    pub unfinished: u64,
    /// Those not admitted by the end.
    pub not_admitted: u64,
    /// `requests / common seconds`: the load offered.
    pub offered_per_s: f64,
    /// `completed / common seconds`.
    pub completed_per_s: f64,
    /// Output tokens out inside the common interval (of any request) / common seconds.
    pub output_tokens_per_s: f64,
    /// Time to first token: first token minus *scheduled* arrival (queueing included).
    pub ttft_ms: RequestLatencyMs,
    /// Time per output token after the first, `(last - first) / (output - 1)`, completed
    /// requests of at least two tokens.
    pub tpot_ms: RequestLatencyMs,
    /// Inter-token latencies: the gaps between consecutive tokens of a request.
    pub itl_ms: RequestLatencyMs,
    /// End-to-end: last token minus scheduled arrival.
    pub e2e_ms: RequestLatencyMs,
    /// Admission (start of the prefill) minus scheduled arrival, admitted requests.
    pub queueing_ms: RequestLatencyMs,
    /// Attainment of the TTFT and TPOT objectives together, when both were given.
    pub slo: Option<LlmSloAttainment>,
    /// The server could not keep up: see `overload_reasons`.
    pub overloaded: bool,
    /// Why it is judged overloaded (empty when it is not).
    pub overload_reasons: Vec<String>,
    /// True when `overloaded`: the percentiles describe this window only and are lower bounds
    /// of what a longer run would show.
    pub percentiles_are_lower_bounds: bool,
    /// Bytes of the worker's preallocated KV cache (`max_batch` sequences of the whole
    /// context), where recorded: the device memory the cache held through the window.
    #[serde(default)]
    pub kv_cache_bytes: Option<u64>,
    /// The most KV-cache tokens its running requests reserved together (the worker's whole
    /// window).
    #[serde(default)]
    pub kv_reserved_tokens_max: Option<u64>,
}

/// How many `serve-llm` requests met the TTFT and TPOT objectives together, and whether the
/// objectives are met at the quantile.
#[expect(
    clippy::struct_excessive_bools,
    reason = "each verdict of the objectives is its own field in the JSON: TTFT, TPOT, early stopping, and their conjunction"
)]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LlmSloAttainment {
    /// The TTFT objective, milliseconds.
    pub ttft_slo_ms: f64,
    /// The TPOT objective, milliseconds.
    pub tpot_slo_ms: f64,
    /// The quantile that must meet each (0.99: p99 <= objective).
    pub quantile: f64,
    /// Completed requests whose TTFT and TPOT both met their objectives (a one-token request
    /// has no TPOT and is judged on its TTFT).
    pub met: u64,
    /// `met / requests`: unfinished and never-admitted requests count as misses.
    pub attainment: f64,
    /// `met / common seconds`: requests per second served within both objectives.
    pub goodput_per_s: f64,
    /// The TTFT at the quantile is within its objective (null TTFT: not).
    pub ttft_met: bool,
    /// The TPOT at the quantile is within its objective (no TPOT: not).
    pub tpot_met: bool,
    /// MLPerf LoadGen's early-stopping test at 99 % confidence, on the requests that met both
    /// objectives against those that did not (as `SloAttainment::early_stopping_pass`): the
    /// window held enough requests for its percentile to be a claim. Absent in older files,
    /// whose verdict did not test it: true.
    #[serde(default = "older_files_passed")]
    pub early_stopping_pass: bool,
    /// The requests that test needs with this many misses (absent in older files).
    #[serde(default)]
    pub early_stopping_requests_needed: Option<u64>,
    /// Requests still in flight at the interval's end that had broken no objective by then: the
    /// window closed on them (the last arrivals of any window), so the early-stopping test counts
    /// them neither as met nor as missed. Attainment still counts them as misses. Absent in
    /// older files, whose test counted them as misses: 0.
    #[serde(default)]
    pub censored: u64,
    /// The verdict: `ttft_met`, `tpot_met`, `early_stopping_pass`, and the server not
    /// overloaded.
    pub meets: bool,
}

/// What a field a verdict did not yet test reads as in older files.
fn older_files_passed() -> bool {
    true
}

/// A decode worker's kept iterations split by phase. Every iteration generates one
/// token per sequence, so the worker's `samples_per_s` is its generated tokens/s, and a decode
/// step's latency is the time per output token (TPOT) of the batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeSummary {
    /// Sequences decoded together.
    pub batch_size: u32,
    /// Prompt length, tokens.
    pub prompt_tokens: u32,
    /// Tokens generated per sequence and cycle.
    pub output_tokens: u32,
    /// Tokens generated in the kept iterations / common interval seconds (prefills and decode
    /// steps alike: each produces one token per sequence).
    pub tokens_per_s: f64,
    /// Kept prefills.
    pub prefills: u64,
    /// Kept decode steps.
    pub decode_steps: u64,
    /// Latency of the kept prefills (the batch's time to first token, without queueing);
    /// `null` when none was kept.
    pub prefill_ms: Option<LatencyMs>,
    /// Time per output token: latency of the kept decode steps; `null` when none was kept.
    pub tpot_ms: Option<LatencyMs>,
    /// Bytes of the worker's preallocated KV cache, where recorded.
    #[serde(default)]
    pub kv_cache_bytes: Option<u64>,
    /// Bytes one decode step must read from device memory (weights and the KV cache up to its
    /// position, mean over a cycle: `config.llm.decode_read_bytes`), where recorded. Over the
    /// median step it is the read rate the step implies, to hold against the card's bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_read_bytes: Option<u64>,
}

/// A serve worker's requests over the common interval: those whose scheduled arrival lies in it.
///
/// A request is *completed* when its batch completed by the end of the common interval; the
/// others (queued or running at the end) are *not completed* and are never dropped: they count
/// in `requests`, they count as misses against the SLO, and the latency percentiles rank them
/// above every completed request (a percentile that falls on one of them is null).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeSummary {
    /// Requests whose scheduled arrival lies in the common interval.
    pub requests: u64,
    /// Those of them whose batch completed by the interval's end.
    pub completed: u64,
    /// Those queued or running at the interval's end.
    pub not_completed: u64,
    /// The oldest not-completed request's age at the interval's end, milliseconds (null when
    /// every request completed).
    pub not_completed_max_age_ms: Option<f64>,
    /// `requests / common seconds`: the load offered.
    pub offered_per_s: f64,
    /// `completed / common seconds`.
    pub completed_per_s: f64,
    /// Completion minus scheduled arrival: queueing plus service.
    pub latency_ms: RequestLatencyMs,
    /// Dispatch minus scheduled arrival (completed requests).
    pub queueing_ms: RequestLatencyMs,
    /// Completion minus dispatch: the batch's execution (completed requests).
    pub service_ms: RequestLatencyMs,
    /// Batches dispatched inside the common interval.
    pub batches: u64,
    /// Mean requests per batch over those batches.
    pub mean_batch_size: f64,
    /// Requests per batch -> batches dispatched inside the common interval.
    pub batch_size_histogram: BTreeMap<u32, u64>,
    /// Padded size the device ran -> batches.
    pub padded_size_histogram: BTreeMap<u32, u64>,
    /// Attainment of the latency objective, when one was given.
    pub slo: Option<SloAttainment>,
    /// The server could not keep up: see `overload_reasons`.
    pub overloaded: bool,
    /// Why it is judged overloaded (empty when it is not).
    pub overload_reasons: Vec<String>,
    /// True when `overloaded`: the backlog, and with it every latency, grows with the window's
    /// length, so the percentiles describe this window only and are lower bounds of what a
    /// longer run would show.
    pub percentiles_are_lower_bounds: bool,
    /// Percentiles come from a log-linear histogram: each is a measured value at most this
    /// fraction above the exact nearest-rank value (exact when its bucket holds one value).
    pub percentile_relative_error: f64,
}

/// Request latency statistics, milliseconds. Percentiles are nearest-rank over every request of
/// the interval, the not-completed ones ranked above all completed ones: a percentile that falls
/// among them is null (it exceeded what the window could observe). `mean` and `max` are over
/// the completed requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RequestLatencyMs {
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile (needs at least 100 requests).
    pub p99: Option<f64>,
    /// 99.9th percentile (needs at least 1000 requests).
    pub p999: Option<f64>,
    /// Mean over completed requests (null when none completed).
    pub mean: Option<f64>,
    /// Largest over completed requests (null when none completed).
    pub max: Option<f64>,
}

/// How many requests met the latency objective, and whether the objective is met.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloAttainment {
    /// The objective: completion within this many milliseconds of the scheduled arrival.
    pub slo_ms: f64,
    /// The quantile that must meet it (0.99: p99 <= slo).
    pub quantile: f64,
    /// Requests that completed within the objective (counted exactly, not from a histogram).
    pub met: u64,
    /// `met / requests` (not-completed requests count as misses).
    pub attainment: f64,
    /// Whether the observed nearest-rank `quantile` latency is within the objective:
    /// `met >= ceil(quantile * requests)`.
    pub percentile_met: bool,
    /// MLPerf LoadGen's early-stopping test at 99 % confidence: with `requests - met` misses,
    /// a server whose true `quantile` latency sat exactly at the objective would show this
    /// few misses in this many requests with probability at most 1 %.
    pub early_stopping_pass: bool,
    /// The requests that test needs with this many misses (it passes when `requests` reaches
    /// it and every extra request meets the objective).
    pub early_stopping_requests_needed: u64,
    /// Requests still in flight at the interval's end that had broken no objective by then: the
    /// window closed on them (the last arrivals of any window), so the early-stopping test counts
    /// them neither as met nor as missed. Attainment still counts them as misses. Absent in
    /// older files, whose test counted them as misses: 0.
    #[serde(default)]
    pub censored: u64,
    /// The verdict: `percentile_met`, `early_stopping_pass`, and the server not overloaded.
    pub meets: bool,
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
    /// The group's model (every worker of a workload runs the same one; see
    /// [`WorkerConfig::model_label`]); `null` in summaries written before models were recorded.
    #[serde(default)]
    pub model: Option<String>,
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
    /// Kept samples of this group over the cohort's device-wide joules in the common interval.
    /// Device-wide: the energy of the whole GPUs, which every group of a mixed cohort shares.
    /// `null` without energy.
    #[serde(default)]
    pub samples_per_device_joule: Option<f64>,
}

/// Where the workers ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Colocation {
    /// Distinct physical GPU UUIDs seen, sorted.
    pub physical_gpus: Vec<String>,
    /// Distinct MIG instance UUIDs seen, sorted.
    pub mig_devices: Vec<String>,
    /// Distinct MIG profiles of the workers' GPU instances (`1g.18gb`), sorted; empty without
    /// MIG (a MIG cohort is labelled, compared and pooled by its profile).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_profiles: Vec<String>,
    /// Whether the placement fits the declared mode; `null` when it cannot be checked (no GPU
    /// identity was recorded, as on a CPU run).
    pub fits_mode: Option<bool>,
    /// Why it does or does not fit, in words.
    pub explanation: String,
    /// Memory per device (a physical GPU, or a MIG instance for workers on one): the workers on
    /// it and their summed peaks against its size.
    pub devices: Vec<DeviceMemory>,
}

/// The memory of one device (a physical GPU or a MIG instance) and the workers on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// The GPU or MIG UUID.
    pub device: String,
    /// Replicas that ran on it.
    pub replicas: Vec<u32>,
    /// The device's memory, bytes, where known.
    pub memory_total_bytes: Option<u64>,
    /// Sum of those replicas' peak device memory, bytes, where every one is known.
    pub peak_sum_bytes: Option<u64>,
    /// `memory_total - peak_sum`, bytes (negative means the peaks could not all have coexisted).
    pub headroom_bytes: Option<i64>,
}

/// `comparison.json`: several cohorts set against solo baselines and against each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// One solo baseline per workload: the first given (what older readers show).
    pub baselines: BTreeMap<Workload, Baseline>,
    /// Every baseline block: the solo runs of one workload on one card. A cohort's ratios
    /// divide by its own card's block; absent in older documents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_blocks: Vec<BaselineBlock>,
    /// Every cohort compared, in the order given.
    pub cohorts: Vec<CohortComparison>,
    /// Cohorts of the same shape grouped, with their spread.
    pub repeats: Vec<RepeatGroup>,
    /// Things a reader must know (a missing baseline, a baseline of another configuration, ...).
    pub warnings: Vec<SummaryWarning>,
    /// Limits of the method that hold for every cohort.
    pub caveats: Vec<String>,
    /// The decision table for a mix with capacity searches (a study's report opens with it);
    /// absent where the study has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<crate::DecisionTable>,
}

/// A solo cohort (one worker) of one workload: the reference rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The solo cohort's experiment id.
    pub experiment: String,
    /// Its mode (normally `exclusive`).
    pub mode: Mode,
    /// The solo worker's model; `null` when unknown (older summaries).
    #[serde(default)]
    pub model: Option<String>,
    /// How the solo worker issued its batches.
    #[serde(default)]
    pub execution: Execution,
    /// The solo worker's samples/s.
    pub samples_per_s: f64,
    /// The solo worker's p99 batch latency, milliseconds.
    pub p99_ms: f64,
    /// The physical GPU it ran on (a MIG instance's parent); `null` without a GPU identity (a
    /// CPU run, older summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<String>,
}

/// Every solo run of one workload on one card: the baseline a cohort on that card is divided
/// by. A block's baseline is a set of repeats, not one run: one card's solo trainer spread over
/// 15 % in three minutes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineBlock {
    /// The workload.
    pub workload: Workload,
    /// The physical GPU (a MIG instance's parent); `null` without a GPU identity.
    pub card: Option<String>,
    /// The run of the study its solos ran in (1-based); absent where runs were not recorded
    /// (every solo of the card then counts as one run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The solo cohorts, in the order given.
    pub experiments: Vec<String>,
    /// The solo worker's samples/s over those runs.
    pub samples_per_s: Estimate,
    /// The solo worker's p99 batch latency over those runs, milliseconds.
    pub p99_ms: Estimate,
}

/// A ratio of two means (a cohort's figure over its own card's baseline) with its two-sided
/// 95% interval, which carries the baseline's run-to-run noise as well as the cohort's
/// (`coload_analysis::ratio` says how it is computed).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioInterval {
    /// `mean(numerator) / mean(denominator)`.
    pub ratio: f64,
    /// Lower end of the 95% interval; `null` when neither side was repeated.
    pub low: Option<f64>,
    /// Upper end of the 95% interval.
    pub high: Option<f64>,
    /// Values on the numerator's side (cohorts).
    pub n_numerator: u32,
    /// Values on the denominator's side (baseline runs).
    pub n_denominator: u32,
}

impl RatioInterval {
    /// The interval's width relative to the ratio (`(high - low) / ratio`); `None` without an
    /// interval.
    #[must_use]
    pub fn relative_width(&self) -> Option<f64> {
        Some((self.high? - self.low?) / self.ratio)
    }

    /// Whether the interval lies entirely above (`Some(true)`) or below (`Some(false)`) `x`;
    /// `None` when it contains `x` or there is no interval.
    #[must_use]
    pub fn side_of(&self, x: f64) -> Option<bool> {
        let (low, high) = (self.low?, self.high?);
        if low > x {
            Some(true)
        } else if high < x {
            Some(false)
        } else {
            None
        }
    }
}

/// One cohort of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortComparison {
    /// The cohort's experiment id.
    pub experiment: String,
    /// Its declared mode.
    pub mode: Mode,
    /// The MPS share the cohort declared (mode `mps`; absent otherwise and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<crate::DeclaredShare>,
    /// Its MIG profile (MIG modes: the workers' GPU-instance profile, or `mixed: a, b` when
    /// they differ; absent otherwise and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_profile: Option<String>,
    /// Its number of workers.
    pub count: u32,
    /// How its workers issued their batches.
    #[serde(default)]
    pub execution: Execution,
    /// Workers per workload.
    pub workload_mix: BTreeMap<Workload, u32>,
    /// The physical GPUs it ran on, sorted (one for every shared cohort; several only for
    /// exclusive cohorts across cards); empty without a GPU identity and in older documents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cards: Vec<String>,
    /// The run of the study it ran in (1-based), where recorded: with its card, the baseline
    /// block its ratios divide by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The common interval's length, seconds.
    pub common_s: f64,
    /// Per workload present.
    pub groups: BTreeMap<Workload, GroupComparison>,
    /// Device-wide GPM over the common interval: the mean over the cohort's physical GPUs of
    /// each metric's mean, and the largest maximum. `null` without GPM.
    #[serde(default)]
    pub gpm: Option<GpmStats>,
    /// Device-wide joules over the common interval. `null` without energy.
    #[serde(default)]
    pub joules: Option<f64>,
}

/// One workload group of a cohort against its solo baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupComparison {
    /// The group's model; `null` when unknown (older summaries).
    #[serde(default)]
    pub model: Option<String>,
    /// Workers in the group.
    pub workers: u32,
    /// Sum of the workers' samples/s.
    pub aggregate_samples_per_s: f64,
    /// `aggregate / solo samples/s`: above 1 sharing gained throughput over one worker alone,
    /// below 1 it lost some. `null` without a baseline on the cohort's own card.
    pub aggregate_vs_solo: Option<f64>,
    /// `aggregate_vs_solo` with its 95% interval over the block's baseline runs; absent without
    /// a baseline on the cohort's card and in older documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate_vs_solo_ci: Option<RatioInterval>,
    /// Jain's fairness index over the workers' samples/s.
    pub jain_fairness: f64,
    /// The group's pooled p99 batch latency, milliseconds.
    pub p99_ms: f64,
    /// `p99_ms / solo p99` against the baseline runs on the group's own card (above 1 is a
    /// slowdown); absent without one, for a group across cards, and in older documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_vs_solo: Option<f64>,
    /// See [`GroupSummary::samples_per_device_joule`].
    #[serde(default)]
    pub samples_per_device_joule: Option<f64>,
    /// Each worker of the group.
    pub per_worker: Vec<WorkerComparison>,
}

/// One worker against the solo baseline of its workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerComparison {
    /// Replica id.
    pub replica: u32,
    /// Its samples/s.
    pub samples_per_s: f64,
    /// Its p99 batch latency, milliseconds.
    pub p99_ms: f64,
    /// `samples/s / solo samples/s` (below 1 is a slowdown). `null` without a baseline on the
    /// worker's own card.
    pub rate_vs_solo: Option<f64>,
    /// `rate_vs_solo` with its 95% interval over the block's baseline runs; absent without a
    /// baseline on the worker's card and in older documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_vs_solo_ci: Option<RatioInterval>,
    /// The physical GPU the worker ran on, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<String>,
    /// `p99 / solo p99` (above 1 is a slowdown). `null` without a baseline.
    pub p99_vs_solo: Option<f64>,
    /// The worker's latency CDF (see [`WorkerSummary::latency_cdf_ms`]), for the report's plot.
    pub latency_cdf_ms: Vec<f64>,
    /// The worker's latency statistics (the tail percentiles for the report's percentile
    /// plot). `null` in comparisons written before the percentile plot.
    #[serde(default)]
    pub latency_ms: Option<LatencyMs>,
    /// Batches kept in the common interval: how far into the tail its percentiles mean
    /// anything (p99.9 needs 1000). `null` in comparisons written before the percentile plot.
    #[serde(default)]
    pub batches: Option<u64>,
}

/// Cohorts of one shape: same mode, workload mix, count and configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatGroup {
    /// The shared mode.
    pub mode: Mode,
    /// The shared MPS share (mode `mps`; absent otherwise and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<crate::DeclaredShare>,
    /// The shared MIG profile (MIG modes; absent otherwise and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_profile: Option<String>,
    /// The shared count.
    pub count: u32,
    /// The shared execution.
    #[serde(default)]
    pub execution: Execution,
    /// The shared workload mix.
    pub workload_mix: BTreeMap<Workload, u32>,
    /// The model of each workload group (absent where unknown).
    #[serde(default)]
    pub models: BTreeMap<Workload, String>,
    /// The experiments grouped, in the order given.
    pub experiments: Vec<String>,
    /// Per workload present.
    pub groups: BTreeMap<Workload, RepeatStats>,
}

/// The spread of one workload group across repeated cohorts.
///
/// Every estimate takes one value per cohort (n = cohorts), because the workers of one cohort
/// are not independent of each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatStats {
    /// Aggregate samples/s of the group.
    pub aggregate_samples_per_s: Estimate,
    /// Mean per-worker samples/s of the group.
    pub per_worker_samples_per_s: Estimate,
    /// Pooled p99 batch latency of the group, milliseconds.
    pub p99_ms: Estimate,
    /// The individual cohorts, so that variation is kept rather than averaged away.
    pub cohorts: Vec<RepeatPoint>,
    /// Against solo, card by card: the shape's cohorts on one card over that card's baseline
    /// runs (never across cards); absent without baselines and in older documents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vs_solo: Vec<CardRatio>,
}

/// A repeated shape against solo on one card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardRatio {
    /// The physical GPU; `null` without a GPU identity.
    pub card: Option<String>,
    /// The run of the study on that card (1-based); absent where runs were not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// Aggregate samples/s of the group over the solo worker's samples/s.
    pub aggregate_vs_solo: RatioInterval,
    /// Mean per-worker samples/s of the group over the solo worker's samples/s.
    pub per_worker_vs_solo: RatioInterval,
}

/// One cohort's values within a repeat group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatPoint {
    /// The cohort's experiment id.
    pub experiment: String,
    /// Aggregate samples/s of the group.
    pub aggregate_samples_per_s: f64,
    /// Mean per-worker samples/s of the group.
    pub per_worker_samples_per_s: f64,
    /// Pooled p99 batch latency, milliseconds.
    pub p99_ms: f64,
}

/// Mean, spread and 95% confidence interval of one quantity over n cohorts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Number of values.
    pub n: u32,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one value.
    pub stddev: f64,
    /// Lower end of the two-sided 95% Student-t confidence interval of the mean (`null` for
    /// n = 1: one value says nothing about the spread).
    pub ci95_low: Option<f64>,
    /// Upper end of that interval.
    pub ci95_high: Option<f64>,
}

/// Why the search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The bracket is within the tolerance.
    Converged,
    /// The probe budget ran out first.
    ProbesExhausted,
    /// The maximum rate passed: the capacity is at least that.
    MaxRatePasses,
    /// The minimum rate failed: the capacity is below it (or the objective cannot be shown at
    /// this window length).
    MinRateFails,
    /// A probe's cohort did not complete (or the search was interrupted): no answer.
    ProbeFailed,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopReason::Converged => "converged",
            StopReason::ProbesExhausted => "probes_exhausted",
            StopReason::MaxRatePasses => "max_rate_passes",
            StopReason::MinRateFails => "min_rate_fails",
            StopReason::ProbeFailed => "probe_failed",
        })
    }
}

/// `capacity.json` (`bench-cohort --find-capacity`): the highest offered rate at which the serve
/// workers met the objective, with the co-located workers running, and every probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The sharing mode of every probe.
    pub mode: Mode,
    /// Workers per workload in every probe.
    pub workload_mix: BTreeMap<Workload, u32>,
    /// The objective, milliseconds: the serve workers' request latency objective; in a search
    /// without serve workers, the `serve-llm` workers' TTFT objective (as `ttft_slo_ms`).
    pub slo_ms: f64,
    /// The quantile that must meet it.
    pub quantile: f64,
    /// The `serve-llm` workers' TTFT objective, milliseconds (absent in a search
    /// without them, and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_slo_ms: Option<f64>,
    /// The `serve-llm` workers' TPOT objective, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_slo_ms: Option<f64>,
    /// The highest rate that passed below every rate that failed, requests per second per serve
    /// worker (null when none passed).
    pub capacity_per_s: Option<f64>,
    /// The lowest rate that failed above it (null when none failed): the capacity lies in
    /// `[capacity_per_s, failed_above_per_s)`.
    pub failed_above_per_s: Option<f64>,
    /// `converged`, `probes_exhausted`, `max_rate_passes`, `min_rate_fails`, or `probe_failed`
    /// (a cohort did not complete; its folder says why).
    pub stop: StopReason,
    /// The search's settings.
    pub tolerance: f64,
    /// The most probes allowed.
    pub max_probes: u32,
    /// Every probe, in the order run.
    pub probes: Vec<CapacityProbe>,
}

/// One cohort of a capacity search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityProbe {
    /// The rate asked of each serve worker, requests per second.
    pub rate_per_s: f64,
    /// The cohort's experiment id (fresh for every probe).
    pub experiment: String,
    /// Its folder.
    pub dir: String,
    /// Whether every serve worker met the objective (null when the cohort did not complete).
    pub passed: Option<bool>,
    /// Per serve worker: offered and completed rate, the latency at the quantile (null when it
    /// falls on an unfinished request), attainment, and the verdict's parts.
    pub serve: Vec<CapacityProbeWorker>,
    /// Per `serve-llm` worker: the same for TTFT and TPOT (absent without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve_llm: Vec<CapacityProbeLlmWorker>,
}

/// One `serve-llm` worker in one probe.
#[expect(
    clippy::struct_excessive_bools,
    reason = "each part of the probe's verdict is its own field in the JSON"
)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityProbeLlmWorker {
    /// Replica id.
    pub replica: u32,
    /// Requests offered per second over the common interval.
    pub offered_per_s: f64,
    /// Requests completed per second.
    pub completed_per_s: f64,
    /// TTFT at the report's quantile, milliseconds (null when it falls on a request without a
    /// first token).
    pub ttft_ms: Option<f64>,
    /// TPOT at the report's quantile, milliseconds (null without a completed request).
    pub tpot_ms: Option<f64>,
    /// Fraction of requests within both objectives.
    pub attainment: f64,
    /// The TTFT objective was met at the quantile.
    pub ttft_met: bool,
    /// The TPOT objective was met at the quantile.
    pub tpot_met: bool,
    /// LoadGen's early-stopping test passed: the window held enough requests (absent in older
    /// files, which did not test it: true).
    #[serde(default = "older_files_passed")]
    pub early_stopping_pass: bool,
    /// The server was judged overloaded.
    pub overloaded: bool,
}

/// One serve worker in one probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityProbeWorker {
    /// Replica id.
    pub replica: u32,
    /// Requests offered per second over the common interval.
    pub offered_per_s: f64,
    /// Requests completed per second.
    pub completed_per_s: f64,
    /// The request latency p99, milliseconds.
    pub p99_ms: Option<f64>,
    /// Fraction of requests within the objective.
    pub attainment: f64,
    /// The observed percentile was within the objective.
    pub percentile_met: bool,
    /// LoadGen's early-stopping test passed.
    pub early_stopping_pass: bool,
    /// The server was judged overloaded.
    pub overloaded: bool,
}
