//! Per-request host cost of the serve window: arrival scan, batching decision, padding lookup,
//! two clock reads per batch and the record push. Goal: at most 1 us per request.
//!
//! The schedule is denser than the runner can serve (50 M requests/s) and the step does
//! nothing, so the runner never waits and every nanosecond measured is its own. With a max
//! batch of 1 every request is a batch of its own (the worst case); with 32 the per-batch cost
//! is shared.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use coload_timing::{
    ArrivalSchedule, BatchStep, MonotonicClock, ServeBuffer, ServePolicy, run_serve,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// A batch step that does nothing.
struct Empty;

impl BatchStep for Empty {
    type Error = std::convert::Infallible;

    fn run_batch(&mut self, requests: u32, padded: u32) -> Result<(), Self::Error> {
        std::hint::black_box((requests, padded));
        Ok(())
    }
}

fn per_request(c: &mut Criterion) {
    let window = Duration::from_millis(20);
    let schedule = ArrivalSchedule::uniform(5e7, window.as_nanos() as u64).unwrap();
    let mut buffer = ServeBuffer::for_schedule(&schedule);
    let cancel = AtomicBool::new(false);
    let mut group = c.benchmark_group("serve_per_request");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    for max_batch in [1u32, 32] {
        let policy = ServePolicy::new(max_batch, Duration::ZERO).unwrap();
        group.bench_function(format!("max_batch_{max_batch}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let clock = MonotonicClock::new(Instant::now());
                    let out =
                        run_serve(&mut Empty, &clock, &schedule, &policy, &mut buffer, &cancel);
                    let served = (out.requests_completed + out.requests_in_flight).max(1);
                    // The window's busy time divided by the requests it served.
                    total += window / u32::try_from(served).unwrap_or(u32::MAX);
                }
                total
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("serve_schedule");
    group.throughput(Throughput::Elements(45_000));
    group.bench_function("poisson_1000_per_s_45s", |b| {
        b.iter(|| ArrivalSchedule::poisson(1000.0, 1, 45_000_000_000).unwrap());
    });
    group.finish();
}

criterion_group!(benches, per_request);
criterion_main!(benches);
