//! The clock a serve window runs on: real (monotonic) or simulated.
//!
//! The serve runner never reads `Instant::now` itself: it asks a [`ServeClock`] for the time and
//! to wait. On the real clock waiting is a sleep and a short spin; on the [`SimulatedClock`]
//! waiting moves time forward at once, and a simulated step advances it by its service time. A
//! queueing-theory test then runs a million requests in milliseconds with exact times, so its
//! answer depends on the batching logic alone, never on how busy the test machine is.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A source of time for the serve runner, in nanoseconds since a fixed origin (the window's
/// scheduled start).
pub trait ServeClock {
    /// Nanoseconds since the origin (0 before it).
    fn now_ns(&self) -> u64;

    /// Returns once [`ServeClock::now_ns`] has reached `t_ns` (at once when it has). Must not
    /// allocate, log or lock: the runner calls it inside the window.
    fn wait_until_ns(&self, t_ns: u64);
}

/// How long before a target the real clock stops sleeping and spins. A sleeping thread wakes
/// 50-100 us late on an idle Linux host and later on a busy one; spinning the last 200 us makes
/// dispatch precise to about a microsecond at the cost of a busy core only while a wait ends.
/// Whatever lateness remains is measured: a request's latency runs from its scheduled arrival.
pub const SPIN_BEFORE_NS: u64 = 200_000;

/// The real clock: monotonic nanoseconds since an origin instant.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose zero is `origin` (the window's scheduled start).
    #[must_use]
    pub fn new(origin: Instant) -> Self {
        MonotonicClock { origin }
    }

    /// The origin.
    #[must_use]
    pub fn origin(&self) -> Instant {
        self.origin
    }
}

impl ServeClock for MonotonicClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        Instant::now()
            .checked_duration_since(self.origin)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    fn wait_until_ns(&self, t_ns: u64) {
        // Compared as instants, not through `now_ns`: before the origin `now_ns` reads 0, and a
        // wait for 0 (the runners' wait for the window's start) must not return early.
        let Some(target) = self.origin.checked_add(Duration::from_nanos(t_ns)) else {
            // Centuries away: nothing real waits that long; keep to the clock's own reading.
            while self.now_ns() < t_ns {
                std::thread::sleep(Duration::from_secs(1));
            }
            return;
        };
        if let Some(coarse) = target
            .checked_duration_since(Instant::now())
            .and_then(|left| left.checked_sub(Duration::from_nanos(SPIN_BEFORE_NS)))
        {
            std::thread::sleep(coarse);
        }
        while Instant::now() < target {
            std::hint::spin_loop();
        }
    }
}

/// A simulated clock: time moves only when someone waits or [`SimulatedClock::advance`]s it.
/// Clones share one time, so a mock step can hold a clone and advance it by its service time.
#[derive(Debug, Clone, Default)]
pub struct SimulatedClock {
    now_ns: Arc<AtomicU64>,
}

impl SimulatedClock {
    /// A clock at time 0.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.now_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Sets the time (never backwards).
    pub fn set(&self, t_ns: u64) {
        self.now_ns.fetch_max(t_ns, Ordering::Relaxed);
    }
}

impl ServeClock for SimulatedClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::Relaxed)
    }

    fn wait_until_ns(&self, t_ns: u64) {
        self.set(t_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_clock_moves_only_forward_and_is_shared() {
        let c = SimulatedClock::new();
        let d = c.clone();
        c.wait_until_ns(50);
        assert_eq!(d.now_ns(), 50);
        d.advance(7);
        assert_eq!(c.now_ns(), 57);
        c.wait_until_ns(10);
        assert_eq!(c.now_ns(), 57);
    }

    #[test]
    fn the_real_clock_never_wakes_early() {
        let origin = Instant::now();
        let c = MonotonicClock::new(origin);
        c.wait_until_ns(3_000_000);
        let now = c.now_ns();
        assert!(now >= 3_000_000, "woke at {now} ns");
        // Spinning the last 200 us makes the lateness microseconds on an idle host; a loaded
        // test machine preempts the thread for milliseconds, so only a gross bound is checked.
        assert!(now - 3_000_000 < 50_000_000, "{} ns late", now - 3_000_000);
        // A past target returns at once.
        let before = c.now_ns();
        c.wait_until_ns(1);
        assert!(c.now_ns() - before < 1_000_000);
        let future = MonotonicClock::new(Instant::now() + Duration::from_secs(5));
        assert_eq!(future.now_ns(), 0);
        // Waiting for the origin itself waits for it, although `now_ns` reads 0 before it.
        let origin = Instant::now() + Duration::from_millis(20);
        MonotonicClock::new(origin).wait_until_ns(0);
        assert!(Instant::now() >= origin, "woke before the origin");
    }
}
