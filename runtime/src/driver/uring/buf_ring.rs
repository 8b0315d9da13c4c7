//! The shard's provided-buffer ring (`IORING_REGISTER_PBUF_RING`): one pool of equal-sized
//! receive buffers that every multishot receive of the shard draws from, so a connection holds
//! a buffer only while data it received is waiting for its consumer.
//!
//! The kernel takes a buffer from the ring for each chunk it receives and names it in the
//! completion; the consumer gets it as a [`RecvBuf`], whose drop puts it back in the ring.
//! The buffers are ordinary memory (neither locked nor counted against RLIMIT_MEMLOCK: the
//! kernel copies into them); only the ring of descriptors (16 bytes a buffer) is pinned.
//! Pages are committed when the kernel first writes into them.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::Cell;
use std::fmt;
use std::io;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::atomic::{AtomicU16, Ordering};

use bytes::BytesMut;
use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The buffer group id of the shard's ring (one ring per io_uring instance).
pub(crate) const BUF_GROUP: u16 = 0;

/// Sizes of a shard's receive-buffer ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecvBuffers {
    /// Buffers in the ring: a power of two, at most 32768.
    pub count: u16,
    /// Bytes in each buffer (the most one receive completion carries).
    pub size: u32,
}

impl RecvBuffers {
    /// `count` buffers of `size` bytes (the runtime checks `count` when it builds the ring).
    pub const fn new(count: u16, size: u32) -> RecvBuffers {
        RecvBuffers { count, size }
    }
}

impl Default for RecvBuffers {
    /// 256 × 4 KiB = 1 MiB a shard, about one core's L2. The kernel takes buffers at the
    /// ring's head and consumers give them back at its tail, so every buffer is written in
    /// turn: with 1024 (4 MiB, the earlier default) receive copies land in memory that left
    /// the cache. Measured (BENCHMARKS.md, fifth run, echo 4 KiB × 64, medians of 5): without
    /// bundled receives 342k vs 294k requests/s, server CPU 2.88 vs 3.34 µs per request; with
    /// bundles (6.10+) no difference; and 3 MiB less per shard. A small request fits one
    /// buffer; a ring that runs dry falls back to single-shot receives, losing nothing.
    fn default() -> Self {
        RecvBuffers {
            count: 256,
            size: 4096,
        }
    }
}

/// The ring and its buffers. Shared (`Rc`) by the driver and every [`RecvBuf`] handed out,
/// so the memory lives until the last buffer is back; the driver unregisters it from the
/// kernel before the memory can go (see `Driver::drop`).
pub(crate) struct BufRing {
    /// `count` entries the kernel reads, page-aligned; the tail lives in entry 0's `resv`.
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    /// `count × size` bytes of buffers.
    bufs: *mut u8,
    bufs_layout: Layout,
    count: u16,
    size: u32,
    /// Our copy of the tail (the kernel only reads it).
    tail: Cell<u16>,
    /// Which buffer we published at each ring position, and where each buffer was last
    /// published: a bundle completion names only its first buffer, and the kernel filled the
    /// ones at the ring positions after it (see [`BufRing::bundle`]).
    bid_at: Box<[Cell<u16>]>,
    pos_of: Box<[Cell<u16>]>,
    /// Buffers in the ring now (published minus those the kernel's completions took).
    available: Cell<u32>,
}

impl BufRing {
    /// Allocate the ring with every buffer in it and register it with `ring`.
    pub(crate) fn register(ring: &IoUring, sizes: RecvBuffers) -> io::Result<Rc<BufRing>> {
        let RecvBuffers { count, size } = sizes;
        if !count.is_power_of_two() || count > 32768 || size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "receive buffers: the count must be a power of two ≤ 32768, the size > 0",
            ));
        }
        let entries_layout = Layout::from_size_align(
            (count as usize * std::mem::size_of::<BufRingEntry>()).max(4096),
            4096,
        )
        .map_err(io::Error::other)?;
        let bufs_layout = Layout::from_size_align(count as usize * size as usize, 4096)
            .map_err(io::Error::other)?;
        // SAFETY: both layouts have a non-zero size.
        let entries = unsafe { alloc_zeroed(entries_layout) }.cast::<BufRingEntry>();
        // SAFETY: as above. Zeroed: large allocations come from fresh mappings, committed only
        // when touched, and nothing is ever read before the kernel wrote it anyway.
        let bufs = unsafe { alloc_zeroed(bufs_layout) };
        if entries.is_null() || bufs.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let ring_buf = BufRing {
            entries,
            entries_layout,
            bufs,
            bufs_layout,
            count,
            size,
            tail: Cell::new(0),
            bid_at: (0..count).map(|_| Cell::new(0)).collect(),
            pos_of: (0..count).map(|_| Cell::new(0)).collect(),
            available: Cell::new(0),
        };
        // SAFETY: `entries` is a page-aligned allocation of `count` entries that stays alive
        // (and in place) until the driver unregisters the group, or forever if it cannot.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, BUF_GROUP, 0)?;
        }
        for bid in 0..count {
            ring_buf.publish(bid);
        }
        Ok(Rc::new(ring_buf))
    }

    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    pub(crate) fn count(&self) -> u16 {
        self.count
    }

    /// Buffers the kernel can take now.
    pub(crate) fn available(&self) -> u32 {
        self.available.get()
    }

    /// The buffers a bundle receive of `len` bytes filled, starting with `first` (the one
    /// its completion names): the kernel takes a bundle's buffers from consecutive ring
    /// positions and fills each but the last completely. Yields `(bid, bytes)` in order.
    pub(crate) fn bundle(&self, first: u16, len: u32) -> impl Iterator<Item = (u16, u32)> + '_ {
        let parts = len.div_ceil(self.size).max(1);
        let start = self.pos_of[usize::from(first) & (usize::from(self.count) - 1)].get();
        (0..parts).map(move |i| {
            // `parts` ≤ the ring's count, so the offset fits a u16 and wraps with the ring.
            let pos = start.wrapping_add(i as u16) & (self.count - 1);
            let bid = self.bid_at[usize::from(pos)].get();
            (bid, (len - i * self.size).min(self.size))
        })
    }

    /// A completion took buffer `bid` holding `len` bytes: hand it to the consumer.
    pub(crate) fn take(self: &Rc<Self>, bid: u16, len: u32) -> RecvBuf {
        debug_assert!(bid < self.count && len <= self.size);
        self.available.set(self.available.get().saturating_sub(1));
        RecvBuf {
            inner: Inner::Ring {
                ring: self.clone(),
                bid,
                len: len.min(self.size),
            },
        }
    }

    /// A completion took buffer `bid` for a consumer that went away: straight back.
    pub(crate) fn took_and_returned(&self, bid: u16) {
        self.available.set(self.available.get().saturating_sub(1));
        self.publish(bid);
    }

    /// Put buffer `bid` (empty, ours) at the tail of the ring.
    fn publish(&self, bid: u16) {
        let tail = self.tail.get();
        let idx = (tail & (self.count - 1)) as usize;
        // SAFETY: `idx < count`, inside the entries allocation; the kernel reads entries only
        // between its head and the published tail, and `idx` is past that tail.
        unsafe {
            let entry = &mut *self.entries.add(idx);
            entry.set_addr(self.bufs.add(bid as usize * self.size as usize) as u64);
            entry.set_len(self.size);
            entry.set_bid(bid);
        }
        self.bid_at[idx].set(bid);
        self.pos_of[usize::from(bid)].set(idx as u16);
        let tail = tail.wrapping_add(1);
        self.tail.set(tail);
        // SAFETY: the tail field lies in entry 0 of our live allocation; the kernel reads it
        // concurrently, hence the atomic release store (the entry above is visible first).
        unsafe {
            let tail_ptr = BufRingEntry::tail(self.entries).cast_mut();
            (*tail_ptr.cast::<AtomicU16>()).store(tail, Ordering::Release);
        }
        self.available.set(self.available.get() + 1);
    }

    /// The bytes of buffer `bid`.
    ///
    /// # Safety
    /// The caller holds buffer `bid` (a completion handed it over and it was not published
    /// again), so the kernel does not write it, and `len ≤ size` bytes of it were received.
    unsafe fn bytes(&self, bid: u16, len: u32) -> &[u8] {
        // SAFETY: in bounds (bid < count, len ≤ size); see the function's contract.
        unsafe {
            std::slice::from_raw_parts(
                self.bufs.add(bid as usize * self.size as usize),
                len as usize,
            )
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the driver unregistered the group before dropping its share (or leaked its
        // share for good when it could not), and no RecvBuf is left, so no one uses either
        // allocation; the layouts are the ones they were allocated with.
        unsafe {
            dealloc(self.entries.cast(), self.entries_layout);
            dealloc(self.bufs, self.bufs_layout);
        }
    }
}

/// Received bytes: a buffer of the shard's ring (back in the ring when dropped), or, where
/// the ring is not used, an owned buffer. Dereferences to the bytes received.
///
/// `!Send`: a ring buffer returns to the ring of the shard that received it. Keep it only as
/// long as you need the bytes: while you hold it, the kernel cannot use it for anyone.
pub struct RecvBuf {
    inner: Inner,
}

enum Inner {
    Ring {
        ring: Rc<BufRing>,
        bid: u16,
        len: u32,
    },
    Owned(BytesMut),
}

impl RecvBuf {
    pub(crate) fn owned(buf: BytesMut) -> RecvBuf {
        RecvBuf {
            inner: Inner::Owned(buf),
        }
    }

    /// Whether the bytes sit in the shard's buffer ring (`false`: a fallback's own buffer).
    pub fn is_from_ring(&self) -> bool {
        matches!(self.inner, Inner::Ring { .. })
    }
}

impl Deref for RecvBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.inner {
            // SAFETY: this handle holds buffer `bid` until it drops, and its completion said
            // `len` bytes were received into it.
            Inner::Ring { ring, bid, len } => unsafe { ring.bytes(*bid, *len) },
            Inner::Owned(b) => b,
        }
    }
}

impl AsRef<[u8]> for RecvBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for RecvBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvBuf")
            .field("len", &self.len())
            .field("from_ring", &self.is_from_ring())
            .finish()
    }
}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        if let Inner::Ring { ring, bid, .. } = &self.inner {
            ring.publish(*bid);
        }
    }
}
