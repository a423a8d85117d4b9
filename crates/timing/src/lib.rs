//! Clocks, the [`Step`] trait and the timed-window runner.
//!
//! A worker measures one interval, agreed with its peers, and records every batch in it. This
//! crate owns that measurement:
//!
//! - [`Clock`] anchors one monotonic clock to the wall clock once per process, so batch times
//!   are comparable across workers (wall clock) yet never jump with NTP (monotonic).
//! - [`Step`] is one batch of device work that ends only when the device is done. The real one
//!   lives in `coload-workload`; [`MockStep`] stands in for it in tests.
//! - [`run_window`] sleeps until the scheduled instant, runs steps until the window ends and
//!   records each batch into a [`BatchBuffer`] preallocated before the start. Between the start
//!   and the end it performs no I/O, logging, locking or allocation.
//! - [`run_serve`] is the serve window: requests arrive open-loop at the instants of an
//!   [`ArrivalSchedule`] made before the window, a dynamic batcher ([`ServePolicy`]) groups them
//!   into padded batches for a [`BatchStep`], and each request's latency runs from its
//!   *scheduled* arrival. It runs on a [`ServeClock`]: the real [`MonotonicClock`], or a
//!   [`SimulatedClock`] that makes queueing tests exact and fast ([`MockBatchStep`] advances it).
//! - [`run_llm_serve`] is the LLM serve window: requests with a prompt and an output
//!   length arrive open-loop, a continuous (iteration-level) batcher admits them under a
//!   KV-cache token budget ([`LlmServePolicy`]) and runs prefill and decode iterations through an
//!   [`IterationStep`]; TTFT, TPOT and inter-token latencies run from the scheduled arrival.
//!   Each request's lengths are fixed, drawn from a [`LengthRange`] with the seed, or read from
//!   an [`LlmTrace`]; [`DecodeCycle`] names the phases of the closed-loop `decode` workload.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use coload_timing::{BatchBuffer, Clock, MockStep, run_window};
//!
//! let clock = Clock::anchor();
//! let mut step = MockStep::new(Duration::from_millis(2), 8);
//! let mut buffer = BatchBuffer::with_capacity(1000);
//! let start = clock.now_unix_ns() + 5_000_000; // 5 ms from now
//! let outcome = run_window(&mut step, &clock, start, Duration::from_millis(50), &mut buffer);
//! assert!(outcome.error.is_none());
//! assert!(buffer.len() >= 10);
//! let records = buffer.records(&clock);
//! assert_eq!(records[0].samples, 8);
//! ```

mod arrivals;
mod buffer;
mod clock;
mod error;
mod llm_decode;
mod llm_lengths;
mod llm_serve;
mod runner;
mod serve;
mod serve_clock;
mod steady;
mod step;

pub use arrivals::{ArrivalKind, ArrivalSchedule, MAX_REQUESTS};
pub use buffer::{BatchBuffer, RawBatch};
pub use clock::Clock;
pub use error::{LlmServeError, ScheduleError, TimingError};
pub use llm_decode::DecodeCycle;
pub use llm_lengths::{LengthRange, LlmTrace};
pub use llm_serve::{
    IterationKind, IterationStep, LlmIteration, LlmRequest, LlmRequestRecord, LlmRequests,
    LlmServeBuffer, LlmServeOutcome, LlmServePolicy, MAX_RUNNING_LIMIT, MAX_WINDOW_TOKENS,
    MockIterationFailure, MockIterationStep, inter_token_ns, llm_request_records, run_llm_serve,
};
pub use runner::{
    WarmupStats, WindowOutcome, run_window, run_window_cancellable, sleep_until, warmup,
    warmup_observed,
};
pub use serve::{
    BatchStep, MAX_BATCH_LIMIT, MockBatchFailure, MockBatchStep, QUEUED_PER_LINE, ServeBatch,
    ServeBuffer, ServeOutcome, ServePolicy, request_lines, run_serve, serve_batch_records,
};
pub use serve_clock::{MonotonicClock, SPIN_BEFORE_NS, ServeClock, SimulatedClock};
pub use steady::{
    IMPROVEMENT, MAX_FACTOR, MAX_TIME, MAX_WINDOW_BLOCKS, SteadyJudge, SteadyRule,
    warmup_until_steady,
};
pub use step::{MockStep, Step};
