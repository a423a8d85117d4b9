//! One monotonic clock anchored once to the wall clock.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A monotonic clock with a fixed wall-clock anchor.
///
/// The anchor is read once: `unix_ns(t) = anchor_unix_ns + (t - anchor_instant)`. Durations
/// between two instants are therefore exact monotonic differences, and the absolute times line
/// up with other hosts' as well as their wall clocks do (NTP), which the barrier's clock-offset
/// probe measures.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    anchor_instant: Instant,
    anchor_unix_ns: u64,
}

impl Clock {
    /// Anchors a clock now.
    ///
    /// The wall clock is read between two monotonic reads and paired with their midpoint, which
    /// bounds the pairing error by half the gap (tens of nanoseconds).
    #[must_use]
    pub fn anchor() -> Self {
        let before = Instant::now();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let after = Instant::now();
        let mid = before + (after - before) / 2;
        Clock {
            anchor_instant: mid,
            anchor_unix_ns: duration_ns(wall),
        }
    }

    /// The current time, unix nanoseconds.
    #[must_use]
    pub fn now_unix_ns(&self) -> u64 {
        self.to_unix_ns(Instant::now())
    }

    /// Converts a monotonic instant to unix nanoseconds on this clock.
    #[must_use]
    pub fn to_unix_ns(&self, t: Instant) -> u64 {
        match t.checked_duration_since(self.anchor_instant) {
            Some(d) => self.anchor_unix_ns.saturating_add(duration_ns(d)),
            None => self
                .anchor_unix_ns
                .saturating_sub(duration_ns(self.anchor_instant - t)),
        }
    }

    /// Converts unix nanoseconds on this clock to a monotonic instant.
    #[must_use]
    pub fn to_instant(&self, unix_ns: u64) -> Instant {
        if unix_ns >= self.anchor_unix_ns {
            self.anchor_instant + Duration::from_nanos(unix_ns - self.anchor_unix_ns)
        } else {
            let back = Duration::from_nanos(self.anchor_unix_ns - unix_ns);
            self.anchor_instant
                .checked_sub(back)
                .unwrap_or(self.anchor_instant)
        }
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        let clock = Clock::anchor();
        let now = Instant::now();
        let ns = clock.to_unix_ns(now);
        let back = clock.to_instant(ns);
        let diff = if back > now { back - now } else { now - back };
        assert!(diff < Duration::from_micros(1), "{diff:?}");
    }

    #[test]
    fn anchored_time_tracks_the_wall_clock() {
        let clock = Clock::anchor();
        let wall = duration_ns(SystemTime::now().duration_since(UNIX_EPOCH).unwrap());
        let ours = clock.now_unix_ns();
        assert!(ours.abs_diff(wall) < 50_000_000, "{ours} vs {wall}");
    }

    #[test]
    fn later_instants_give_later_times() {
        let clock = Clock::anchor();
        let a = clock.now_unix_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = clock.now_unix_ns();
        assert!(b - a >= 2_000_000);
    }
}
