//! Every way a worker (or a cohort) can fail, by name, and the exit code each maps to.
//!
//! The kinds are written as `snake_case` strings in `worker.json` (`failure.kind`) and
//! `abort.json` (`kind`). The worker, the barrier, the launcher and the summarizer all use this
//! one enum, so a kind cannot be spelled two ways, and [`FailureKind::exit_code`] is the one
//! place that says which process exit code a kind leads to.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::exit;

/// A stable name for a failure.
///
/// New kinds may be added in a minor release; a reader that meets one it does not know keeps
/// its text in [`FailureKind::Other`] rather than refusing the document.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    // --- the command line and the worker's own set-up ---
    /// A flag or an option of the workload is invalid.
    InvalidOption,
    /// The experiment id is not a safe directory name.
    InvalidExperiment,
    /// The barrier's options contradict each other (replica outside the cohort, a lead shorter
    /// than the late margin).
    InvalidOptions,
    /// The output directory cannot be used (already holds a report, cannot be created).
    InvalidOutput,

    // --- the barrier ---
    /// The shared directory is missing, read-only, full or not ours to write.
    PreflightFailed,
    /// The experiment directory already holds the decision of an earlier run.
    StaleExperiment,
    /// The shared directory failed after the preflight.
    BarrierIo,
    /// A replica never arrived within the join timeout.
    BarrierTimeout,
    /// Two workers declared different configurations.
    ConfigMismatch,
    /// Two processes claimed the same replica id.
    DuplicateReplica,
    /// Two replicas carry the same incarnation.
    DuplicateIncarnation,
    /// A `ready.<n>.json` names a replica outside `0..count`.
    ReplicaOutOfRange,
    /// A record in the shared directory is not a valid document.
    InvalidRecord,
    /// The worker began its window later than the late margin allows (it saw the start too
    /// late, or was paused past it).
    LateStart,
    /// The start does not list this worker's incarnation.
    NotAdmitted,
    /// Another worker aborted the cohort for a reason without a kind of its own.
    BarrierAborted,
    /// The barrier's API was called out of order (a bug in the caller).
    BarrierMisuse,
    /// A peer worker failed before the start, so the cohort cannot run whole.
    PeerFailed,
    /// The launcher stopped the cohort (it was interrupted, or could not start every worker).
    LauncherStopped,

    // --- the device and the workload ---
    /// NVML could not be loaded or initialised.
    NvmlUnavailable,
    /// An NVML query failed.
    NvmlError,
    /// The device does not match the declared sharing mode (under strict checking).
    AllocationMismatch,
    /// The telemetry thread could not be started.
    TelemetryThread,
    /// libtorch reports CUDA unavailable where a GPU was asked for or expected.
    CudaUnavailable,
    /// The device ran out of memory.
    OutOfMemory,
    /// Any other libtorch error.
    LibtorchError,
    /// The step cannot be captured in (or replayed from) a CUDA graph.
    CudaGraph,
    /// `--model-file`: no file at that path.
    ModelFileMissing,
    /// `--model-file`: the file cannot be read.
    ModelFileUnreadable,
    /// `--model-file`: libtorch cannot load it as a TorchScript module.
    ModelFileNotTorchscript,
    /// `--model-file`: its forward refuses an input of `--input-shape`.
    ModelFileInputShape,
    /// `--model-file`: its forward does not return `[batch, num_classes]` logits.
    ModelFileOutputShape,
    /// `--model-file`: it has no trainable parameter.
    ModelFileNoParameters,

    // --- the window and after it ---
    /// The preallocated batch buffer filled before the window ended.
    BufferExhausted,
    /// SIGTERM or SIGINT stopped the worker.
    Terminated,
    /// The artifacts could not be written.
    WriteFailed,
    /// The window ended without one complete batch (the device, or the CPU shared with the
    /// other workers, was too slow for the window): nothing to measure.
    EmptyWindow,

    // --- the launcher's, in a cohort's `failure.json` ---
    /// A worker process could not be started.
    SpawnFailed,
    /// A worker process ended without writing its `worker.json` (killed, or not started by the
    /// loader: exit 127 is most often libtorch not found).
    WorkerExited,
    /// Every worker completed, but the summarizer refused the cohort (too little overlap, a
    /// co-location mismatch under `--strict`, ...).
    SummaryRefused,
    /// A cluster backend: a worker's Pod was never scheduled onto its node within the schedule
    /// timeout (a missing claim, too few free resources, a taint); the message is the
    /// scheduler's.
    PodNotScheduled,
    /// A cluster backend: the API server refused to create a worker's Pod (Pod Security
    /// admission, a quota, a webhook); the message is the Job controller's `FailedCreate`
    /// event. Not the barrier's `not_admitted`, which is about a worker that ran.
    PodNotAdmitted,

    /// A kind this version does not know (written by a newer coload), kept as written.
    #[serde(untagged)]
    Other(String),
}

impl FailureKind {
    /// The process exit code a worker that fails this way exits with.
    ///
    /// A worker that fails because another aborted the cohort takes the abort's kind, so a
    /// launcher reading any one Pod's exit code learns what went wrong with the cohort.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            FailureKind::InvalidOption
            | FailureKind::InvalidExperiment
            | FailureKind::InvalidOptions
            | FailureKind::InvalidOutput
            | FailureKind::ModelFileMissing
            | FailureKind::ModelFileUnreadable
            | FailureKind::ModelFileNotTorchscript
            | FailureKind::ModelFileInputShape
            | FailureKind::ModelFileOutputShape
            | FailureKind::ModelFileNoParameters => exit::INVALID_INPUT,
            FailureKind::PreflightFailed | FailureKind::StaleExperiment => exit::PREFLIGHT_FAILED,
            FailureKind::BarrierTimeout => exit::BARRIER_TIMEOUT,
            FailureKind::ConfigMismatch => exit::CONFIG_MISMATCH,
            FailureKind::LateStart | FailureKind::NotAdmitted => exit::LATE_START,
            FailureKind::DuplicateReplica => exit::DUPLICATE_REPLICA,
            FailureKind::DuplicateIncarnation
            | FailureKind::ReplicaOutOfRange
            | FailureKind::InvalidRecord
            | FailureKind::BarrierAborted
            | FailureKind::PeerFailed
            | FailureKind::LauncherStopped
            | FailureKind::Other(_) => exit::BARRIER_ABORTED,
            FailureKind::CudaUnavailable
            | FailureKind::OutOfMemory
            | FailureKind::LibtorchError
            | FailureKind::CudaGraph
            | FailureKind::BufferExhausted
            | FailureKind::EmptyWindow => exit::WORKLOAD_FAILED,
            FailureKind::SpawnFailed
            | FailureKind::WorkerExited
            | FailureKind::SummaryRefused
            | FailureKind::PodNotScheduled
            | FailureKind::PodNotAdmitted => exit::INCOMPLETE_COHORT,
            FailureKind::AllocationMismatch => exit::ALLOCATION_MISMATCH,
            FailureKind::WriteFailed => exit::WRITE_FAILED,
            FailureKind::Terminated => exit::TERMINATED,
            FailureKind::BarrierIo
            | FailureKind::BarrierMisuse
            | FailureKind::NvmlUnavailable
            | FailureKind::NvmlError
            | FailureKind::TelemetryThread => exit::INTERNAL,
        }
    }

    /// The name written in documents (`late_start`).
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            FailureKind::InvalidOption => "invalid_option",
            FailureKind::InvalidExperiment => "invalid_experiment",
            FailureKind::InvalidOptions => "invalid_options",
            FailureKind::InvalidOutput => "invalid_output",
            FailureKind::PreflightFailed => "preflight_failed",
            FailureKind::StaleExperiment => "stale_experiment",
            FailureKind::BarrierIo => "barrier_io",
            FailureKind::BarrierTimeout => "barrier_timeout",
            FailureKind::ConfigMismatch => "config_mismatch",
            FailureKind::DuplicateReplica => "duplicate_replica",
            FailureKind::DuplicateIncarnation => "duplicate_incarnation",
            FailureKind::ReplicaOutOfRange => "replica_out_of_range",
            FailureKind::InvalidRecord => "invalid_record",
            FailureKind::LateStart => "late_start",
            FailureKind::NotAdmitted => "not_admitted",
            FailureKind::BarrierAborted => "barrier_aborted",
            FailureKind::BarrierMisuse => "barrier_misuse",
            FailureKind::PeerFailed => "peer_failed",
            FailureKind::LauncherStopped => "launcher_stopped",
            FailureKind::NvmlUnavailable => "nvml_unavailable",
            FailureKind::NvmlError => "nvml_error",
            FailureKind::AllocationMismatch => "allocation_mismatch",
            FailureKind::TelemetryThread => "telemetry_thread",
            FailureKind::CudaUnavailable => "cuda_unavailable",
            FailureKind::OutOfMemory => "out_of_memory",
            FailureKind::LibtorchError => "libtorch_error",
            FailureKind::CudaGraph => "cuda_graph",
            FailureKind::ModelFileMissing => "model_file_missing",
            FailureKind::ModelFileUnreadable => "model_file_unreadable",
            FailureKind::ModelFileNotTorchscript => "model_file_not_torchscript",
            FailureKind::ModelFileInputShape => "model_file_input_shape",
            FailureKind::ModelFileOutputShape => "model_file_output_shape",
            FailureKind::ModelFileNoParameters => "model_file_no_parameters",
            FailureKind::BufferExhausted => "buffer_exhausted",
            FailureKind::Terminated => "terminated",
            FailureKind::WriteFailed => "write_failed",
            FailureKind::EmptyWindow => "empty_window",
            FailureKind::SpawnFailed => "spawn_failed",
            FailureKind::WorkerExited => "worker_exited",
            FailureKind::SummaryRefused => "summary_refused",
            FailureKind::PodNotScheduled => "pod_not_scheduled",
            FailureKind::PodNotAdmitted => "pod_not_admitted",
            FailureKind::Other(s) => s,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the worker completed its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The window ran to its end and every artifact was written.
    Complete,
    /// Something failed; `failure` says where and why.
    Failed,
}

/// The phase of a worker's life in which a failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Checking the shared directory and the device before any work.
    Preflight,
    /// Building the model and running the warmup batches.
    Warmup,
    /// Publishing ready and waiting for the start.
    Barrier,
    /// The timed window.
    Window,
    /// Writing the artifacts.
    Write,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every named kind, for the round-trip test (a kind missing here is caught by the match in
    /// `every_kind_is_listed`).
    const NAMED: [FailureKind; 42] = [
        FailureKind::InvalidOption,
        FailureKind::InvalidExperiment,
        FailureKind::InvalidOptions,
        FailureKind::InvalidOutput,
        FailureKind::PreflightFailed,
        FailureKind::StaleExperiment,
        FailureKind::BarrierIo,
        FailureKind::BarrierTimeout,
        FailureKind::ConfigMismatch,
        FailureKind::DuplicateReplica,
        FailureKind::DuplicateIncarnation,
        FailureKind::ReplicaOutOfRange,
        FailureKind::InvalidRecord,
        FailureKind::LateStart,
        FailureKind::NotAdmitted,
        FailureKind::BarrierAborted,
        FailureKind::BarrierMisuse,
        FailureKind::PeerFailed,
        FailureKind::LauncherStopped,
        FailureKind::NvmlUnavailable,
        FailureKind::NvmlError,
        FailureKind::AllocationMismatch,
        FailureKind::TelemetryThread,
        FailureKind::CudaUnavailable,
        FailureKind::OutOfMemory,
        FailureKind::LibtorchError,
        FailureKind::CudaGraph,
        FailureKind::ModelFileMissing,
        FailureKind::ModelFileUnreadable,
        FailureKind::ModelFileNotTorchscript,
        FailureKind::ModelFileInputShape,
        FailureKind::ModelFileOutputShape,
        FailureKind::ModelFileNoParameters,
        FailureKind::BufferExhausted,
        FailureKind::Terminated,
        FailureKind::WriteFailed,
        FailureKind::EmptyWindow,
        FailureKind::SpawnFailed,
        FailureKind::WorkerExited,
        FailureKind::SummaryRefused,
        FailureKind::PodNotScheduled,
        FailureKind::PodNotAdmitted,
    ];

    #[test]
    fn names_match_serde_and_round_trip() {
        for kind in &NAMED {
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()), "{kind:?}");
            let back: FailureKind = serde_json::from_str(&json).unwrap();
            assert_eq!(&back, kind);
            assert!(
                !matches!(back, FailureKind::Other(_)),
                "{kind:?} read back as Other"
            );
        }
        let mut names: Vec<&str> = NAMED.iter().map(FailureKind::as_str).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), NAMED.len(), "two kinds share a name");
    }

    #[test]
    fn an_unknown_kind_is_kept_as_written() {
        let kind: FailureKind = serde_json::from_str("\"gpu_on_fire\"").unwrap();
        assert_eq!(kind, FailureKind::Other("gpu_on_fire".to_owned()));
        assert_eq!(serde_json::to_string(&kind).unwrap(), "\"gpu_on_fire\"");
        assert_eq!(kind.exit_code(), exit::BARRIER_ABORTED);
    }

    #[test]
    fn kinds_map_to_their_codes() {
        assert_eq!(FailureKind::LateStart.exit_code(), 13);
        assert_eq!(FailureKind::NotAdmitted.exit_code(), exit::LATE_START);
        assert_eq!(FailureKind::ConfigMismatch.exit_code(), 12);
        assert_eq!(FailureKind::BarrierTimeout.exit_code(), 11);
        assert_eq!(FailureKind::DuplicateReplica.exit_code(), 14);
        assert_eq!(FailureKind::OutOfMemory.exit_code(), 20);
        assert_eq!(FailureKind::Terminated.exit_code(), 143);
        assert_eq!(FailureKind::PeerFailed.exit_code(), exit::BARRIER_ABORTED);
        // Every code a kind maps to has a name.
        for kind in &NAMED {
            assert_ne!(exit::name(kind.exit_code()), "unknown", "{kind:?}");
        }
    }

    #[test]
    fn every_kind_is_listed() {
        // Adding a variant breaks this match until it is added to NAMED as well.
        for kind in &NAMED {
            match kind {
                FailureKind::InvalidOption
                | FailureKind::InvalidExperiment
                | FailureKind::InvalidOptions
                | FailureKind::InvalidOutput
                | FailureKind::PreflightFailed
                | FailureKind::StaleExperiment
                | FailureKind::BarrierIo
                | FailureKind::BarrierTimeout
                | FailureKind::ConfigMismatch
                | FailureKind::DuplicateReplica
                | FailureKind::DuplicateIncarnation
                | FailureKind::ReplicaOutOfRange
                | FailureKind::InvalidRecord
                | FailureKind::LateStart
                | FailureKind::NotAdmitted
                | FailureKind::BarrierAborted
                | FailureKind::BarrierMisuse
                | FailureKind::PeerFailed
                | FailureKind::LauncherStopped
                | FailureKind::NvmlUnavailable
                | FailureKind::NvmlError
                | FailureKind::AllocationMismatch
                | FailureKind::TelemetryThread
                | FailureKind::CudaUnavailable
                | FailureKind::OutOfMemory
                | FailureKind::LibtorchError
                | FailureKind::CudaGraph
                | FailureKind::ModelFileMissing
                | FailureKind::ModelFileUnreadable
                | FailureKind::ModelFileNotTorchscript
                | FailureKind::ModelFileInputShape
                | FailureKind::ModelFileOutputShape
                | FailureKind::ModelFileNoParameters
                | FailureKind::BufferExhausted
                | FailureKind::Terminated
                | FailureKind::WriteFailed
                | FailureKind::EmptyWindow
                | FailureKind::SpawnFailed
                | FailureKind::WorkerExited
                | FailureKind::SummaryRefused
                | FailureKind::PodNotScheduled
                | FailureKind::PodNotAdmitted => {}
                FailureKind::Other(_) => panic!("Other is not a named kind"),
            }
        }
    }
}
