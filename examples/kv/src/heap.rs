//! The server's heap: the global allocator `corewire-kv` installs ([`Allocator`]), what it
//! counts (INFO's `used_memory`, MEMORY STATS), and giving freed memory back to the
//! operating system ([`collect`]).
//!
//! Why mimalloc: many small, short-lived allocations (requests, replies, cross-shard
//! batches), some freed on another shard than the one that allocated them: its thread-local
//! free lists suit that better than glibc's arenas, whose freed pages stay with the arena
//! that had them (Redis links jemalloc for the same reason).
//!
//! Why it is wrapped: Redis's `used_memory` is its allocator's count of the bytes it holds,
//! and a user reads it next to RSS to see what is data and what is allocator overhead. The
//! keyspace's own estimate (`store/memory.rs`, what `--maxmemory` limits) cannot see
//! receive buffers, queued replies or a table's spare capacity. Each thread counts the bytes
//! it allocates and frees in a counter of its own (a plain load and store, no atomic
//! read-modify-write on the allocation path); a byte freed on another thread than the one
//! that allocated it is counted there, so only the sum over the threads means anything.
//!
//! Why [`collect`]: mimalloc purges the pages it freed (gives them back with `MADV_DONTNEED`)
//! a delay after they emptied (1 s by default), and only from inside the allocator, when the
//! thread allocates or frees again. A shard that goes idle after a burst (a `redis-cli
//! --pipe` load, a FLUSHALL) would keep what the burst left, tens of megabytes, for as long
//! as it stays idle. The shards call [`collect`] from their once-a-second housekeeping (it
//! purges only what is due, so a busy shard's churn is not given back and taken again), and
//! with `force` after FLUSHALL.
//!
//! Why no transparent huge pages: a huge page is 2 MiB made resident by the first byte
//! written into it. mimalloc asks for them on its arenas by default (`MADV_HUGEPAGE`), and
//! the server's heap is many small objects spread over its pages: an empty server held 10
//! MiB of huge pages for 1.3 MB of heap, idle connections cost about 400 B each beyond their
//! objects, and what a FLUSHALL left resident depended on which huge pages the kernel had
//! split when the purge gave part of them back (1.01x to 1.21x the empty server's RSS from
//! one run to the next). mimalloc is built without that request (`no_thp`), and
//! [`disable_thp`] does what Redis's `disable-thp yes` does (its default) for hosts whose
//! kernel makes huge pages unasked (`always`). The price is more TLB misses on a large
//! keyspace; Redis pays the same, and a fork for BGSAVE copies 4 KiB pages on write
//! instead of 2 MiB ones.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};

use mimalloc::MiMalloc;

/// Threads with a counter of their own; later threads share [`SHARED`] (and pay an atomic
/// add per allocation).
const OWN_COUNTERS: usize = 128;

#[repr(align(64))]
struct Counter(AtomicI64);

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Counter = Counter(AtomicI64::new(0));
static COUNTERS: [Counter; OWN_COUNTERS] = [ZERO; OWN_COUNTERS];
static SHARED: Counter = ZERO;
static NEXT_COUNTER: AtomicUsize = AtomicUsize::new(0);
/// Set once the binary installs [`Allocator`]: the counts mean nothing before.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The most [`allocated`] has read (MEMORY STATS's `peak.allocated`).
static PEAK: AtomicU64 = AtomicU64::new(0);
/// [`allocated`] when the server had started (`startup.allocated`).
static STARTUP: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's counter: `usize::MAX` until its first allocation, then an index into
    /// [`COUNTERS`], or `OWN_COUNTERS` for [`SHARED`]. `const`-initialised and without a
    /// destructor, so it can be read at any point of the thread's life, teardown included.
    static MY_COUNTER: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn count(delta: i64) {
    let index = MY_COUNTER.with(|slot| {
        let mut index = slot.get();
        if index == usize::MAX {
            index = NEXT_COUNTER
                .fetch_add(1, Ordering::Relaxed)
                .min(OWN_COUNTERS);
            slot.set(index);
        }
        index
    });
    match COUNTERS.get(index) {
        // Only this thread writes its counter: no read-modify-write needed.
        Some(own) => own
            .0
            .store(own.0.load(Ordering::Relaxed) + delta, Ordering::Relaxed),
        None => {
            SHARED.0.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// mimalloc, counting the bytes it holds for the program (see the module's docs).
pub struct Allocator;

impl Allocator {
    pub const fn new() -> Allocator {
        Allocator
    }
}

impl Default for Allocator {
    fn default() -> Self {
        Allocator::new()
    }
}

/// Whether `layout` is served by mimalloc's plain `mi_malloc`: an alignment of at most 16
/// bytes (what mimalloc guarantees a block of 16 bytes or more, and a smaller block its size
/// rounded to 8) no larger than the size, the test the standard library's `System` makes
/// before its plain `malloc`. Why not always `mi_malloc_aligned` (the `mimalloc` crate's
/// choice): its fast path takes a block only while the size class's free list has one, and
/// otherwise over-allocates from a larger class instead of refilling that list, so a size
/// class whose list once ran empty (a request's argument vector, freed as the reply goes
/// out) went the slow way at every allocation after it: half of what the allocations of a
/// pipelined PFADD cost (BENCHMARKS.md, the shared request path).
#[inline]
fn natural(layout: Layout) -> bool {
    layout.align() <= 16 && layout.align() <= layout.size()
}

extern "C" {
    fn mi_malloc(size: usize) -> *mut std::ffi::c_void;
    fn mi_zalloc(size: usize) -> *mut std::ffi::c_void;
}

// SAFETY: every call is forwarded to mimalloc (its `GlobalAlloc`, which upholds the trait's
// contract, or `mi_malloc` / `mi_zalloc` where those give the alignment asked, see `natural`); the counting only reads the layouts and touches thread-local state and
// atomics (no allocation, no panic).
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = if natural(layout) {
            // SAFETY: a non-zero size (`natural`), and mimalloc's plain blocks have the
            // alignment asked (see `natural`).
            unsafe { mi_malloc(layout.size()).cast::<u8>() }
        } else {
            // SAFETY: the caller's contract for `alloc`, passed on.
            unsafe { MiMalloc.alloc(layout) }
        };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = if natural(layout) {
            // SAFETY: as in `alloc`.
            unsafe { mi_zalloc(layout.size()).cast::<u8>() }
        } else {
            // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { MiMalloc.dealloc(ptr, layout) };
        count(-(layout.size() as i64));
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Called by the binary that installed [`Allocator`] as its global allocator, first thing:
/// from then on [`allocated`] is the heap's size.
pub fn installed() {
    INSTALLED.store(true, Ordering::Relaxed);
}

/// Bytes allocated and not freed, all threads together: `None` unless [`Allocator`] is the
/// global allocator (a test binary, a program embedding the server).
pub fn allocated() -> Option<u64> {
    if !INSTALLED.load(Ordering::Relaxed) {
        return None;
    }
    let own: i64 = COUNTERS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
    let total = (own + SHARED.0.load(Ordering::Relaxed)).max(0) as u64;
    PEAK.fetch_max(total, Ordering::Relaxed);
    Some(total)
}

/// The most [`allocated`] has been seen at (sampled each second and at each read).
pub fn peak() -> u64 {
    PEAK.load(Ordering::Relaxed)
}

/// Records the heap at start-up (`startup.allocated`): called once the shards are up.
pub fn mark_startup() {
    if let Some(now) = allocated() {
        STARTUP.store(now, Ordering::Relaxed);
    }
}

/// [`allocated`] when the server had started.
pub fn startup() -> u64 {
    STARTUP.load(Ordering::Relaxed)
}

/// `disable-thp yes`: no transparent huge pages for this process from now on (and its fork
/// children), whatever the kernel's default (`prctl(PR_SET_THP_DISABLE)`, as Redis does).
/// Called before the shards start, so the heap they grow is in 4 KiB pages.
pub fn disable_thp() -> std::io::Result<()> {
    nix::sys::prctl::set_thp_disable(true).map_err(std::io::Error::from)
}

extern "C" {
    // mimalloc's own API, in the static library `libmimalloc-sys` links (declared here
    // because that crate exposes it only with a feature that needs another dependency).
    fn mi_collect(force: bool);
}

/// Gives the operating system the pages this thread's heap has freed and whose purge delay
/// has passed (see the module's docs); with `force`, everything free at once (after a
/// FLUSHALL). Does nothing unless [`Allocator`] is installed.
pub fn collect(force: bool) {
    if INSTALLED.load(Ordering::Relaxed) {
        // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any
        // time; mimalloc is linked (it is the global allocator when `INSTALLED` is set).
        unsafe { mi_collect(force) };
        let _ = allocated();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nothing_until_installed() {
        // Test binaries keep the system allocator: the count must not pretend otherwise.
        assert_eq!(allocated(), None);
        collect(false);
    }

    #[test]
    fn a_thread_counts_what_it_allocates_and_frees() {
        let before = COUNTERS
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum::<i64>();
        let layout = Layout::from_size_align(1000, 8).unwrap();
        // SAFETY: a non-zero layout; the block is freed with the same layout below.
        let p = unsafe { Allocator.alloc(layout) };
        assert!(!p.is_null());
        let held = COUNTERS
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum::<i64>();
        // SAFETY: `p` came from `alloc` with `layout` and is freed once.
        unsafe { Allocator.dealloc(p, layout) };
        let after = COUNTERS
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum::<i64>();
        assert_eq!((held - before, after - before), (1000, 0));
    }
}
