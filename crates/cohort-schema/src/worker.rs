//! `worker.json`: everything one worker knows about its run, written last.

use serde::{Deserialize, Serialize};

use crate::activity::{EnergyReport, GpmReport};
use crate::config::WorkerConfig;
use crate::failure::{FailureKind, Stage, Status};
use crate::hog::HogReport;
use crate::share::ShareReport;
use crate::telemetry::TelemetrySummary;

impl Stage {
    /// The name used in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Preflight => "preflight",
            Stage::Warmup => "warmup",
            Stage::Barrier => "barrier",
            Stage::Window => "window",
            Stage::Write => "write",
        }
    }
}

/// Where and why a worker failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The phase that failed.
    pub stage: Stage,
    /// A stable `snake_case` name for the failure (`barrier_timeout`, `out_of_memory`, ...).
    pub kind: FailureKind,
    /// The human-readable message.
    pub message: String,
    /// When it happened (Unix time, ns; absent in documents of an older coload): when the worker
    /// recorded it, or for `terminated` when the signal came (a worker waiting for the start or
    /// inside a batch notices it later). A cluster backend orders its replicas' failures by it:
    /// the API server keeps a Pod's finish time only to the second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_unix_ns: Option<u64>,
}

impl Failure {
    /// A failure recorded now.
    #[must_use]
    pub fn now(stage: Stage, kind: FailureKind, message: String) -> Failure {
        let at_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        Failure {
            stage,
            kind,
            message,
            at_unix_ns,
        }
    }
}

/// Who and where the worker was, from the host and the scheduler's environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The host name the process saw.
    pub hostname: String,
    /// The Kubernetes node name (`--node-name` or `NODE_NAME`).
    pub node_name: Option<String>,
    /// The Pod name, where the scheduler exposes it.
    pub pod_name: Option<String>,
    /// The Pod UID, where the scheduler exposes it.
    pub pod_uid: Option<String>,
    /// The Polyaxon run UUID, where present.
    pub run_uuid: Option<String>,
    /// The worker's process id.
    pub pid: u32,
}

/// What kind of device ran the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// A CUDA device (a whole GPU or a MIG instance).
    Cuda,
    /// The host CPU.
    Cpu,
}

/// The device the worker actually used, as NVML and libtorch report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// CUDA or CPU.
    pub kind: DeviceKind,
    /// `CUDA_VISIBLE_DEVICES` (or `NVIDIA_VISIBLE_DEVICES` when the former is unset), verbatim.
    pub visible_devices: Option<String>,
    /// UUID of the physical GPU (`GPU-...`), also for a MIG instance (its parent).
    pub gpu_uuid: Option<String>,
    /// Marketing name of the physical GPU.
    pub gpu_name: Option<String>,
    /// Whether MIG mode is enabled on the physical GPU.
    pub mig_mode: Option<bool>,
    /// UUID of the MIG instance (`MIG-...`) when the worker ran on one.
    pub mig_uuid: Option<String>,
    /// MIG profile of that instance (`1g.18gb`, ...).
    pub mig_profile: Option<String>,
    /// Memory of the device the worker used (the MIG instance's when on one), bytes.
    pub memory_total_bytes: Option<u64>,
    /// NVIDIA driver version.
    pub driver_version: Option<String>,
    /// CUDA driver API version (`13.0`).
    pub cuda_version: Option<String>,
    /// libtorch version the worker ran with.
    pub libtorch_version: Option<String>,
    /// cuDNN version libtorch reports.
    #[serde(default)]
    pub cudnn_version: Option<String>,
    /// PCI bus id of the physical GPU.
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    /// Compute mode of the physical GPU (`default`, `exclusive_process`, ...).
    #[serde(default)]
    pub compute_mode: Option<String>,
    /// The MIG GPU instance id of the MIG device (`nvmlDeviceGetGpuInstanceId`), unique within
    /// its parent `gpu_uuid`. Compute instances of one GPU instance share its id, its memory and
    /// its memory bandwidth (absent off MIG and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_gpu_instance_id: Option<u32>,
    /// The compute instance id of the MIG device within its GPU instance
    /// (`nvmlDeviceGetComputeInstanceId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_compute_instance_id: Option<u32>,
    /// The profile of the MIG device's GPU instance (`3g.40gb` for a `1c.3g.40gb` device,
    /// `1g.10gb+me` for itself), parsed from `mig_profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_gpu_instance_profile: Option<String>,
}

impl DeviceInfo {
    /// A CPU device with nothing else known.
    #[must_use]
    pub fn cpu() -> Self {
        DeviceInfo {
            kind: DeviceKind::Cpu,
            visible_devices: None,
            gpu_uuid: None,
            gpu_name: None,
            mig_mode: None,
            mig_uuid: None,
            mig_profile: None,
            memory_total_bytes: None,
            driver_version: None,
            cuda_version: None,
            libtorch_version: None,
            cudnn_version: None,
            pci_bus_id: None,
            compute_mode: None,
            mig_gpu_instance_id: None,
            mig_compute_instance_id: None,
            mig_gpu_instance_profile: None,
        }
    }
}

/// How the workload ran, beyond the declared configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    /// The guard inference ran under: `inference_mode` or the `no_grad` fallback.
    pub inference_guard: Option<String>,
    /// Whether cuDNN benchmark (autotuning) was on.
    pub cudnn_benchmark: Option<bool>,
    /// Whether the worker ran as a client of a CUDA MPS server.
    pub mps_client: bool,
    /// Host threads libtorch used for intra-op work.
    pub torch_threads: Option<u32>,
    /// How the warmup before the barrier went: how many batches it ran and why it stopped
    /// (absent for a hog, for serve workers, and in records written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupReport>,
}

/// Why a warmup stopped (`coload_timing::SteadyWarmup` applies the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmupStop {
    /// `--warmup-batches 0`: no warmup was asked for, and none ran.
    NoneAsked,
    /// The median block time of the last blocks no longer improved on the blocks before by
    /// more than the rule's threshold: the step time stopped falling.
    Steady,
    /// The most batches the rule allows ran without the step time settling.
    MaxBatches,
    /// The longest time the rule allows passed without the step time settling.
    MaxTime,
}

impl WarmupStop {
    /// The word `worker.json` records.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            WarmupStop::NoneAsked => "none_asked",
            WarmupStop::Steady => "steady",
            WarmupStop::MaxBatches => "max_batches",
            WarmupStop::MaxTime => "max_time",
        }
    }
}

/// The warmup a worker ran before the barrier: at least `--warmup-batches` (rounded up to
/// whole blocks), then on until the step time stopped falling, within a bound of batches and
/// time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmupReport {
    /// Batches the warmup ran (decode: iterations, prefills and decode steps alike).
    pub batches: u32,
    /// The batches asked for (`--warmup-batches`, rounded up to whole blocks): the least it
    /// runs.
    pub min_batches: u32,
    /// The most batches the rule allows.
    pub max_batches: u32,
    /// Batches per block: the rule compares block times (decode: one whole cycle, a prefill
    /// and its decode steps; otherwise one batch).
    pub block_batches: u32,
    /// Blocks in each of the two medians the rule compares.
    pub window_blocks: u32,
    /// Why it stopped.
    pub stop: WarmupStop,
    /// Time the warmup took, nanoseconds.
    pub elapsed_ns: u64,
    /// The median block time of the next-to-last window at the stop, nanoseconds (absent when
    /// fewer than two windows ran).
    pub previous_median_ns: Option<u64>,
    /// The median block time of the last window at the stop, nanoseconds (absent when fewer
    /// than two windows ran).
    pub last_median_ns: Option<u64>,
}

/// The barrier's timestamps for this worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarrierTiming {
    /// When this worker published its ready record.
    pub ready_unix_ns: Option<u64>,
    /// The start instant the leader chose.
    pub scheduled_start_unix_ns: Option<u64>,
    /// When this worker's first timed batch actually began.
    pub actual_start_unix_ns: Option<u64>,
    /// `actual_start - scheduled_start`, nanoseconds (negative would mean early; never seen).
    pub lateness_ns: Option<i64>,
    /// This host's clock minus the file server's clock, nanoseconds, from the preflight probe.
    pub clock_offset_ns: Option<i64>,
    /// Half the probe's round trip: the offset is known to within this many nanoseconds.
    #[serde(default)]
    pub clock_offset_uncertainty_ns: Option<u64>,
}

/// The worker's own timed window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowInfo {
    /// Window start: when this worker's first timed batch began (the scheduled start plus its
    /// lateness).
    pub start_unix_ns: u64,
    /// Window end: the scheduled start plus `window_s`, the same instant for every worker. The
    /// worker kept the device busy until at least then (its last, unrecorded batch ran across it).
    pub end_unix_ns: u64,
    /// Batches that completed inside the window.
    pub batches: u64,
    /// Samples in those batches.
    pub samples: u64,
}

/// Where a peak memory figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// libtorch's CUDA caching allocator (`peak reserved` on the device).
    CachingAllocator,
    /// NVML's per-process used memory (includes the CUDA context).
    NvmlProcess,
}

/// Peak device memory the process used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryInfo {
    /// The peak, bytes.
    pub peak_device_bytes: u64,
    /// Where the figure came from.
    pub source: MemorySource,
}

/// Host facts at the window's start and end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// CPUs in the process's affinity mask.
    pub cpus_allowed: Option<u32>,
    /// The cgroup CPU quota in CPUs (`cpu.max`), or `None` when unlimited or unknown.
    pub cpu_quota: Option<f64>,
    /// PSI `cpu some avg10` at the window start, percent.
    pub psi_cpu_some_avg10_start: Option<f64>,
    /// PSI `cpu some avg10` at the window end, percent.
    pub psi_cpu_some_avg10_end: Option<f64>,
    /// One-minute load average at the window start.
    pub loadavg_start: Option<f64>,
    /// One-minute load average at the window end.
    pub loadavg_end: Option<f64>,
}

/// A named warning the worker recorded (an allocation-contract mismatch, for instance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerWarning {
    /// A stable `snake_case` name.
    pub kind: String,
    /// The human-readable message.
    pub message: String,
}

/// `worker.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// This worker's replica id, `0..count`.
    pub replica: u32,
    /// Complete or failed.
    pub status: Status,
    /// Why it failed, when it did.
    pub failure: Option<Failure>,
    /// The declared configuration.
    pub config: WorkerConfig,
    /// Host and scheduler identity.
    pub identity: Identity,
    /// The device actually used (absent when the worker failed before knowing it).
    pub device: Option<DeviceInfo>,
    /// How the workload ran.
    #[serde(default)]
    pub runtime: Option<RuntimeInfo>,
    /// Barrier timestamps.
    pub barrier: Option<BarrierTiming>,
    /// The timed window (absent when the worker failed before it).
    pub window: Option<WindowInfo>,
    /// Peak device memory (absent on CPU).
    pub memory: Option<MemoryInfo>,
    /// Host facts.
    pub host: Option<HostInfo>,
    /// Device-wide telemetry summary (absent without NVML).
    pub telemetry: Option<TelemetrySummary>,
    /// GPU activity counters (NVML GPM) over the window, or why there are none (absent without
    /// NVML or before the window).
    #[serde(default)]
    pub gpm: Option<GpmReport>,
    /// Energy over the window from NVML's total energy counter (absent without NVML or
    /// telemetry).
    #[serde(default)]
    pub energy: Option<EnergyReport>,
    /// Warnings recorded by the worker.
    #[serde(default)]
    pub warnings: Vec<WorkerWarning>,
    /// The MPS share declared and what the CUDA runtime reported (absent in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<ShareReport>,
    /// What a hog worker took and held (`hog` workload only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hog: Option<HogReport>,
    /// A serve worker's request counts (absent for other workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeWindowInfo>,
    /// A `serve-llm` worker's request, token and iteration counts (absent for other
    /// workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_llm: Option<LlmServeWindowInfo>,
    /// The build of coload that ran this worker, as `bench-worker --version` prints it on one
    /// line: `0.1.0 (git 0123456789ab, libtorch 2.11.0+cu130)` (absent
    /// in records written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coload: Option<String>,
}

/// What a `serve-llm` worker's window did with its requests, by the window's end (the worker's
/// own window; the summary recounts them over the cohort's common interval).
/// `llm_requests.jsonl` lists each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmServeWindowInfo {
    /// Requests scheduled inside the window (lines of `llm_requests.jsonl`).
    pub requests: u64,
    /// Requests whose last token was out by the window's end.
    pub completed: u64,
    /// Requests admitted but not complete by the window's end.
    pub unfinished: u64,
    /// Requests never admitted (queued at the end).
    pub not_admitted: u64,
    /// Output tokens out by the window's end.
    pub tokens_in_window: u64,
    /// Iterations (prefill or decode) that ended inside the window (lines of `batches.jsonl`).
    pub iterations_in_window: u64,
    /// The most KV-cache tokens the running requests reserved together during an iteration
    /// (at most `config.serve_llm.kv_budget_tokens`).
    pub kv_reserved_tokens_max: u64,
}

/// What a serve worker's window did with its requests. `requests.jsonl` lists each of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeWindowInfo {
    /// Requests scheduled inside the window.
    pub requests: u64,
    /// Requests whose batch completed inside the window.
    pub completed: u64,
    /// Requests of the batch still running at the window's end (it was run to completion and
    /// its line in `requests.jsonl` has its completion, after the end).
    pub in_flight_at_end: u64,
    /// Requests never dispatched (queued at the end).
    pub queued_at_end: u64,
    /// Age at the window's end of the oldest request that did not complete inside it,
    /// nanoseconds (null when every request completed).
    pub oldest_unfinished_age_ns: Option<u64>,
    /// Batches dispatched (lines of `requests.jsonl` with a batch).
    pub batches_dispatched: u64,
    /// Offsets of an arrivals file that fell at or past the window's end (not served).
    pub offsets_beyond_window: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warmup_round_trips_with_its_stop_words() {
        for stop in [
            WarmupStop::NoneAsked,
            WarmupStop::Steady,
            WarmupStop::MaxBatches,
            WarmupStop::MaxTime,
        ] {
            let runtime = RuntimeInfo {
                warmup: Some(WarmupReport {
                    batches: 24,
                    min_batches: 16,
                    max_batches: 160,
                    block_batches: 8,
                    window_blocks: 1,
                    stop,
                    elapsed_ns: 3_448_187_508,
                    previous_median_ns: Some(937_833_539),
                    last_median_ns: None,
                }),
                ..RuntimeInfo::default()
            };
            let json = serde_json::to_string(&runtime).unwrap();
            assert!(
                json.contains(&format!("\"stop\":\"{}\"", stop.as_str())),
                "{json}"
            );
            assert_eq!(serde_json::from_str::<RuntimeInfo>(&json).unwrap(), runtime);
        }
        // Older records have no warmup, and one without it writes none.
        let old: RuntimeInfo = serde_json::from_str(
            r#"{"inference_guard":null,"cudnn_benchmark":null,"mps_client":false,"torch_threads":null}"#,
        )
        .unwrap();
        assert_eq!(old.warmup, None);
        assert!(!serde_json::to_string(&old).unwrap().contains("warmup"));
    }
}
