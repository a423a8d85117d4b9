//! The timed window and the warmup before it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::buffer::{BatchBuffer, RawBatch};
use crate::clock::Clock;
use crate::error::TimingError;
use crate::step::Step;

/// How long before the target `sleep_until` stops sleeping and starts spinning. Thread wake-up
/// latency on a loaded Linux host is well under this; spinning the rest makes the start exact
/// to a microsecond or so.
const SPIN_BEFORE: Duration = Duration::from_millis(2);

/// Sleeps until `target`: a coarse sleep, then a short spin. Returns at once if it is past.
pub fn sleep_until(target: Instant) {
    if let Some(coarse) = target
        .checked_duration_since(Instant::now())
        .and_then(|left| left.checked_sub(SPIN_BEFORE))
    {
        std::thread::sleep(coarse);
    }
    while Instant::now() < target {
        std::hint::spin_loop();
    }
}

/// What a window produced, besides the records in the buffer. `E` is the step's error type.
#[derive(Debug)]
pub struct WindowOutcome<E> {
    /// The start asked for, unix nanoseconds.
    pub scheduled_start_unix_ns: u64,
    /// When the first batch actually began.
    pub actual_start_unix_ns: u64,
    /// `actual - scheduled`, nanoseconds.
    pub lateness_ns: i64,
    /// The window's end: scheduled start + window length.
    pub end_unix_ns: u64,
    /// Batches that completed inside the window (the buffer's length).
    pub batches: usize,
    /// Samples in those batches.
    pub samples: u64,
    /// Why the window stopped early, if it did. The records before it are kept.
    pub error: Option<TimingError<E>>,
}

/// Runs the timed window.
///
/// Sleeps until `start_unix_ns`, then calls `step` until `start + window` has passed, recording
/// each batch that *completed* inside the window; the batch running across the end is run to
/// completion (the device stays loaded until the end for the peers' sake) but not recorded.
/// If the start is already past, the window begins at once and ends at the same instant it would
/// have; the lateness says by how much it was missed.
///
/// Between the start and the end this function performs no I/O, logging, locking or heap
/// allocation: records go into `buffer`, which must have been sized beforehand
/// ([`BatchBuffer::capacity_for`]). A full buffer ends the window with
/// [`TimingError::CapacityExhausted`] rather than reallocate.
pub fn run_window<S: Step>(
    step: &mut S,
    clock: &Clock,
    start_unix_ns: u64,
    window: Duration,
    buffer: &mut BatchBuffer,
) -> WindowOutcome<S::Error> {
    let never = AtomicBool::new(false);
    run_window_cancellable(step, clock, start_unix_ns, window, buffer, &never)
}

/// [`run_window`], stopping before the next batch once `cancel` is set (by a signal handler, for
/// instance) with [`TimingError::Cancelled`]. Checking it is one relaxed atomic load per batch:
/// no lock, no allocation.
pub fn run_window_cancellable<S: Step>(
    step: &mut S,
    clock: &Clock,
    start_unix_ns: u64,
    window: Duration,
    buffer: &mut BatchBuffer,
    cancel: &AtomicBool,
) -> WindowOutcome<S::Error> {
    buffer.clear();
    let start = clock.to_instant(start_unix_ns);
    let deadline = start + window;
    sleep_until(start);

    // --- timed window: nothing but steps, timer reads and pushes into preallocated memory ---
    let actual_start = Instant::now();
    let mut samples: u64 = 0;
    let mut error = None;
    loop {
        if cancel.load(Ordering::Relaxed) {
            error = Some(TimingError::Cancelled {
                batches: buffer.len(),
            });
            break;
        }
        let t0 = Instant::now();
        if t0 >= deadline {
            break;
        }
        match step.step() {
            Ok(n) => {
                let t1 = Instant::now();
                if t1 > deadline {
                    break;
                }
                if !buffer.push(RawBatch {
                    start: t0,
                    end: t1,
                    samples: n,
                }) {
                    error = Some(TimingError::CapacityExhausted {
                        capacity: buffer.capacity(),
                    });
                    break;
                }
                samples += u64::from(n);
            }
            Err(e) => {
                error = Some(TimingError::Step {
                    batches: buffer.len(),
                    source: e,
                });
                break;
            }
        }
    }
    // --- end of the timed window ---

    let actual_start_unix_ns = clock.to_unix_ns(actual_start);
    WindowOutcome {
        scheduled_start_unix_ns: start_unix_ns,
        actual_start_unix_ns,
        lateness_ns: actual_start_unix_ns as i64 - start_unix_ns as i64,
        end_unix_ns: clock.to_unix_ns(deadline),
        batches: buffer.len(),
        samples,
        error,
    }
}

/// What the warmup measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmupStats {
    /// Batches run.
    pub batches: u32,
    /// Time for all of them.
    pub total: Duration,
    /// The fastest batch (sizes the window's buffer).
    pub fastest: Duration,
    /// The median batch.
    pub median: Duration,
}

impl WarmupStats {
    /// The stats of `batches` warmup batches that took `total`, from their `durations` (sorted
    /// here); zero durations when there were none.
    pub(crate) fn of(batches: u32, total: Duration, durations: &mut [Duration]) -> WarmupStats {
        durations.sort_unstable();
        WarmupStats {
            batches,
            total,
            fastest: durations.first().copied().unwrap_or_default(),
            median: durations
                .get(durations.len() / 2)
                .copied()
                .unwrap_or_default(),
        }
    }
}

/// Runs `batches` untimed batches before the barrier (autotuning, allocator growth, caches).
///
/// Stops at the first error. With zero batches the durations are zero.
pub fn warmup<S: Step>(step: &mut S, batches: u32) -> Result<WarmupStats, S::Error> {
    warmup_observed(step, batches, |_, _| {})
}

/// [`warmup`], calling `on_batch(batches_done, duration)` after each batch (for progress output;
/// the warmup is not timed, so the callback may print).
pub fn warmup_observed<S: Step>(
    step: &mut S,
    batches: u32,
    mut on_batch: impl FnMut(u32, Duration),
) -> Result<WarmupStats, S::Error> {
    let begin = Instant::now();
    let mut durations = Vec::with_capacity(batches as usize);
    for i in 0..batches {
        let t0 = Instant::now();
        step.step()?;
        let d = t0.elapsed();
        durations.push(d);
        on_batch(i + 1, d);
    }
    Ok(WarmupStats::of(batches, begin.elapsed(), &mut durations))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::MockStep;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn batch_count_matches_the_step_and_window() {
        // 10 ms steps in a 105 ms window: at most 10 can complete; the 11th would end at 110 ms
        // and is excluded. On an idle machine exactly 10 complete; a busy test runner can
        // stretch a step (preemption), so only the upper bound is exact.
        let clock = Clock::anchor();
        let mut step = MockStep::new(ms(10), 4).spinning();
        let mut buf = BatchBuffer::with_capacity(64);
        let start = clock.now_unix_ns() + 20_000_000;
        let out = run_window(&mut step, &clock, start, ms(105), &mut buf);
        assert!(out.error.is_none());
        assert!((1..=10).contains(&out.batches), "{}", out.batches);
        assert_eq!(out.samples, 4 * out.batches as u64);
        // The partial last batch ran (the device stays busy to the end) but was not recorded.
        assert_eq!(step.calls(), out.batches as u64 + 1);
        let records = buf.records(&clock);
        assert!(records.last().unwrap().end_unix_ns <= out.end_unix_ns);
        assert_eq!(out.end_unix_ns, start + 105_000_000);
        assert!(records[0].start_unix_ns >= start);
        assert!(
            out.lateness_ns >= 0 && out.lateness_ns < 20_000_000,
            "{}",
            out.lateness_ns
        );
        for pair in records.windows(2) {
            assert!(pair[1].start_unix_ns >= pair[0].end_unix_ns);
            assert!(pair[0].duration_ns() >= 10_000_000);
        }
    }

    #[test]
    fn a_past_start_is_reported_as_lateness() {
        let clock = Clock::anchor();
        let mut step = MockStep::new(ms(1), 1);
        let mut buf = BatchBuffer::with_capacity(1024);
        let start = clock.now_unix_ns() - 30_000_000;
        let out = run_window(&mut step, &clock, start, ms(50), &mut buf);
        assert!(out.lateness_ns >= 30_000_000, "{}", out.lateness_ns);
        // The window still ends when it would have: about 20 ms of it were left.
        assert!(out.batches <= 20, "{}", out.batches);
    }

    #[test]
    fn a_full_buffer_stops_the_window_instead_of_growing() {
        let clock = Clock::anchor();
        let mut step = MockStep::new(Duration::ZERO, 1).spinning();
        let mut buf = BatchBuffer::with_capacity(8);
        let cap = buf.capacity();
        let start = clock.now_unix_ns();
        let out = run_window(&mut step, &clock, start, ms(50), &mut buf);
        assert!(matches!(
            out.error,
            Some(TimingError::CapacityExhausted { capacity }) if capacity == cap
        ));
        assert_eq!(buf.len(), cap);
        assert_eq!(buf.capacity(), cap);
    }

    #[test]
    fn a_failing_step_keeps_the_batches_before_it() {
        let clock = Clock::anchor();
        let mut step = MockStep::new(ms(1), 2).failing_at(3);
        let mut buf = BatchBuffer::with_capacity(64);
        let out = run_window(&mut step, &clock, clock.now_unix_ns(), ms(500), &mut buf);
        assert_eq!(out.batches, 3);
        let err = out.error.unwrap();
        assert_eq!(err.to_string(), "step failed after 3 batches");
        // The step's own error is kept typed, as the source, not boxed or flattened to text.
        assert!(matches!(
            err,
            TimingError::Step {
                batches: 3,
                source: crate::step::MockFailure(3)
            }
        ));
        assert_eq!(
            std::error::Error::source(&err).unwrap().to_string(),
            "mock step failed at batch 3"
        );
    }

    #[test]
    fn a_cancelled_window_stops_and_keeps_its_batches() {
        let clock = Clock::anchor();
        let cancel = AtomicBool::new(false);
        let mut buf = BatchBuffer::with_capacity(1024);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(ms(40));
                cancel.store(true, Ordering::Relaxed);
            });
            let mut step = MockStep::new(ms(2), 1);
            let out = run_window_cancellable(
                &mut step,
                &clock,
                clock.now_unix_ns(),
                Duration::from_secs(30),
                &mut buf,
                &cancel,
            );
            assert!(
                matches!(out.error, Some(TimingError::Cancelled { batches }) if batches == out.batches)
            );
            assert!(out.batches >= 1 && out.batches < 1000, "{}", out.batches);
        });
    }

    /// Never early, and back soon after. How precise it is (a few microseconds on an idle
    /// host) is a measurement for `just bench`, not something a test on a shared, loaded CI
    /// machine can promise (20 ms of preemption was seen here with other builds running).
    #[test]
    fn sleep_until_is_never_early() {
        for _ in 0..5 {
            let target = Instant::now() + ms(15);
            sleep_until(target);
            assert!(Instant::now() >= target);
            let late = target.elapsed();
            assert!(late < ms(500), "{late:?}");
        }
        // A target in the past returns at once.
        let past = Instant::now();
        std::thread::sleep(ms(1));
        let t0 = Instant::now();
        sleep_until(past);
        assert!(t0.elapsed() < ms(500));
    }

    #[test]
    fn warmup_reports_its_batches() {
        let mut step = MockStep::new(ms(2), 1);
        let stats = warmup(&mut step, 5).unwrap();
        assert_eq!(stats.batches, 5);
        assert!(stats.fastest >= ms(2));
        assert!(stats.total >= ms(10));
        assert!(warmup(&mut MockStep::new(ms(1), 1).failing_at(2), 5).is_err());
        assert_eq!(warmup(&mut step, 0).unwrap().fastest, Duration::ZERO);
        let mut seen = Vec::new();
        warmup_observed(&mut step, 3, |i, d| seen.push((i, d >= ms(2)))).unwrap();
        assert_eq!(seen, [(1, true), (2, true), (3, true)]);
    }
}
