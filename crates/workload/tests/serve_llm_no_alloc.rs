//! The `serve-llm` workload's timed window: what the scheduler and the model's serve
//! step allocate through the Rust allocator while `run_llm_serve` runs on the real clock,
//! counted per thread as `decode_no_alloc.rs` does. libtorch's own tensor memory goes through
//! its allocator, not Rust's, and is not counted here; the KV cache is preallocated.
//!
//! `coload-timing`'s `llm_no_alloc.rs` shows the scheduler allocates nothing over a mock step;
//! this runs it over the real [`LlmServeStep`] (prefills into free slots, decodes of every
//! running sequence, completed sequences retired by moving the last one into the hole), as the
//! `serve-llm` worker does between its start and its end.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use coload_cohort_schema::{DeviceChoice, Execution};
use coload_timing::{
    ArrivalSchedule, LlmRequests, LlmServeBuffer, LlmServePolicy, MonotonicClock,
    llm_request_records, run_llm_serve,
};
use coload_workload::{LlmPreset, LlmServeOptions, LlmServeStep};

// The counting allocator of coload-timing's window tests, the one copy.
#[path = "../../timing/tests/common/mod.rs"]
mod common;

use common::{allocations, watch};

/// Runs a 400 ms serve window of `model` at 60 requests/s of 8 + 5 tokens, at most 3 running,
/// with the dynamic eager decode or, `bucketed`, the batch padded to its bucket as the CUDA
/// graphs run it (the bucket's lookup and the host's checks are the graph path's, only the
/// replay is an eager static decode here); returns the iterations, the requests completed and
/// the Rust allocations made in the window.
fn window_allocations(model: LlmPreset, bucketed: bool) -> (usize, u64, usize) {
    let options = LlmServeOptions {
        model,
        device: DeviceChoice::Cpu,
        max_batch: 3,
        max_prompt_tokens: 8,
        precision: None,
        seed: 0,
        execution: Execution::Eager,
    };
    let step = LlmServeStep::for_preset(&options).unwrap();
    let mut step = if bucketed {
        step.static_buckets()
    } else {
        step
    };
    step.warm_up(&[8], 4).unwrap();
    let window_ns = 400_000_000;
    let schedule = ArrivalSchedule::uniform(60.0, window_ns).unwrap();
    let requests = LlmRequests::fixed(&schedule, 8, 5).unwrap();
    let policy = LlmServePolicy::new(3, 3 * 13, model.config().context).unwrap();
    policy.check(&requests).unwrap();
    let mut buffer = LlmServeBuffer::new(&requests, &policy);
    let clock = MonotonicClock::new(Instant::now() + Duration::from_millis(5));
    let before = allocations();
    watch(true);
    let out = run_llm_serve(
        &mut step,
        &clock,
        &requests,
        &policy,
        &mut buffer,
        &AtomicBool::new(false),
    );
    watch(false);
    let made = allocations() - before;
    assert!(out.error.is_none(), "{:?}", out.error);
    // The window did what the worker's does: prefills, decodes, and reused slots.
    let records = llm_request_records(&buffer, &requests);
    assert!(out.requests_completed >= 10, "{}", out.requests_completed);
    assert!(records.iter().filter(|r| r.completed).count() >= 10);
    (buffer.iterations().len(), out.requests_completed, made)
}

fn assert_none(model: LlmPreset, bucketed: bool) {
    let (iterations, completed, allocations) = window_allocations(model, bucketed);
    assert_eq!(
        allocations, 0,
        "the {model} serve window (bucketed: {bucketed}) allocated {allocations} times in \
         {iterations} iterations ({completed} requests completed)"
    );
}

#[test]
fn a_gpt2_serve_llm_window_allocates_nothing() {
    assert_none(LlmPreset::Gpt2Tiny, false);
}

#[test]
fn a_llama_serve_llm_window_allocates_nothing() {
    assert_none(LlmPreset::LlamaTiny, false);
}

#[test]
fn a_bucketed_serve_llm_window_allocates_nothing() {
    assert_none(LlmPreset::Gpt2Tiny, true);
    assert_none(LlmPreset::LlamaTiny, true);
}
