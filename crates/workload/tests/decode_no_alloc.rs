//! The `decode` workload's timed window: what the decode step allocates through the
//! Rust allocator while the window runs, counted per thread as `coload-timing`'s no-alloc tests
//! do. libtorch's own tensor memory goes through its allocator, not Rust's, and is not counted
//! here; the KV cache is preallocated (see docs/llm.md).
//!
//! Neither preset's window allocates: tch's `f_view` boxed its shape argument (about 12
//! allocations per iteration of `gpt2-tiny`), `Tensor::size` returns a `Vec`, and the rotary
//! `cat` of Llama's queries and keys built a list of pointers. The model passes shapes as slices
//! (`f_view_`), reads its tokens' shape through `shim::shape2`, and rotates with `roll` and a
//! sign folded into the `sin` table. The runner and the worker add none.

use std::time::Duration;

use coload_cohort_schema::{DeviceChoice, Execution};
use coload_timing::{BatchBuffer, Clock, Step, run_window};
use coload_workload::{DecodeOptions, DecodeStep, LlmPreset};

// The counting allocator of coload-timing's window tests, the one copy.
#[path = "../../timing/tests/common/mod.rs"]
mod common;

use common::{allocations, watch};

/// The step, watched from its first batch in the window to its last.
struct Watched {
    inner: DecodeStep,
    began_at: Option<usize>,
    in_window: usize,
}

impl Step for Watched {
    type Error = <DecodeStep as Step>::Error;

    fn step(&mut self) -> Result<u32, Self::Error> {
        if self.began_at.is_none() {
            self.began_at = Some(allocations());
            watch(true);
        }
        let result = self.inner.step();
        self.in_window = allocations() - self.began_at.unwrap_or(0);
        result
    }
}

/// Runs a 200 ms window of `model`'s decode step; returns the iterations and the Rust
/// allocations made in the window.
fn window_allocations(model: LlmPreset) -> (usize, usize) {
    let options = DecodeOptions {
        model,
        device: DeviceChoice::Cpu,
        batch_size: 2,
        prompt_tokens: 8,
        generate_tokens: 4,
        precision: None,
        seed: 0,
        execution: Execution::Eager,
        attention: None,
    };
    let mut inner = DecodeStep::new(&options).unwrap();
    for _ in 0..8 {
        inner.step().unwrap();
    }
    inner.restart();
    let mut step = Watched {
        inner,
        began_at: None,
        in_window: 0,
    };
    let clock = Clock::anchor();
    let mut buffer = BatchBuffer::with_capacity(1 << 16);
    let start = clock.now_unix_ns() + 5_000_000;
    let outcome = run_window(
        &mut step,
        &clock,
        start,
        Duration::from_millis(200),
        &mut buffer,
    );
    watch(false);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert!(outcome.batches >= 8, "{}", outcome.batches);
    // The count runs to the return of the iteration that crosses the window's end, which the
    // runner completes but does not record: one iteration more than the window's.
    (outcome.batches + 1, step.in_window)
}

#[test]
fn a_gpt2_decode_window_allocates_nothing() {
    let (iterations, allocations) = window_allocations(LlmPreset::Gpt2Tiny);
    assert_eq!(
        allocations, 0,
        "the decode step allocated {allocations} times in {iterations} iterations"
    );
}

#[test]
fn a_llama_decode_window_allocates_nothing() {
    let (iterations, allocations) = window_allocations(LlmPreset::LlamaTiny);
    assert_eq!(
        allocations, 0,
        "the decode step allocated {allocations} times in {iterations} iterations"
    );
}
