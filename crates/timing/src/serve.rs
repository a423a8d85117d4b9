//! The serve window: open-loop requests, a dynamic batcher, request latency without
//! coordinated omission.
//!
//! Requests arrive at the instants of an [`ArrivalSchedule`] fixed before the window. The
//! batcher keeps them in arrival order (FIFO) and, whenever the device is free, decides:
//!
//! 1. no request waiting: wait for the next arrival (or the window's end);
//! 2. `max_batch` or more waiting: dispatch `max_batch` of them at once;
//! 3. fewer waiting: wait for more until the oldest has waited `max_queue_delay`, then dispatch
//!    what is there. With a delay of 0 whatever waits is dispatched at once.
//!
//! This is the policy of Triton's dynamic batcher (`max_batch_size`,
//! `max_queue_delay_microseconds`). A batch of `b` requests runs padded to the smallest allowed
//! size `>= b` ([`ServePolicy`]: powers of two up to `max_batch` by default), so that the device
//! sees only shapes warmed up before the barrier. Every request of a batch completes when the
//! step returns (after the device synchronize).
//!
//! A request's latency is its completion minus its **scheduled** arrival: queueing plus
//! service. When the server falls behind, requests keep arriving on schedule and their waiting
//! counts; a stall shows in every request that arrived during it, not in one sample (the
//! coordinated omission of closed-loop load generators; Gil Tene, "How NOT to Measure Latency",
//! 2015).
//!
//! Requests arriving inside the window count. When the window ends, a batch still running is
//! run to completion (the device stays loaded for the peers) and recorded with its completion
//! past the end; requests never dispatched are recorded as queued. Neither is dropped: the
//! outcome counts them and the artifacts list them.
//!
//! Inside the window the runner reads the clock, compares integers and pushes into a buffer
//! sized before the start to the number of scheduled requests (a batch holds at least one
//! request, so it can never fill): no I/O, logging, locking or allocation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use coload_cohort_schema::{BatchRecord, RequestBatchRecord};

use crate::arrivals::ArrivalSchedule;
use crate::error::{ScheduleError, TimingError};
use crate::serve_clock::{ServeClock, SimulatedClock};

/// The largest `--max-batch` accepted: beyond it a padded batch of 224x224 images is several
/// GiB and a request line of `requests.jsonl` tens of kilobytes.
pub const MAX_BATCH_LIMIT: u32 = 1024;

/// Queued requests are written this many to a line of `requests.jsonl`, so that no line grows
/// with the backlog of an overloaded run.
pub const QUEUED_PER_LINE: usize = 1024;

/// The batching policy: how many requests at most, how long the oldest may wait for more, and
/// the batch sizes the device runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServePolicy {
    max_batch: u32,
    max_queue_delay_ns: u64,
    sizes: Vec<u32>,
    /// `pad[b]` is the size a batch of `b` requests runs at.
    pad: Vec<u32>,
}

impl ServePolicy {
    /// Up to `max_batch` requests, waiting at most `max_queue_delay` for more, padded to a
    /// power of two (or to `max_batch` itself when it is not one).
    pub fn new(max_batch: u32, max_queue_delay: Duration) -> Result<Self, ScheduleError> {
        check_max_batch(max_batch)?;
        let mut sizes: Vec<u32> = (0..32)
            .map(|k| 1u32 << k)
            .take_while(|&s| s < max_batch)
            .collect();
        sizes.push(max_batch);
        Self::with_sizes(max_batch, max_queue_delay, &sizes)
    }

    /// As [`ServePolicy::new`] with an explicit set of padded sizes; the largest must be
    /// `max_batch`.
    pub fn with_sizes(
        max_batch: u32,
        max_queue_delay: Duration,
        sizes: &[u32],
    ) -> Result<Self, ScheduleError> {
        check_max_batch(max_batch)?;
        let mut sizes = sizes.to_vec();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.first().is_none_or(|&s| s == 0) || sizes.last() != Some(&max_batch) {
            return Err(ScheduleError::BadPolicy(format!(
                "the padded batch sizes {sizes:?} must be at least 1 and end at --max-batch {max_batch}"
            )));
        }
        let max_queue_delay_ns = u64::try_from(max_queue_delay.as_nanos()).unwrap_or(u64::MAX);
        let pad = (0..=max_batch)
            .map(|b| sizes.iter().copied().find(|&s| s >= b).unwrap_or(max_batch))
            .collect();
        Ok(ServePolicy {
            max_batch,
            max_queue_delay_ns,
            sizes,
            pad,
        })
    }

    /// The most requests in one batch.
    #[must_use]
    pub fn max_batch(&self) -> u32 {
        self.max_batch
    }

    /// How long the oldest waiting request may wait for more, nanoseconds.
    #[must_use]
    pub fn max_queue_delay_ns(&self) -> u64 {
        self.max_queue_delay_ns
    }

    /// The batch sizes the device runs, ascending (each must be warmed up before the window).
    #[must_use]
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }

    /// The size a batch of `requests` requests runs at.
    #[must_use]
    #[inline]
    pub fn padded(&self, requests: u32) -> u32 {
        self.pad
            .get(requests as usize)
            .copied()
            .unwrap_or(self.max_batch)
    }
}

fn check_max_batch(max_batch: u32) -> Result<(), ScheduleError> {
    if max_batch == 0 || max_batch > MAX_BATCH_LIMIT {
        return Err(ScheduleError::BadPolicy(format!(
            "--max-batch must be between 1 and {MAX_BATCH_LIMIT}, got {max_batch}"
        )));
    }
    Ok(())
}

/// One batch of device work serving several requests, returning only when the device is done.
///
/// `requests` real requests are padded to `padded` samples; the device computes `padded`.
/// Implementations end with a device synchronize and, like [`crate::Step`], must not allocate,
/// log or lock: the runner calls them inside the window.
pub trait BatchStep {
    /// What a failed batch reports.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Runs one batch.
    fn run_batch(&mut self, requests: u32, padded: u32) -> Result<(), Self::Error>;
}

impl<S: BatchStep + ?Sized> BatchStep for &mut S {
    type Error = S::Error;

    fn run_batch(&mut self, requests: u32, padded: u32) -> Result<(), Self::Error> {
        (**self).run_batch(requests, padded)
    }
}

/// How a [`MockBatchStep`] spends its service time.
#[derive(Debug, Clone)]
enum MockTime {
    Sleep,
    Spin,
    Simulated(SimulatedClock),
}

/// A batch step of known service time `base + per_sample * padded`, for tests and benches.
///
/// It sleeps, spins (exact real durations) or advances a [`SimulatedClock`]; it can stall once
/// (to test coordinated omission) or fail from a given call on.
#[derive(Debug, Clone)]
pub struct MockBatchStep {
    base_ns: u64,
    per_sample_ns: u64,
    time: MockTime,
    stall: Option<(u64, u64)>,
    fail_at: Option<u64>,
    calls: u64,
}

/// The error a [`MockBatchStep`] reports when told to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("mock batch failed at call {0}")]
pub struct MockBatchFailure(pub u64);

impl MockBatchStep {
    /// A step taking `service` whatever its size.
    #[must_use]
    pub fn fixed(service: Duration) -> Self {
        MockBatchStep {
            base_ns: duration_ns(service),
            per_sample_ns: 0,
            time: MockTime::Sleep,
            stall: None,
            fail_at: None,
            calls: 0,
        }
    }

    /// Adds `per_sample` for every padded sample.
    #[must_use]
    pub fn per_sample(mut self, per_sample: Duration) -> Self {
        self.per_sample_ns = duration_ns(per_sample);
        self
    }

    /// Busy-waits instead of sleeping.
    #[must_use]
    pub fn spinning(mut self) -> Self {
        self.time = MockTime::Spin;
        self
    }

    /// Advances `clock` instead of taking real time.
    #[must_use]
    pub fn simulated(mut self, clock: &SimulatedClock) -> Self {
        self.time = MockTime::Simulated(clock.clone());
        self
    }

    /// Call number `call` (0-based) takes `extra` longer, once.
    #[must_use]
    pub fn stalling_once(mut self, call: u64, extra: Duration) -> Self {
        self.stall = Some((call, duration_ns(extra)));
        self
    }

    /// Fails from call number `call` (0-based) on.
    #[must_use]
    pub fn failing_at(mut self, call: u64) -> Self {
        self.fail_at = Some(call);
        self
    }

    /// Batches run so far.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// The service time of a batch padded to `padded`, nanoseconds (without a stall).
    #[must_use]
    pub fn service_ns(&self, padded: u32) -> u64 {
        self.base_ns + self.per_sample_ns * u64::from(padded)
    }
}

impl BatchStep for MockBatchStep {
    type Error = MockBatchFailure;

    fn run_batch(&mut self, _requests: u32, padded: u32) -> Result<(), MockBatchFailure> {
        let call = self.calls;
        self.calls += 1;
        if self.fail_at.is_some_and(|f| call >= f) {
            return Err(MockBatchFailure(call));
        }
        let mut ns = self.service_ns(padded);
        if let Some((at, extra)) = self.stall
            && at == call
        {
            ns += extra;
        }
        match &self.time {
            MockTime::Simulated(clock) => clock.advance(ns),
            MockTime::Sleep => std::thread::sleep(Duration::from_nanos(ns)),
            MockTime::Spin => {
                let end = std::time::Instant::now() + Duration::from_nanos(ns);
                while std::time::Instant::now() < end {
                    std::hint::spin_loop();
                }
            }
        }
        Ok(())
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One dispatched batch as the runner saw it, times in the serve clock's nanoseconds (since
/// the window's scheduled start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeBatch {
    /// Index in the schedule of its first request (its requests are consecutive: FIFO).
    pub first_request: u32,
    /// Requests in it.
    pub requests: u32,
    /// The size the device ran.
    pub padded: u32,
    /// When it was dispatched.
    pub dispatch_ns: u64,
    /// When the step returned (device work complete).
    pub complete_ns: u64,
}

/// The batches of a serve window, in memory allocated before it.
#[derive(Debug)]
pub struct ServeBuffer {
    batches: Vec<ServeBatch>,
}

impl ServeBuffer {
    /// Room for every batch `schedule` can produce: one per request at most.
    #[must_use]
    pub fn for_schedule(schedule: &ArrivalSchedule) -> Self {
        ServeBuffer {
            batches: Vec::with_capacity(schedule.len().max(1)),
        }
    }

    /// The batches dispatched, in order (the last may have completed after the window's end).
    #[must_use]
    pub fn batches(&self) -> &[ServeBatch] {
        &self.batches
    }

    /// The preallocated capacity.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.batches.capacity()
    }
}

/// What a serve window produced, besides the batches in the buffer.
#[derive(Debug)]
pub struct ServeOutcome<E> {
    /// When the runner began, serve-clock nanoseconds (its lateness after the scheduled start).
    pub actual_start_ns: u64,
    /// The window's length (its end, on the serve clock), nanoseconds.
    pub window_ns: u64,
    /// Requests scheduled inside the window.
    pub requests: u64,
    /// Batches that completed inside the window.
    pub batches_completed: u64,
    /// Requests those batches served.
    pub requests_completed: u64,
    /// Requests of the batch still running at the window's end (completed after it).
    pub requests_in_flight: u64,
    /// Requests never dispatched: queued at the end (or, after an error or a cancellation, not
    /// yet reached).
    pub requests_not_dispatched: u64,
    /// Age at the window's end of the oldest request that did not complete inside it,
    /// nanoseconds (`None` when every request completed).
    pub oldest_unfinished_age_ns: Option<u64>,
    /// Why the window stopped early, if it did. The batches before it are kept.
    pub error: Option<TimingError<E>>,
}

/// Runs a serve window on `clock`, whose zero is the window's scheduled start.
///
/// Waits for the start, then serves `schedule` with `policy` until the schedule's window has
/// passed; see the module documentation for the policy and what is recorded. Stops before the
/// next batch once `cancel` is set, with [`TimingError::Cancelled`].
pub fn run_serve<S: BatchStep, C: ServeClock>(
    step: &mut S,
    clock: &C,
    schedule: &ArrivalSchedule,
    policy: &ServePolicy,
    buffer: &mut ServeBuffer,
    cancel: &AtomicBool,
) -> ServeOutcome<S::Error> {
    buffer.batches.clear();
    let arrivals = schedule.offsets_ns();
    let n = arrivals.len();
    let window_ns = schedule.window_ns();
    let max_batch = policy.max_batch() as usize;
    let max_delay = policy.max_queue_delay_ns();
    clock.wait_until_ns(0);

    // --- timed window: clock reads, integer comparisons, pushes into preallocated memory ---
    let actual_start_ns = clock.now_ns();
    let mut head = 0usize; // first request not yet dispatched
    let mut arrived = 0usize; // requests whose arrival is <= now
    let mut error = None;
    loop {
        if cancel.load(Ordering::Relaxed) {
            error = Some(TimingError::Cancelled {
                batches: buffer.batches.len(),
            });
            break;
        }
        let now = clock.now_ns();
        if now >= window_ns {
            break;
        }
        while arrived < n && arrivals[arrived] <= now {
            arrived += 1;
        }
        let waiting = arrived - head;
        let next_arrival = if arrived < n {
            arrivals[arrived]
        } else {
            u64::MAX
        };
        if waiting == 0 {
            clock.wait_until_ns(next_arrival.min(window_ns));
            continue;
        }
        if waiting < max_batch {
            let deadline = arrivals[head].saturating_add(max_delay);
            if now < deadline {
                clock.wait_until_ns(next_arrival.min(deadline).min(window_ns));
                continue;
            }
        }
        let size = waiting.min(max_batch) as u32;
        let padded = policy.padded(size);
        let result = step.run_batch(size, padded);
        let complete_ns = clock.now_ns();
        if let Err(e) = result {
            // Leaving the window: boxing the error may allocate now.
            error = Some(TimingError::Step {
                batches: buffer.batches.len(),
                source: e,
            });
            break;
        }
        // Never full: a batch holds at least one request and the capacity is one per request.
        if buffer.batches.len() < buffer.batches.capacity() {
            buffer.batches.push(ServeBatch {
                first_request: head as u32,
                requests: size,
                padded,
                dispatch_ns: now,
                complete_ns,
            });
        }
        head += size as usize;
        if complete_ns > window_ns {
            break;
        }
    }
    // --- end of the timed window ---

    let in_flight = buffer
        .batches
        .last()
        .filter(|b| b.complete_ns > window_ns)
        .map_or(0, |b| u64::from(b.requests));
    let completed = head as u64 - in_flight;
    let first_unfinished = completed as usize;
    ServeOutcome {
        actual_start_ns,
        window_ns,
        requests: n as u64,
        batches_completed: buffer.batches.len() as u64 - u64::from(in_flight > 0),
        requests_completed: completed,
        requests_in_flight: in_flight,
        requests_not_dispatched: (n - head) as u64,
        oldest_unfinished_age_ns: arrivals
            .get(first_unfinished)
            .map(|&a| window_ns.saturating_sub(a)),
        error,
    }
}

/// The batches that completed inside the window as `batches.jsonl` records, times as unix
/// nanoseconds from `start_unix_ns` (the window's scheduled start); `samples` is the number of
/// requests served (padding excluded).
#[must_use]
pub fn serve_batch_records(
    buffer: &ServeBuffer,
    window_ns: u64,
    start_unix_ns: u64,
) -> Vec<BatchRecord> {
    buffer
        .batches
        .iter()
        .filter(|b| b.complete_ns <= window_ns)
        .enumerate()
        .map(|(i, b)| BatchRecord {
            index: i as u64,
            start_unix_ns: start_unix_ns + b.dispatch_ns,
            end_unix_ns: start_unix_ns + b.complete_ns,
            samples: b.requests,
            phase: None,
            sequences: None,
            kv_reserved_tokens: None,
        })
        .collect()
}

/// Every request of the window as `requests.jsonl` lines: one per dispatched batch (the last
/// may have completed after the window's end), then the requests never dispatched,
/// [`QUEUED_PER_LINE`] to a line with no batch, dispatch or completion.
pub fn request_lines<'a>(
    buffer: &'a ServeBuffer,
    schedule: &'a ArrivalSchedule,
    start_unix_ns: u64,
) -> impl Iterator<Item = RequestBatchRecord> + 'a {
    let arrivals = schedule.offsets_ns();
    let to_unix =
        move |slice: &[u64]| -> Vec<u64> { slice.iter().map(|&a| start_unix_ns + a).collect() };
    let dispatched = buffer.batches.iter().enumerate().map(move |(i, b)| {
        let first = b.first_request as usize;
        RequestBatchRecord {
            batch: Some(i as u64),
            first_request: first as u64,
            dispatch_unix_ns: Some(start_unix_ns + b.dispatch_ns),
            complete_unix_ns: Some(start_unix_ns + b.complete_ns),
            padded: b.padded,
            arrivals_unix_ns: to_unix(&arrivals[first..first + b.requests as usize]),
        }
    });
    let head = buffer
        .batches
        .last()
        .map_or(0, |b| b.first_request as usize + b.requests as usize);
    let queued = arrivals[head..]
        .chunks(QUEUED_PER_LINE)
        .enumerate()
        .map(move |(k, chunk)| RequestBatchRecord {
            batch: None,
            first_request: (head + k * QUEUED_PER_LINE) as u64,
            dispatch_unix_ns: None,
            complete_unix_ns: None,
            padded: 0,
            arrivals_unix_ns: to_unix(chunk),
        });
    dispatched.chain(queued)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn file(offsets_ms: &[f64], window_ms: u64) -> ArrivalSchedule {
        let text = offsets_ms
            .iter()
            .map(|o| (o / 1e3).to_string())
            .collect::<Vec<_>>()
            .join("\n");
        ArrivalSchedule::from_offsets_text("t", &text, window_ms * MS).unwrap()
    }

    fn run_sim(
        schedule: &ArrivalSchedule,
        policy: &ServePolicy,
        step: impl FnOnce(&SimulatedClock) -> MockBatchStep,
    ) -> (ServeOutcome<MockBatchFailure>, ServeBuffer) {
        let clock = SimulatedClock::new();
        let mut step = step(&clock);
        let mut buffer = ServeBuffer::for_schedule(schedule);
        let never = AtomicBool::new(false);
        let out = run_serve(&mut step, &clock, schedule, policy, &mut buffer, &never);
        (out, buffer)
    }

    #[test]
    fn default_sizes_are_powers_of_two_up_to_max_batch() {
        let p = ServePolicy::new(32, ms(2)).unwrap();
        assert_eq!(p.sizes(), [1, 2, 4, 8, 16, 32]);
        assert_eq!(
            [1, 2, 3, 5, 9, 17, 32].map(|b| p.padded(b)),
            [1, 2, 4, 8, 16, 32, 32]
        );
        let p = ServePolicy::new(12, ms(0)).unwrap();
        assert_eq!(p.sizes(), [1, 2, 4, 8, 12]);
        assert_eq!(p.padded(9), 12);
        assert_eq!(ServePolicy::new(1, ms(0)).unwrap().sizes(), [1]);
        for bad in [0, MAX_BATCH_LIMIT + 1] {
            let e = ServePolicy::new(bad, ms(0)).unwrap_err().to_string();
            assert!(e.contains(&format!("got {bad}")), "{e}");
        }
        assert!(ServePolicy::with_sizes(8, ms(0), &[1, 4]).is_err());
        assert!(ServePolicy::with_sizes(8, ms(0), &[0, 8]).is_err());
        assert_eq!(
            ServePolicy::with_sizes(8, ms(0), &[8, 3, 3])
                .unwrap()
                .sizes(),
            [3, 8]
        );
    }

    #[test]
    fn a_burst_is_batched_and_padded() {
        // Five requests at 0, max batch 8, no delay: one batch of 5 padded to 8.
        let s = file(&[0.0, 0.0, 0.0, 0.0, 0.0], 100);
        let p = ServePolicy::new(8, ms(0)).unwrap();
        let (out, buf) = run_sim(&s, &p, |c| MockBatchStep::fixed(ms(3)).simulated(c));
        assert_eq!(
            buf.batches(),
            [ServeBatch {
                first_request: 0,
                requests: 5,
                padded: 8,
                dispatch_ns: 0,
                complete_ns: 3 * MS
            }]
        );
        assert_eq!((out.requests_completed, out.batches_completed), (5, 1));
        assert_eq!(out.oldest_unfinished_age_ns, None);
    }

    #[test]
    fn the_batcher_waits_for_more_until_the_oldest_hits_its_delay() {
        // Delay 2 ms: the request at 0 waits for the one at 1 ms, and they leave together at
        // 2 ms (when the oldest has waited 2 ms). The one at 5 ms leaves alone at 7 ms. Then
        // four at 10 ms fill max batch 4 and leave at once.
        let s = file(&[0.0, 1.0, 5.0, 10.0, 10.0, 10.0, 10.0], 100);
        let p = ServePolicy::new(4, ms(2)).unwrap();
        let (out, buf) = run_sim(&s, &p, |c| MockBatchStep::fixed(ms(1)).simulated(c));
        let got: Vec<(u32, u32, u64, u64)> = buf
            .batches()
            .iter()
            .map(|b| {
                (
                    b.first_request,
                    b.requests,
                    b.dispatch_ns / MS,
                    b.complete_ns / MS,
                )
            })
            .collect();
        assert_eq!(got, [(0, 2, 2, 3), (2, 1, 7, 8), (3, 4, 10, 11)]);
        assert_eq!(out.requests_completed, 7);
    }

    #[test]
    fn a_full_queue_leaves_in_max_batch_chunks() {
        // Ten requests at 0, max batch 4: batches of 4, 4, 2, back to back.
        let s = file(&[0.0; 10], 100);
        let p = ServePolicy::new(4, ms(50)).unwrap();
        let (_, buf) = run_sim(&s, &p, |c| MockBatchStep::fixed(ms(2)).simulated(c));
        let sizes: Vec<(u32, u32, u64)> = buf
            .batches()
            .iter()
            .map(|b| (b.requests, b.padded, b.dispatch_ns / MS))
            .collect();
        // The last two wait for more until the oldest of them has waited 50 ms.
        assert_eq!(sizes, [(4, 4, 0), (4, 4, 2), (2, 2, 50)]);
    }

    #[test]
    fn the_end_of_the_window_counts_in_flight_and_queued_requests() {
        // Service 4 ms, window 10 ms, one request per ms, max batch 1: batches at 0, 4, 8
        // (the last completes at 12 ms, after the end); requests 3..9 are still queued.
        let s = file(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], 10);
        let p = ServePolicy::new(1, ms(0)).unwrap();
        let (out, buf) = run_sim(&s, &p, |c| MockBatchStep::fixed(ms(4)).simulated(c));
        assert_eq!(buf.batches().len(), 3);
        assert_eq!(out.requests, 10);
        assert_eq!(out.batches_completed, 2);
        assert_eq!(out.requests_completed, 2);
        assert_eq!(out.requests_in_flight, 1);
        assert_eq!(out.requests_not_dispatched, 7);
        // The oldest unfinished request arrived at 2 ms: 8 ms old at the end.
        assert_eq!(out.oldest_unfinished_age_ns, Some(8 * MS));
        let records = serve_batch_records(&buf, s.window_ns(), 1000);
        assert_eq!(records.len(), 2);
        assert_eq!(
            (records[1].start_unix_ns, records[1].end_unix_ns),
            (1000 + 4 * MS, 1000 + 8 * MS)
        );
        let lines: Vec<RequestBatchRecord> = request_lines(&buf, &s, 1000).collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[2].complete_unix_ns, Some(1000 + 12 * MS));
        assert_eq!(lines[3].batch, None);
        assert_eq!(lines[3].first_request, 3);
        assert_eq!(lines[3].arrivals_unix_ns.len(), 7);
        assert_eq!(lines[3].arrivals_unix_ns[0], 1000 + 3 * MS);
    }

    #[test]
    fn queued_requests_are_split_across_lines() {
        let s = file(&vec![0.0; 2 * QUEUED_PER_LINE + 5], 1);
        let p = ServePolicy::new(1, ms(0)).unwrap();
        // One 5 ms batch in a 1 ms window: it runs across the end, the rest stays queued.
        let (out, buf) = run_sim(&s, &p, |c| MockBatchStep::fixed(ms(5)).simulated(c));
        assert_eq!(out.requests_in_flight, 1);
        let lines: Vec<RequestBatchRecord> = request_lines(&buf, &s, 0).collect();
        let counts: Vec<usize> = lines.iter().map(|l| l.arrivals_unix_ns.len()).collect();
        assert_eq!(counts, [1, QUEUED_PER_LINE, QUEUED_PER_LINE, 4]);
        assert_eq!(lines[3].first_request, 1 + 2 * QUEUED_PER_LINE as u64);
    }

    #[test]
    fn idle_waits_end_at_the_next_arrival_or_the_window() {
        let s = file(&[30.0], 50);
        let p = ServePolicy::new(8, ms(0)).unwrap();
        let clock = SimulatedClock::new();
        let mut step = MockBatchStep::fixed(ms(1)).simulated(&clock);
        let mut buf = ServeBuffer::for_schedule(&s);
        let out = run_serve(&mut step, &clock, &s, &p, &mut buf, &AtomicBool::new(false));
        assert_eq!(buf.batches()[0].dispatch_ns, 30 * MS);
        assert_eq!(clock.now_ns(), 50 * MS, "the runner waits out the window");
        assert!(out.error.is_none());
    }

    #[test]
    fn a_failing_step_keeps_the_batches_before_it() {
        let s = file(&[0.0, 1.0, 2.0, 3.0], 10);
        let p = ServePolicy::new(1, ms(0)).unwrap();
        let (out, buf) = run_sim(&s, &p, |c| {
            MockBatchStep::fixed(ms(1)).simulated(c).failing_at(2)
        });
        assert_eq!(buf.batches().len(), 2);
        let err = out.error.unwrap();
        assert_eq!(err.to_string(), "step failed after 2 batches");
        assert_eq!(
            std::error::Error::source(&err).unwrap().to_string(),
            "mock batch failed at call 2"
        );
        assert_eq!(out.requests_not_dispatched, 2);
    }

    #[test]
    fn a_cancelled_window_stops() {
        let s = file(&[0.0, 1.0], 10);
        let p = ServePolicy::new(1, ms(0)).unwrap();
        let clock = SimulatedClock::new();
        let mut step = MockBatchStep::fixed(ms(1)).simulated(&clock);
        let mut buf = ServeBuffer::for_schedule(&s);
        let out = run_serve(&mut step, &clock, &s, &p, &mut buf, &AtomicBool::new(true));
        assert!(matches!(
            out.error,
            Some(TimingError::Cancelled { batches: 0 })
        ));
        assert_eq!(out.requests_not_dispatched, 2);
    }
}
