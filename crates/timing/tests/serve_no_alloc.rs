//! The serve window must not allocate. A counting global allocator watches the thread that runs
//! it, and only while it runs.
//!
//! The flag that selects the watched thread and the count are thread-locals of the window's own
//! thread, set right before the window and read right after, so allocations by the test
//! harness's other threads (the counter's own test among them) never count. Before trusting a zero, the test proves the counter works: a deliberate
//! allocation on the watched thread must count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use coload_timing::{
    ArrivalSchedule, MockBatchStep, MonotonicClock, ServeBuffer, ServeClock, ServePolicy,
    SimulatedClock, run_serve,
};

struct Counting;

thread_local! {
    // Const-initialized, so reading them never allocates. The count is per thread too: with one
    // global count, the deliberate allocation of the counter's own test, on its watched thread,
    // landed in another test's window when the two ran at once (seen once the real-clock window
    // began waiting for its origin).
    static WATCHED: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    if WATCHED.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

#[expect(unsafe_code, reason = "a global allocator is unsafe by definition")]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` on a fresh thread with the allocation counter watching that thread only; returns
/// the allocations it made and its result.
fn watched<T: Send>(f: impl FnOnce() -> T + Send) -> (usize, T) {
    std::thread::scope(|s| {
        s.spawn(|| {
            ALLOCATIONS.with(|n| n.set(0));
            WATCHED.with(|w| w.set(true));
            let out = f();
            WATCHED.with(|w| w.set(false));
            (ALLOCATIONS.with(Cell::get), out)
        })
        .join()
        .expect("the watched thread panicked")
    })
}

#[test]
fn the_counter_counts_a_deliberate_allocation() {
    let (n, ()) = watched(|| {
        let v: Vec<u64> = std::hint::black_box(Vec::with_capacity(16));
        drop(std::hint::black_box(v));
    });
    assert_eq!(
        n, 1,
        "the counter must see an allocation on the watched thread"
    );
    // And nothing when the thread is not watched.
    let before = ALLOCATIONS.with(Cell::get);
    drop(std::hint::black_box(Box::new(7u64)));
    assert_eq!(ALLOCATIONS.with(Cell::get), before);
}

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
