//! The one error type of coload-cluster.

use std::path::PathBuf;

/// Why a manifest could not be rendered, a plan cannot run on the cluster, or a cluster call
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The cohort spec is invalid (the same check as every other door).
    #[error(transparent)]
    Spec(#[from] coload_spec::SpecError),
    /// The spec could not be rendered into argv.
    #[error(transparent)]
    Render(#[from] coload_spec::RenderError),
    /// A value given for the cluster (node, resource key, image, namespace) is not valid.
    #[error("{0}")]
    Usage(String),
    /// The plan does not say where a policy runs on the cluster, or the node does not offer it.
    #[error("plan {plan}: {message}")]
    Plan {
        /// The plan's name or path.
        plan: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{what} {}", .path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file that must not be overwritten is already there.
    #[error("{} already exists; nothing is overwritten (choose another folder)", .0.display())]
    Exists(PathBuf),
    /// `kubectl` could not be run or said no.
    #[error("kubectl {verb} failed: {message}")]
    Kubectl {
        /// The verb and its object (`get node gpu-1`).
        verb: String,
        /// Its stderr, or why it could not run.
        message: String,
    },
    /// The study itself failed (the same errors as on one node).
    #[error(transparent)]
    Study(#[from] coload_study::StudyError),
}

impl ClusterError {
    /// The process exit code.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        use coload_cohort_schema::exit;
        match self {
            ClusterError::Spec(_)
            | ClusterError::Render(_)
            | ClusterError::Usage(_)
            | ClusterError::Plan { .. }
            | ClusterError::Exists(_) => exit::INVALID_INPUT,
            ClusterError::Io { .. } => exit::WRITE_FAILED,
            ClusterError::Kubectl { .. } => exit::INTERNAL,
            ClusterError::Study(e) => e.exit_code(),
        }
    }
}
