/// Why a timed window did not run as asked. `E` is the step's own error type
/// ([`crate::Step::Error`]), kept as it is so the caller can match on it.
#[derive(Debug, thiserror::Error)]
pub enum TimingError<E> {
    /// The step failed; the batches before it are kept.
    #[error("step failed after {batches} batches")]
    Step {
        /// Batches that completed before the failure.
        batches: usize,
        /// The step's error.
        #[source]
        source: E,
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
