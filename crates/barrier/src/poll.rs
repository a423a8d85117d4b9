//! Polling with exponential backoff and jitter.
//!
//! Workers poll the shared directory with fresh opens. Doubling the interval from 10 ms keeps
//! the first responses fast; capping it (1 s, or less when the lead is short) bounds how late a
//! worker can notice the start; jitter keeps a cohort launched at one instant from hitting the
//! file server in lockstep.

use std::time::{Duration, Instant};

use rand::Rng;

/// The first interval.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// The longest interval ever.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(1);

/// An exponential backoff from [`MIN_INTERVAL`] up to a cap.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    /// A backoff whose interval never exceeds `cap` (itself kept within
    /// [`MIN_INTERVAL`]..=[`MAX_INTERVAL`]).
    pub(crate) fn new(cap: Duration) -> Self {
        Backoff {
            next: MIN_INTERVAL,
            cap: cap.clamp(MIN_INTERVAL, MAX_INTERVAL),
        }
    }

    /// Back to the shortest interval (something changed; more may follow soon).
    pub(crate) fn reset(&mut self) {
        self.next = MIN_INTERVAL;
    }

    /// The next delay: the current interval scaled by a random factor in [0.5, 1], after which
    /// the interval doubles up to the cap.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next.mul_f64(rand::rng().random_range(0.5..=1.0));
        self.next = (self.next * 2).min(self.cap);
        delay
    }

    /// Sleeps for the next delay, but never past `deadline`.
    pub(crate) fn sleep(&mut self, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        std::thread::sleep(self.next_delay().min(left));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(300));
        let delays: Vec<Duration> = (0..12).map(|_| b.next_delay()).collect();
        assert!(delays[0] >= Duration::from_millis(5) && delays[0] <= MIN_INTERVAL);
        for d in &delays[6..] {
            assert!(
                *d >= Duration::from_millis(150) && *d <= Duration::from_millis(300),
                "{d:?}"
            );
        }
        b.reset();
        assert!(b.next_delay() <= MIN_INTERVAL);
    }

    #[test]
    fn the_cap_is_clamped() {
        let mut b = Backoff::new(Duration::from_secs(60));
        for _ in 0..20 {
            assert!(b.next_delay() <= MAX_INTERVAL);
        }
        let mut b = Backoff::new(Duration::ZERO);
        for _ in 0..5 {
            assert!(b.next_delay() <= MIN_INTERVAL);
        }
    }
}
