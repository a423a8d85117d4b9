//! The errors of this crate.

use coload_cohort_schema::{FailureKind, WorkerWarning};

/// What went wrong while identifying the device, sampling it or checking the allocation.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// NVML could not be loaded or initialized (no driver, no `libnvidia-ml.so.1`).
    #[error("nvml is unavailable: {0}")]
    NvmlUnavailable(String),
    /// An NVML query failed.
    #[error("nvml query `{query}` failed: {message}")]
    Nvml {
        /// The query that failed (`device_by_index(0)`, ...).
        query: String,
        /// NVML's message.
        message: String,
    },
    /// An option was out of range (a sampling rate of zero, a capacity of zero, ...).
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The device does not match the declared mode and strict checking was asked for.
    #[error("allocation does not match mode `{mode}`: {}", join_messages(.warnings))]
    AllocationMismatch {
        /// The declared mode.
        mode: String,
        /// Every mismatch found.
        warnings: Vec<WorkerWarning>,
    },
    /// The telemetry thread could not be started.
    #[error("could not start the telemetry thread: {0}")]
    Thread(#[from] std::io::Error),
}

impl DeviceError {
    /// The failure's name for `worker.json`'s `failure.kind`.
    #[must_use]
    pub fn kind(&self) -> FailureKind {
        match self {
            DeviceError::NvmlUnavailable(_) => FailureKind::NvmlUnavailable,
            DeviceError::Nvml { .. } => FailureKind::NvmlError,
            DeviceError::InvalidOption(_) => FailureKind::InvalidOption,
            DeviceError::AllocationMismatch { .. } => FailureKind::AllocationMismatch,
            DeviceError::Thread(_) => FailureKind::TelemetryThread,
        }
    }

    /// The process exit code a binary should end with for this error: its kind's.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        self.kind().exit_code()
    }
}

fn join_messages(warnings: &[WorkerWarning]) -> String {
    warnings
        .iter()
        .map(|w| format!("{} ({})", w.message, w.kind))
        .collect::<Vec<_>>()
        .join("; ")
}
