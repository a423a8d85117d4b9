//! The LLM serve window (continuous batching) must not allocate. A counting global allocator watches the thread that runs
//! it, and only while it runs.
//!
//! The flag that selects the watched thread and the count are thread-locals of the window's own
//! thread, set right before the window and read right after, so allocations by the test
//! harness's other threads (and by the test whose step allocates on purpose) never count. Before trusting a zero, the test proves the counter works: a deliberate
//! allocation on the watched thread must count.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use coload_timing::{
    ArrivalSchedule, IterationStep, LlmRequests, LlmServeBuffer, LlmServePolicy, MockIterationStep,
    MonotonicClock, ServeClock, SimulatedClock, run_llm_serve,
};

mod common;

use common::watched;

/// An iteration step that allocates in every iteration, to show the counter sees the window.
struct Allocating(MockIterationStep);

impl IterationStep for Allocating {
    type Error = <MockIterationStep as IterationStep>::Error;

    fn prefill(&mut self, slots: &[u32], prompt_tokens: &[u32]) -> Result<(), Self::Error> {
        drop(std::hint::black_box(slots.to_vec()));
        self.0.prefill(slots, prompt_tokens)
    }

    fn decode(&mut self, slots: &[u32]) -> Result<(), Self::Error> {
        drop(std::hint::black_box(slots.to_vec()));
        self.0.decode(slots)
    }
}

/// Poisson arrivals at 400/s of prompts of 64 and outputs of 16 tokens over `window`, at most 8
/// running under a budget of 6 requests' worth (so both limits bind); returns the iterations
/// and the allocations made while the window ran.
fn llm_allocations<C: ServeClock + Sync, S: IterationStep + Send>(
    clock: &C,
    step: S,
    window: Duration,
) -> (usize, usize) {
    let schedule = ArrivalSchedule::poisson(400.0, 9, window.as_nanos() as u64).unwrap();
    let requests = LlmRequests::fixed(&schedule, 64, 16).unwrap();
    let policy = LlmServePolicy::new(8, 6 * 80, 2048).unwrap();
    policy.check(&requests).unwrap();
    let mut buffer = LlmServeBuffer::new(&requests, &policy);
    let cancel = AtomicBool::new(false);
    let mut step = step;
    let (allocations, out) =
        watched(|| run_llm_serve(&mut step, clock, &requests, &policy, &mut buffer, &cancel));
    assert!(out.error.is_none(), "{:?}", out.error);
    assert!(out.requests_completed > 10, "{}", out.requests_completed);
    (buffer.iterations().len(), allocations)
}

#[test]
fn the_counter_sees_an_allocating_step_through_the_runner() {
    let clock = SimulatedClock::new();
    let step = MockIterationStep::fixed(Duration::from_micros(500), Duration::from_micros(200))
        .simulated(&clock);
    let (iterations, allocations) =
        llm_allocations(&clock, Allocating(step), Duration::from_secs(1));
    assert!(iterations > 50, "{iterations}");
    assert!(
        allocations >= iterations,
        "{allocations} allocations in {iterations} iterations"
    );
}

#[test]
fn the_llm_serve_window_does_not_allocate_on_the_real_clock() {
    let clock = MonotonicClock::new(Instant::now() + Duration::from_millis(5));
    let step = MockIterationStep::fixed(Duration::from_micros(300), Duration::from_micros(100))
        .per_prompt_token(Duration::from_micros(2))
        .per_decode_sequence(Duration::from_micros(10))
        .spinning();
    let (iterations, allocations) = llm_allocations(&clock, step, Duration::from_millis(200));
    assert!(iterations > 50, "{iterations}");
    assert_eq!(allocations, 0, "the window allocated {allocations} times");
}

#[test]
fn the_llm_serve_window_does_not_allocate_on_the_simulated_clock() {
    let clock = SimulatedClock::new();
    let step = MockIterationStep::fixed(Duration::from_micros(500), Duration::from_micros(200))
        .per_decode_sequence(Duration::from_micros(20))
        .simulated(&clock);
    let (iterations, allocations) = llm_allocations(&clock, step, Duration::from_secs(5));
    assert!(iterations > 1000, "{iterations}");
    assert_eq!(allocations, 0, "the window allocated {allocations} times");
}
