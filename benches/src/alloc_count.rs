//! A counting global allocator for the bench binaries, so `benchctl rpc` can report
//! allocations per request. It forwards to the system allocator and counts
//! each allocation (`alloc`, `alloc_zeroed`, `realloc`) in one relaxed atomic: cheap enough to
//! stay on in every run, and the same cost for every peer that uses it.
//!
//! A binary opts in with
//! `#[global_allocator] static ALLOC: CountingAlloc = CountingAlloc;`.
//!
//! `unsafe` here is the `GlobalAlloc` contract itself (no crate in the offline registry
//! provides a counting allocator); each block only forwards to `System` with the caller's own
//! arguments.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes requested and not yet freed (`kv_memory`'s heap bytes per item).
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

/// The system allocator, counting.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the arguments it was given, so `System`'s
// guarantees are ours; the counter has no effect on the memory handed out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout, under the caller's obligations.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout, under the caller's obligations.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` through this allocator with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` through this allocator with `layout`; the caller
        // upholds `realloc`'s size rules.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Heap bytes requested and not freed yet (0 in a binary that does not install
/// [`CountingAlloc`]).
pub fn live_bytes() -> i64 {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// Allocations made by the process so far (0 in a binary that does not install
/// [`CountingAlloc`]).
pub fn alloc_count() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_and_counts() {
        let a = CountingAlloc;
        let layout = Layout::from_size_align(64, 8).unwrap();
        let before = alloc_count();
        // SAFETY: a non-zero-size layout; the block is freed with the same layout.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(7, 64);
            let q = a.realloc(p, layout, 128);
            assert_eq!(*q.add(63), 7, "realloc keeps the contents");
            a.dealloc(q, Layout::from_size_align(128, 8).unwrap());
        }
        // Other tests of this binary may allocate through it too (it is not installed here,
        // so they do not): at least our two.
        assert!(alloc_count() >= before + 2);
    }
}
