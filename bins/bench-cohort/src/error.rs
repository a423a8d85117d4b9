//! Every way the launcher can fail, with the typed cause it came from, and the exit code each
//! maps to (one match, [`LauncherError::exit_code`]).

use std::path::PathBuf;

use coload_cohort_schema::cli::RenderError;
pub(crate) use coload_cohort_schema::cli::error_chain as chain;
use coload_cohort_schema::{SchemaError, exit};

use crate::mps::MpsError;
use crate::share::ShareError;

/// Why `bench-cohort` stopped before it could report a cohort.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LauncherError {
    /// The command line is inconsistent.
    #[error("{0}")]
    Usage(String),
    /// The worker executable is not where it was looked for.
    #[error("bench-worker not found at {} (build it, or pass --worker-bin)", .0.display())]
    WorkerMissing(PathBuf),
    /// An output folder or file could not be created.
    #[error("cannot create {}", .path.display())]
    Output {
        /// The path.
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The flags could not be passed on (a path that is not UTF-8).
    #[error("cannot build the worker command line")]
    Render(#[from] RenderError),
    /// The Ctrl-C handler could not be installed.
    #[error("cannot install the Ctrl-C handler")]
    Signals(#[from] ctrlc::Error),
    /// A worker could not be started; the ones already started were stopped.
    #[error("cannot start replica {replica} ({}); the {started} worker(s) already started were stopped", .bin.display())]
    Spawn {
        /// The replica that could not be started.
        replica: u32,
        /// How many had been started before it.
        started: usize,
        /// The executable.
        bin: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The private MPS daemon could not be started, or did not take the share.
    #[error("--mode mps")]
    Mps(#[from] MpsError),
    /// The MPS share could not be planned for the cohort's devices.
    #[error("--mode mps")]
    Share(#[from] ShareError),
    /// The summary could not be written.
    #[error("cannot write the summary")]
    Summary(#[from] SchemaError),
}

impl LauncherError {
    /// The process exit code.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            LauncherError::Usage(_)
            | LauncherError::WorkerMissing(_)
            | LauncherError::Render(_)
            | LauncherError::Share(
                ShareError::UnknownDevice { .. } | ShareError::MigDevice { .. },
            ) => exit::INVALID_INPUT,
            LauncherError::Output { .. } | LauncherError::Summary(_) => exit::WRITE_FAILED,
            LauncherError::Signals(_) => exit::INTERNAL,
            LauncherError::Spawn { .. } => exit::INCOMPLETE_COHORT,
            LauncherError::Mps(_) | LauncherError::Share(ShareError::TotalUnknown { .. }) => {
                exit::PREFLIGHT_FAILED
            }
        }
    }
}
