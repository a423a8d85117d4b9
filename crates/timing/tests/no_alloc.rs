//! The timed window must not allocate. A counting global allocator watches it.
//!
//! Only allocations made by the thread running the window, while it runs the window, count: the
//! flag and the counter are thread-local, so the test harness's own threads (and the other test
//! of this file, running in parallel) allocate at times of their own choosing without being
//! counted. [`Watched`] wraps the window's step: it turns the flag on when the first batch
//! begins, and keeps the count as it stood when each batch returned, so the count covers the
//! window from its first batch to its last, runner and step alike (the flag used to
//! stay false, and the test could not fail).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use coload_timing::{BatchBuffer, Clock, MockStep, Step, run_window};

struct Counting;

thread_local! {
    // Const-initialized, so reading them never allocates.
    static WATCHED: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    if WATCHED.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
    }
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn watch(on: bool) {
    WATCHED.with(|w| w.set(on));
}

#[expect(unsafe_code, reason = "a global allocator is unsafe by definition")]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
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

/// A step that watches the window it runs in: the flag goes on as the first batch begins, and
/// `in_window` holds the count made since then as it stood when the latest batch returned.
struct Watched<S> {
    inner: S,
    began_at: Option<u64>,
    in_window: u64,
}

impl<S: Step> Step for Watched<S> {
    type Error = S::Error;

    fn step(&mut self) -> Result<u32, S::Error> {
        if self.began_at.is_none() {
            self.began_at = Some(allocations());
            watch(true);
        }
        let result = self.inner.step();
        self.in_window = allocations() - self.began_at.unwrap_or(0);
        result
    }
}

/// Runs a 100 ms window of `step`; returns the batches run and the allocations made in the window.
fn window_allocations<S: Step>(step: S) -> (usize, u64) {
    let clock = Clock::anchor();
    let mut step = Watched {
        inner: step,
        began_at: None,
        in_window: 0,
    };
    let mut buffer = BatchBuffer::with_capacity(4096);
    let start = clock.now_unix_ns() + 5_000_000;
    let outcome = run_window(
        &mut step,
        &clock,
        start,
        Duration::from_millis(100),
        &mut buffer,
    );
    watch(false);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert!(step.began_at.is_some(), "no batch ran");
    (outcome.batches, step.in_window)
}

/// A step that allocates one small vector per batch, as a careless implementation might.
struct Allocating(MockStep);

impl Step for Allocating {
    type Error = <MockStep as Step>::Error;

    fn step(&mut self) -> Result<u32, Self::Error> {
        let scratch: Vec<u64> = Vec::with_capacity(16);
        std::hint::black_box(scratch);
        self.0.step()
    }
}

fn spinning_step() -> MockStep {
    MockStep::new(Duration::from_micros(200), 8).spinning()
}

#[test]
fn the_counter_sees_a_deliberate_allocation() {
    // The counter itself: one box while watched, none while not.
    let before = allocations();
    watch(true);
    std::hint::black_box(Box::new(7_u64));
    watch(false);
    std::hint::black_box(Box::new(8_u64));
    assert_eq!(allocations() - before, 1);

    // Through the runner: a step that allocates in every batch is seen in every batch.
    let (batches, allocated) = window_allocations(Allocating(spinning_step()));
    assert!(batches >= 20, "{batches}");
    assert!(
        allocated > batches as u64,
        "{allocated} allocations in {batches} batches"
    );
}

#[test]
fn the_window_does_not_allocate() {
    let (batches, allocated) = window_allocations(spinning_step());
    assert!(batches >= 20, "{batches}");
    assert_eq!(allocated, 0, "the window allocated {allocated} times");
}
