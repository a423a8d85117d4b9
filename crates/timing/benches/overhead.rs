//! Per-batch host overhead of the window runner: two timer reads and a record push, the work
//! the runner adds around each step. Goal: at most 200 ns per batch.

use std::time::{Duration, Instant};

use coload_timing::{BatchBuffer, Clock, RawBatch, Step, run_window};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

/// A step that does nothing, so the runner's own cost is all that is measured.
struct Empty;

impl Step for Empty {
    type Error = std::convert::Infallible;

    fn step(&mut self) -> Result<u32, Self::Error> {
        Ok(std::hint::black_box(32))
    }
}

fn per_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_batch_overhead");
    group.throughput(Throughput::Elements(1));
    group.bench_function("timer_reads_and_push", |b| {
        b.iter_batched_ref(
            || BatchBuffer::with_capacity(1 << 16),
            |buf| {
                let t0 = Instant::now();
                let n = std::hint::black_box(32u32);
                let t1 = Instant::now();
                buf.push(RawBatch {
                    start: t0,
                    end: t1,
                    samples: n,
                })
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();

    // The whole runner over a 20 ms window of empty steps: time per recorded batch.
    let clock = Clock::anchor();
    let mut buffer = BatchBuffer::with_capacity(1 << 22);
    let mut group = c.benchmark_group("window");
    group.sample_size(10);
    group.bench_function("empty_steps_20ms", |b| {
        b.iter_custom(|iters| {
            let mut per_batch = Duration::ZERO;
            for _ in 0..iters {
                let start = clock.now_unix_ns();
                let out = run_window(
                    &mut Empty,
                    &clock,
                    start,
                    Duration::from_millis(20),
                    &mut buffer,
                );
                per_batch += Duration::from_millis(20) / out.batches.max(1) as u32;
            }
            per_batch
        });
    });
    group.finish();
}

criterion_group!(benches, per_batch);
criterion_main!(benches);
