//! A counting global allocator for the unit-test build: allocation counts
//! per thread, so tests can hold a hot path to a number of allocations.
//! [`allocations`] counts everything the thread allocates; [`Counted`]
//! counts only while one future is polled (not the other tasks of a
//! current-thread runtime, such as a test's fake servers).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static SCOPED: Cell<u64> = const { Cell::new(0) };
    static IN_SCOPE: Cell<bool> = const { Cell::new(false) };
}

/// The system allocator, counting allocations and reallocations.
pub struct Counting;

fn count() {
    // `try_with`: a thread being torn down has no counter any more.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    if IN_SCOPE.try_with(Cell::get).unwrap_or(false) {
        let _ = SCOPED.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every call is forwarded to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations made on this thread so far.
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Allocations made on this thread while a [`Counted`] future was polled.
pub fn scoped_allocations() -> u64 {
    SCOPED.with(Cell::get)
}

/// Counts the allocations made while `inner` is polled in
/// [`scoped_allocations`].
pub struct Counted<F>(pub Pin<Box<F>>);

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let was = IN_SCOPE.with(|s| s.replace(true));
        let poll = self.0.as_mut().poll(cx);
        IN_SCOPE.with(|s| s.set(was));
        poll
    }
}
