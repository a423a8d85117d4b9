//! The counting allocator the window tests share: a global allocator that counts allocations
//! on one watched thread, and only while it is watched. Each test binary that declares
//! `mod common;` gets it as its global allocator, and the test that proves it counts.
//! `coload-workload`'s window tests include it by path (`#[path =
//! "../../timing/tests/common/mod.rs"]`), so the counter exists once.
//!
//! The flag that selects the watched thread and the count are thread-locals of the window's own
//! thread, set right before the window and read right after, so allocations by the test
//! harness's other threads never count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

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

/// Starts (`true`) or stops counting this thread's allocations, for a test that watches part
/// of a window (the workload crate's, from a step's first call inside it); read the count with
/// [`allocations`].
#[allow(
    dead_code,
    reason = "each test binary that includes this module uses a part"
)]
pub(crate) fn watch(on: bool) {
    WATCHED.with(|w| w.set(on));
}

/// The allocations counted on this thread so far.
#[allow(
    dead_code,
    reason = "each test binary that includes this module uses a part"
)]
pub(crate) fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Runs `f` on a fresh thread with the allocation counter watching that thread only; returns
/// the allocations it made and its result.
pub(crate) fn watched<T: Send>(f: impl FnOnce() -> T + Send) -> (usize, T) {
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
