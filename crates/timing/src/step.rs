//! One batch of device work, and a mock of it.

use std::time::{Duration, Instant};

/// One batch of device work that returns only when the device has finished it.
///
/// Implementations must end with a device synchronize (for CUDA) so that the time between the
/// call and its return covers the completed work, not just the kernel launches. The runner calls
/// `step` inside the timed window, so an implementation should not allocate host memory, log or
/// take locks there either.
pub trait Step {
    /// What a failed batch reports.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Runs one batch and returns the number of samples it processed.
    fn step(&mut self) -> Result<u32, Self::Error>;
}

impl<S: Step + ?Sized> Step for &mut S {
    type Error = S::Error;

    fn step(&mut self) -> Result<u32, Self::Error> {
        (**self).step()
    }
}

/// A step that takes a fixed time and processes a fixed number of samples.
///
/// It sleeps by default (cheap on a busy test machine) or spins (exact durations, for timing
/// tests). It can be told to fail at a given batch to test error paths.
#[derive(Debug, Clone)]
pub struct MockStep {
    duration: Duration,
    samples: u32,
    spin: bool,
    fail_at: Option<u64>,
    calls: u64,
}

/// The error a [`MockStep`] reports when told to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("mock step failed at batch {0}")]
pub struct MockFailure(pub u64);

impl MockStep {
    /// A step of `duration` processing `samples` samples.
    #[must_use]
    pub fn new(duration: Duration, samples: u32) -> Self {
        MockStep {
            duration,
            samples,
            spin: false,
            fail_at: None,
            calls: 0,
        }
    }

    /// Busy-waits instead of sleeping, for exact durations.
    #[must_use]
    pub fn spinning(mut self) -> Self {
        self.spin = true;
        self
    }

    /// Fails on the call with this 0-based index (and every later one).
    #[must_use]
    pub fn failing_at(mut self, call: u64) -> Self {
        self.fail_at = Some(call);
        self
    }

    /// How many times `step` was called.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls
    }
}

impl Step for MockStep {
    type Error = MockFailure;

    fn step(&mut self) -> Result<u32, MockFailure> {
        let call = self.calls;
        self.calls += 1;
        if self.fail_at.is_some_and(|f| call >= f) {
            return Err(MockFailure(call));
        }
        if self.spin {
            let end = Instant::now() + self.duration;
            while Instant::now() < end {
                std::hint::spin_loop();
            }
        } else {
            std::thread::sleep(self.duration);
        }
        Ok(self.samples)
    }
}
