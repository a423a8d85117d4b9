/// Why a timed window did not run as asked.
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    /// The step failed; the batches before it are kept.
    #[error("step failed after {batches} batches: {source}")]
    Step {
        /// Batches that completed before the failure.
        batches: usize,
        /// The step's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// More batches completed than the buffer preallocated for; the window stopped early
    /// rather than allocate inside it.
    #[error(
        "the batch buffer (capacity {capacity}) filled before the window ended; \
         preallocate for more batches"
    )]
    CapacityExhausted {
        /// The buffer's capacity.
        capacity: usize,
    },
    /// The window was cancelled from outside (the worker received SIGTERM); the batches before
    /// it are kept.
    #[error("the window was cancelled after {batches} batches")]
    Cancelled {
        /// Batches that completed before the cancellation.
        batches: usize,
    },
}
