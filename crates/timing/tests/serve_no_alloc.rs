//! The serve window must not allocate. A counting global allocator watches the thread that runs
//! it, and only while it runs.
//!
//! The flag that selects the watched thread and the count are thread-locals of the window's own
//! thread, set right before the window and read right after, so allocations by the test
//! harness's other threads (the counter's own test among them) never count. Before trusting a zero, the test proves the counter works: a deliberate
//! allocation on the watched thread must count.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use coload_timing::{
    ArrivalSchedule, MockBatchStep, MonotonicClock, ServeBuffer, ServeClock, ServePolicy,
    SimulatedClock, run_serve,
};

mod common;

use common::watched;

fn serve_allocations<C: ServeClock + Sync>(clock: &C, step: MockBatchStep, window: Duration) {
    let schedule = ArrivalSchedule::poisson(4000.0, 9, window.as_nanos() as u64).unwrap();
    let policy = ServePolicy::new(8, Duration::from_micros(300)).unwrap();
    let mut buffer = ServeBuffer::for_schedule(&schedule);
    let cancel = AtomicBool::new(false);
    let mut step = step;
    let (allocations, out) =
        watched(|| run_serve(&mut step, clock, &schedule, &policy, &mut buffer, &cancel));
    assert!(out.error.is_none(), "{:?}", out.error);
    assert!(buffer.batches().len() > 50, "{}", buffer.batches().len());
    assert_eq!(
        allocations, 0,
        "the serve window allocated {allocations} times"
    );
}

#[test]
fn the_serve_window_does_not_allocate_on_the_real_clock() {
    let clock = MonotonicClock::new(Instant::now() + Duration::from_millis(5));
    let step =
        MockBatchStep::fixed(Duration::from_micros(100)).per_sample(Duration::from_micros(20));
    serve_allocations(&clock, step.spinning(), Duration::from_millis(100));
}

#[test]
fn the_serve_window_does_not_allocate_on_the_simulated_clock() {
    let clock = SimulatedClock::new();
    let step = MockBatchStep::fixed(Duration::from_micros(100)).simulated(&clock);
    serve_allocations(&clock, step, Duration::from_secs(5));
}
