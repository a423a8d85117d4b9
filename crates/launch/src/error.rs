//! Every way the launcher can fail, with the typed cause it came from, and the exit code each
//! maps to (one match, [`LauncherError::exit_code`]).

use std::path::PathBuf;

use coload_cohort_schema::{SchemaError, exit};
use coload_spec::{RenderError, SpecError};

use crate::mps::MpsError;
use crate::share::ShareError;

/// Why `bench-cohort` stopped before it could report a cohort.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    /// The cohort's spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The placement does not fit the spec (devices per worker, repeats of a search).
    #[error("{0}")]
    Usage(String),
    /// The output folder holds an earlier cohort's results, which are never overwritten.
    #[error("{} exists: --out holds an earlier cohort's results, which are never overwritten; give a fresh folder", .0.display())]
    ResultsExist(PathBuf),
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
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            LauncherError::Spec(_)
            | LauncherError::ResultsExist(_)
            | LauncherError::Usage(_)
            | LauncherError::WorkerMissing(_)
            | LauncherError::Render(_)
            | LauncherError::Share(
                ShareError::UnknownDevice { .. } | ShareError::MigDevice { .. },
            ) => exit::INVALID_INPUT,
            LauncherError::Output { .. } | LauncherError::Summary(_) => exit::WRITE_FAILED,
            LauncherError::Spawn { .. } => exit::INCOMPLETE_COHORT,
            LauncherError::Mps(_) | LauncherError::Share(ShareError::TotalUnknown { .. }) => {
                exit::PREFLIGHT_FAILED
            }
        }
    }
}
