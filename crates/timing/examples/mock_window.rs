//! Runs the timed-window runner over a mock step (2 ms per batch, 32 samples) for one second
//! and prints what it recorded. A stand-in demo until bench-worker exists.

use std::time::Duration;

use coload_timing::{BatchBuffer, Clock, MockStep, run_window, warmup};

fn main() {
    let clock = Clock::anchor();
    let mut step = MockStep::new(Duration::from_millis(2), 32).spinning();
    let stats = warmup(&mut step, 20).expect("the mock step does not fail");
    let mut buffer =
        BatchBuffer::with_capacity(BatchBuffer::capacity_for(1.0, stats.fastest.as_secs_f64()));
    let start = clock.now_unix_ns() + 200_000_000;
    let out = run_window(
        &mut step,
        &clock,
        start,
        Duration::from_secs(1),
        &mut buffer,
    );
    let records = buffer.records(&clock);
    let mut durations: Vec<u64> = records
        .iter()
        .map(coload_cohort_schema::BatchRecord::duration_ns)
        .collect();
    durations.sort_unstable();
    println!("mock step, 1 s window (this demo uses no GPU and no model yet)");
    println!("  lateness of the start: {} ns", out.lateness_ns);
    println!("  batches: {}, samples: {}", out.batches, out.samples);
    if let Some(median) = durations.get(durations.len() / 2) {
        println!("  median batch: {:.3} ms", *median as f64 / 1e6);
    }
}
