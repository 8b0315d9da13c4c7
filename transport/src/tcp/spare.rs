//! The shard's spare receive buffers.
//!
//! A connection waiting for its peer between frames lets go of its receive buffer, so idle
//! connections hold none. Freeing it, though, meant an allocation and a free per batch of
//! frames received, and the allocator returning the freed memory to the kernel meant page
//! faults when the next batch touched it again (the RPC client at 4 KiB: BENCHMARKS.md,
//! issue 12). The buffer goes to the shard's spares instead and the next connection to
//! receive takes it back. A spare whose earlier frames are all gone is reused in place by
//! the next `reserve`; one whose frames are still in use gets its free tail used, or is
//! replaced by a fresh allocation when the tail is too short (nothing is ever copied for it).

use std::cell::RefCell;

use bytes::BytesMut;

/// Spares one shard keeps: enough for the connections that receive in one pass of a busy
/// shard to find one each, small enough that what they pin stays bounded (with
/// [`MAX_SPARE_BYTES`], 32 × 128 KiB = 4 MiB a shard at most, and far less in practice).
const MAX_SPARES: usize = 32;

/// The largest buffer kept. A receive appends at most the runtime's 64 KiB of chunks at
/// once, which with the bytes before them and `BytesMut`'s doubling stays under this; only a
/// buffer grown for one large frame is larger, and it goes back to the allocator.
pub(super) const MAX_SPARE_BYTES: usize = 128 * 1024;

corewire_runtime::shard_local! {
    static SPARES: RefCell<Vec<BytesMut>> = RefCell::new(Vec::new());
}

/// A spare buffer (possibly one with no room, which the receive then grows), or an empty one
/// off a shard or when there is none.
pub(super) fn take() -> BytesMut {
    SPARES
        .try_with(|s| s.borrow_mut().pop())
        .flatten()
        .unwrap_or_default()
}

/// Keep `buf` for the next receive, when it is empty, has room and is known to be no larger
/// than [`MAX_SPARE_BYTES`] (`largest`: the most capacity it was seen with); otherwise
/// dropped.
pub(super) fn give(buf: BytesMut, largest: usize) {
    if !buf.is_empty() || buf.capacity() == 0 || largest > MAX_SPARE_BYTES {
        return;
    }
    SPARES.try_with(move |s| {
        let mut s = s.borrow_mut();
        if s.len() < MAX_SPARES {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use corewire_runtime::Runtime;

    fn spares() -> usize {
        SPARES.with(|s| s.borrow().len())
    }

    /// The bound holds however many buffers come back, and only empty buffers known to be
    /// within the size bound are kept.
    #[test]
    fn spares_stay_bounded_and_only_fit_buffers_are_kept() {
        let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
        rt.run_on(0, || async {
            give(BytesMut::with_capacity(64), MAX_SPARE_BYTES + 1);
            give(BytesMut::from(&b"pending bytes"[..]), 64);
            give(BytesMut::new(), 0);
            assert_eq!(spares(), 0, "too large, not empty, no room: none kept");
            for _ in 0..MAX_SPARES + 5 {
                give(BytesMut::with_capacity(4096), 4096);
            }
            assert_eq!(spares(), MAX_SPARES);
            let buf = take();
            assert!(buf.is_empty() && buf.capacity() >= 4096);
            assert_eq!(spares(), MAX_SPARES - 1);
        })
        .unwrap();
        // Off a shard there are no spares: a fresh empty buffer, and nothing is kept.
        give(BytesMut::with_capacity(64), 64);
        assert_eq!(take().capacity(), 0);
    }
}
