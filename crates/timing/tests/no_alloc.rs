//! The timed window must not allocate. A counting global allocator watches it.
//!
//! Only allocations made by the thread running the window count: the test harness's own threads
//! allocate at times of their own choosing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use coload_timing::{BatchBuffer, Clock, MockStep, run_window};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialized, so reading it never allocates.
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if WATCHED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
    }
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

#[test]
fn the_window_does_not_allocate() {
    let clock = Clock::anchor();
    let mut step = MockStep::new(Duration::from_micros(200), 8).spinning();
    let mut buffer = BatchBuffer::with_capacity(4096);
    let start = clock.now_unix_ns() + 5_000_000;

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let outcome = run_window(
        &mut step,
        &clock,
        start,
        Duration::from_millis(100),
        &mut buffer,
    );
    let after = ALLOCATIONS.load(Ordering::SeqCst);

    assert!(outcome.error.is_none());
    assert!(outcome.batches > 100, "{}", outcome.batches);
    assert_eq!(
        after - before,
        0,
        "the window allocated {} times",
        after - before
    );
}
