//! Every way the worker can end early, with the typed cause it came from.
//!
//! One enum for the whole binary, after nextest's `errors.rs`: each variant carries the
//! library error that caused it (as its `source()`), [`WorkerError::kind`] is the one match that
//! names it, and the exit code follows from the kind ([`FailureKind::exit_code`]). What lands in
//! `worker.json` and on stderr is the whole chain of messages ([`chain`]).

use std::time::Duration;

use coload_barrier::BarrierError;
use coload_cohort_schema::{FailureKind, Stage, exit};
use coload_device::DeviceError;
use coload_spec::SpecError;
pub(crate) use coload_spec::error_chain as chain;
use coload_timing::TimingError;
use coload_workload::WorkloadError;

/// Why the arguments were refused, before anything ran: which flag, and what to do. The worker
/// then exits with [`ArgsError::exit_code`] and writes nothing.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// The spec refused a flag or a relation between flags (`SpecError::flag_name` names it).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The library that uses a flag's value refused it (an unknown model, a batcher's limit, an
    /// arrival trace's line); the message says what is wrong and does not name the flag.
    #[error("{flag}: {message}")]
    Value {
        /// The flag at fault, as typed on the command line (`--model`).
        flag: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
    /// As [`ArgsError::Value`], with a message that already names the flag or the file and
    /// line at fault (`arrivals.txt line 3: ...`).
    #[error("{message}")]
    Said {
        /// The flag at fault.
        flag: &'static str,
        /// What is wrong, where, and what to do.
        message: String,
    },
    /// `--experiment` cannot name the barrier's folder.
    #[error(transparent)]
    Experiment(BarrierError),
}

impl ArgsError {
    /// A value refused by the library that uses it, under its flag.
    pub(crate) fn value(flag: &'static str, message: impl std::fmt::Display) -> Self {
        ArgsError::Value {
            flag,
            message: message.to_string(),
        }
    }

    /// A refusal whose message already names the flag or the file and line at fault.
    pub(crate) fn said(flag: &'static str, message: impl std::fmt::Display) -> Self {
        ArgsError::Said {
            flag,
            message: message.to_string(),
        }
    }

    /// The flag at fault, where one is (`--experiment` for a bad experiment id).
    #[must_use]
    pub fn flag_name(&self) -> Option<&'static str> {
        match self {
            ArgsError::Spec(e) => e.flag_name(),
            ArgsError::Value { flag, .. } | ArgsError::Said { flag, .. } => Some(flag),
            ArgsError::Experiment(_) => Some("--experiment"),
        }
    }

    /// The process exit code: invalid input, whatever the flag.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        exit::INVALID_INPUT
    }
}

/// Why a worker failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    /// `--out` cannot hold this worker's artifacts.
    #[error("{0}")]
    Output(String),

    /// The barrier refused or failed.
    #[error("barrier")]
    Barrier {
        /// Where: the preflight or the rendezvous.
        stage: Stage,
        #[source]
        source: BarrierError,
    },

    /// Building or warming up the workload failed.
    #[error("workload")]
    Workload {
        /// Where: building the model or the warmup.
        stage: Stage,
        #[source]
        source: WorkloadError,
    },

    /// The device does not match `--mode` and `--strict-device` was given.
    #[error("allocation check")]
    Allocation(#[source] DeviceError),

    /// `--device auto` would have measured the CPU on a host with GPUs.
    #[error(
        "NVML sees {gpus} GPU(s) but libtorch reports CUDA unavailable, so --device auto would \
         measure the CPU; check CUDA_VISIBLE_DEVICES ({visible}) and that libtorch_cuda.so is \
         loaded, or pass --device cpu to measure the CPU on purpose"
    )]
    SilentCpuFallback {
        /// GPUs NVML lists.
        gpus: u32,
        /// `CUDA_VISIBLE_DEVICES`, or `unset`.
        visible: String,
    },

    /// The window began later than the late margin allows: the worker was paused (SIGSTOP, a
    /// starved node) between reading the start and the start itself.
    #[error(
        "the window began {late} s after the common start, past the {margin} s late margin \
         ({batches} batches timed); the worker was paused or starved between the barrier and the \
         start, so its window does not overlap its peers' and the cohort must be rerun",
        late = seconds(*lateness_ns),
        margin = margin.as_secs_f64()
    )]
    LateStart {
        /// Actual minus scheduled start, nanoseconds.
        lateness_ns: i64,
        /// The late margin (the barrier's).
        margin: Duration,
        /// Batches the late window still timed (kept in `batches.jsonl`).
        batches: usize,
    },

    /// The window ended without one complete batch: nothing was measured. On a GPU the window
    /// is shorter than one batch; on the CPU the workers starve each other's cores.
    #[error(
        "the {window_s} s window ended without one complete batch; make --window-s longer than \
         a batch, or give each worker more of the machine (fewer workers, a smaller \
         --batch-size or --image-size)"
    )]
    EmptyWindow {
        /// The window's length, seconds.
        window_s: f64,
    },

    /// The timed window stopped early.
    #[error("timed window")]
    Window(#[source] TimingError<WorkloadError>),

    /// The artifacts could not be written.
    #[error("{0}")]
    Write(String),
}

impl WorkerError {
    /// The stage to record in `worker.json`.
    pub(crate) fn stage(&self) -> Stage {
        match self {
            WorkerError::Output(_)
            | WorkerError::Allocation(_)
            | WorkerError::SilentCpuFallback { .. } => Stage::Preflight,
            WorkerError::Barrier { stage, .. } | WorkerError::Workload { stage, .. } => *stage,
            WorkerError::LateStart { .. }
            | WorkerError::EmptyWindow { .. }
            | WorkerError::Window(_) => Stage::Window,
            WorkerError::Write(_) => Stage::Write,
        }
    }

    /// The failure's name, which also decides the exit code.
    pub(crate) fn kind(&self) -> FailureKind {
        match self {
            WorkerError::Output(_) => FailureKind::InvalidOutput,
            WorkerError::Barrier { source, .. } => source.kind(),
            WorkerError::Workload { source, .. }
            | WorkerError::Window(TimingError::Step { source, .. }) => source.kind(),
            WorkerError::Allocation(source) => source.kind(),
            WorkerError::SilentCpuFallback { .. } => FailureKind::CudaUnavailable,
            WorkerError::LateStart { .. } => FailureKind::LateStart,
            WorkerError::EmptyWindow { .. } => FailureKind::EmptyWindow,
            WorkerError::Window(TimingError::CapacityExhausted { .. }) => {
                FailureKind::BufferExhausted
            }
            WorkerError::Window(TimingError::Cancelled { .. }) => FailureKind::Terminated,
            WorkerError::Write(_) => FailureKind::WriteFailed,
        }
    }

    /// The process exit code.
    pub(crate) fn exit_code(&self) -> u8 {
        self.kind().exit_code()
    }
}

/// Nanoseconds as seconds with millisecond precision.
fn seconds(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::exit;

    use super::*;

    #[test]
    fn the_cause_decides_kind_code_and_message() {
        let e = WorkerError::Workload {
            stage: Stage::Warmup,
            source: WorkloadError::OutOfMemory("CUDA out of memory".into()),
        };
        assert_eq!(e.kind(), FailureKind::OutOfMemory);
        assert_eq!(e.exit_code(), exit::WORKLOAD_FAILED);
        assert_eq!(e.stage(), Stage::Warmup);
        assert_eq!(chain(&e), "workload: out of memory: CUDA out of memory");

        let e = WorkerError::Window(TimingError::Step {
            batches: 7,
            source: WorkloadError::Libtorch("cuDNN error".into()),
        });
        assert_eq!(e.kind(), FailureKind::LibtorchError);
        assert_eq!(
            chain(&e),
            "timed window: step failed after 7 batches: libtorch error: cuDNN error"
        );

        let e = WorkerError::Window(TimingError::Cancelled { batches: 3 });
        assert_eq!(e.exit_code(), exit::TERMINATED);
        let e = WorkerError::Window(TimingError::CapacityExhausted { capacity: 9 });
        assert_eq!(e.kind(), FailureKind::BufferExhausted);
    }

    #[test]
    fn a_late_window_is_a_late_start() {
        let e = WorkerError::LateStart {
            lateness_ns: 2_012_000_000,
            margin: Duration::from_millis(500),
            batches: 0,
        };
        assert_eq!(e.exit_code(), exit::LATE_START);
        assert_eq!(e.stage(), Stage::Window);
        assert!(
            chain(&e).starts_with(
                "the window began 2.012 s after the common start, past the 0.5 s late margin \
                 (0 batches timed)"
            ),
            "{}",
            chain(&e)
        );
    }
}
