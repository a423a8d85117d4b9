//! The errors of this crate.

use coload_cohort_schema::{FailureKind, WorkerWarning};

/// What went wrong while identifying the device, sampling it or checking the allocation.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// NVML could not be loaded or initialized (no driver, no `libnvidia-ml.so.1`).
    #[error("nvml is unavailable: {0}")]
    NvmlUnavailable(NvmlError),
    /// An NVML call failed.
    #[error("nvml call failed: {0}")]
    Nvml(#[from] NvmlError),
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
            DeviceError::Nvml(_) => FailureKind::NvmlError,
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

/// An NVML return code, as far as coload tells them apart (`nvmlReturn_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NvmlCode {
    /// `NVML_ERROR_UNINITIALIZED` (1).
    Uninitialized,
    /// `NVML_ERROR_INVALID_ARGUMENT` (2): on a MIG index, an index with no device behind it on
    /// some drivers.
    InvalidArgument,
    /// `NVML_ERROR_NOT_SUPPORTED` (3).
    NotSupported,
    /// `NVML_ERROR_NO_PERMISSION` (4): on a MIG index, a device this process may not see.
    NoPermission,
    /// `NVML_ERROR_NOT_FOUND` (6).
    NotFound,
    /// `NVML_ERROR_FUNCTION_NOT_FOUND` (13): the driver's library lacks the call (too old).
    FunctionNotFound,
    /// `NVML_ERROR_GPU_IS_LOST` (15).
    GpuIsLost,
    /// `NVML_ERROR_UNKNOWN` (999).
    Unknown,
    /// Any other code, raw.
    Other(u32),
}

impl NvmlCode {
    /// The code of a raw `nvmlReturn_t` (0, success, reads as `Other(0)`).
    #[must_use]
    pub fn from_raw(rc: u32) -> Self {
        match rc {
            1 => NvmlCode::Uninitialized,
            2 => NvmlCode::InvalidArgument,
            3 => NvmlCode::NotSupported,
            4 => NvmlCode::NoPermission,
            6 => NvmlCode::NotFound,
            13 => NvmlCode::FunctionNotFound,
            15 => NvmlCode::GpuIsLost,
            999 => NvmlCode::Unknown,
            other => NvmlCode::Other(other),
        }
    }

    /// The raw `nvmlReturn_t`.
    #[must_use]
    pub fn raw(self) -> u32 {
        match self {
            NvmlCode::Uninitialized => 1,
            NvmlCode::InvalidArgument => 2,
            NvmlCode::NotSupported => 3,
            NvmlCode::NoPermission => 4,
            NvmlCode::NotFound => 6,
            NvmlCode::FunctionNotFound => 13,
            NvmlCode::GpuIsLost => 15,
            NvmlCode::Unknown => 999,
            NvmlCode::Other(rc) => rc,
        }
    }
}

/// One failed NVML call: which call, NVML's return code where one is known, and the message.
///
/// Displays as `{call}: {message}` (`nvmlGpmSampleGet: the current user does not have
/// permission to operate on this device ...`), the form `worker.json` records as a reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {message}")]
pub struct NvmlError {
    call: String,
    code: Option<NvmlCode>,
    message: String,
}

impl NvmlError {
    /// An error of `call` with `code` (where NVML returned one) and `message`.
    #[must_use]
    pub fn new(
        call: impl Into<String>,
        code: Option<NvmlCode>,
        message: impl Into<String>,
    ) -> Self {
        NvmlError {
            call: call.into(),
            code,
            message: message.into(),
        }
    }

    /// The call that failed, with its arguments where they help (`nvmlDeviceGetMigDeviceHandleByIndex(gpu 0, 3)`).
    #[must_use]
    pub fn call(&self) -> &str {
        &self.call
    }

    /// NVML's return code, when the failure came from one.
    #[must_use]
    pub fn code(&self) -> Option<NvmlCode> {
        self.code
    }

    /// What went wrong, in words.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether this error, from one MIG device index, means only that index is to be skipped:
    /// `NVML_ERROR_INVALID_ARGUMENT` or `NVML_ERROR_NO_PERMISSION`, as NVIDIA's go-nvlib skips
    /// them when it walks a GPU's MIG devices.
    #[must_use]
    pub fn skips_mig_index(&self) -> bool {
        matches!(
            self.code,
            Some(NvmlCode::InvalidArgument | NvmlCode::NoPermission)
        )
    }
}

/// An error of the raw call `call` that returned `rc`, in NVML's words.
pub(crate) fn raw_error(call: impl Into<String>, rc: u32) -> NvmlError {
    let message = match nvml_wrapper::error::nvml_try(rc) {
        Ok(()) => "success".to_owned(),
        Err(e) => e.to_string(),
    };
    NvmlError::new(call, Some(NvmlCode::from_raw(rc)), message)
}

fn join_messages(warnings: &[WorkerWarning]) -> String {
    warnings
        .iter()
        .map(|w| format!("{} ({})", w.message, w.kind))
        .collect::<Vec<_>>()
        .join("; ")
}
