//! Live heap bytes, counted: the fuzz targets' amplification oracle. A target binary installs
//! [`Counting`] as its global allocator; a body then runs the reader under [`peak_during`] and
//! fails when an input made it hold far more than its length explains, as a panic would.
//!
//! This module holds `unsafe`: a global allocator is an `unsafe` trait. Each method hands the
//! call to the system allocator unchanged and only counts.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting the bytes live on each thread and their most since
/// [`peak_during`] began.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

// Per thread: a reader runs on the thread that calls it, and other threads (tests run side
// by side) do not count against it. Bytes freed on another thread than the one that allocated
// them make the counts drift, never the peak of one call on one thread.
thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn grew(n: usize) {
    let n = isize::try_from(n).unwrap_or(isize::MAX);
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(n);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrank(n: usize) {
    let n = isize::try_from(n).unwrap_or(isize::MAX);
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(n)));
}

// SAFETY: every method forwards to `System` with the caller's arguments, which the caller
// guarantees meet `GlobalAlloc`'s contract; the counters are plain atomics and never touch the
// memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded (see the impl).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

/// Whether [`Counting`] is the global allocator (an allocation on this thread was counted).
pub fn counting() -> bool {
    let (_, held) = peak_during(|| std::hint::black_box(Box::new(0u64)));
    held > 0
}

/// Runs `f`, and the most heap bytes live on this thread during it beyond those live when it
/// began (0 when [`Counting`] is not the global allocator).
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let value = f();
    let peak = PEAK.with(Cell::get);
    (value, usize::try_from(peak.saturating_sub(base)).unwrap_or(0))
}
