//! Outgoing side of the echo protocol: frames gathered for one send. Small payloads are
//! copied next to their prefixes into one buffer; large ones go out by reference as their
//! own iovec. A batch never needs more iovecs than sendmsg(2) takes (IOV_MAX is 1024).

use bytes::{Bytes, BytesMut};
use corewire::transport::length_prefixed::{encode_prefix, PREFIX_LEN};

/// Payloads up to this size are copied: cheaper than an iovec of their own. The transport's
/// `OutQueue::COPY_MAX` makes the same choice; at 4096 a 4 KiB echo spent 7 % of the server's
/// time copying payloads it could have sent by reference.
const COPY_LIMIT: usize = 1024;
/// The tail grows by at least this much, not by doubling from a frame's size.
const TAIL_CHUNK: usize = 4096;
/// Buffers per batch, far below IOV_MAX.
const MAX_PARTS: usize = 64;
/// Bytes per batch before it asks to be sent.
const MAX_BYTES: usize = 256 * 1024;

#[derive(Debug, Default)]
pub struct FrameBatch {
    /// Buffers ready to go, in order.
    parts: Vec<Bytes>,
    /// Prefixes and copied payloads since the last large payload.
    tail: BytesMut,
    bytes: usize,
    frames: usize,
}

impl FrameBatch {
    pub fn new() -> FrameBatch {
        FrameBatch::default()
    }

    /// Add one frame. Payloads longer than `u32::MAX` cannot be framed; every caller's
    /// limit is far below that.
    pub fn push(&mut self, payload: Bytes) {
        let prefix = encode_prefix(payload.len()).expect("payload length fits the u32 prefix");
        let copied = PREFIX_LEN
            + if payload.len() <= COPY_LIMIT {
                payload.len()
            } else {
                0
            };
        if self.tail.capacity() - self.tail.len() < copied {
            self.tail.reserve(copied.max(TAIL_CHUNK));
        }
        self.tail.extend_from_slice(&prefix);
        self.bytes += PREFIX_LEN + payload.len();
        self.frames += 1;
        if payload.len() <= COPY_LIMIT {
            self.tail.extend_from_slice(&payload);
        } else {
            self.parts.push(self.tail.split().freeze());
            self.parts.push(payload);
        }
    }

    /// Time to send before adding more.
    pub fn is_full(&self) -> bool {
        self.parts.len() + 2 >= MAX_PARTS || self.bytes >= MAX_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    pub fn frames(&self) -> usize {
        self.frames
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drop the tail's spare room (kept from the last batch's allocation) while nothing is
    /// batched: a connection waiting for its client holds no buffer.
    pub fn release_idle(&mut self) {
        if self.tail.is_empty() {
            self.tail = BytesMut::new();
        }
    }

    /// Everything pushed so far, as buffers for one vectored send; the batch starts over.
    pub fn take(&mut self) -> Vec<Bytes> {
        if !self.tail.is_empty() {
            self.parts.push(self.tail.split().freeze());
        }
        self.bytes = 0;
        self.frames = 0;
        std::mem::take(&mut self.parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(parts: &[Bytes]) -> Vec<u8> {
        parts.iter().flat_map(|b| b.to_vec()).collect()
    }

    #[test]
    fn small_frames_coalesce_into_one_buffer() {
        let mut b = FrameBatch::new();
        b.push(Bytes::from_static(b"ab"));
        b.push(Bytes::new());
        b.push(Bytes::from_static(b"c"));
        assert_eq!(b.frames(), 3);
        let parts = b.take();
        assert_eq!(parts.len(), 1);
        assert_eq!(wire(&parts), b"\x02\0\0\0ab\0\0\0\0\x01\0\0\0c");
        assert!(b.is_empty() && b.take().is_empty());
    }

    #[test]
    fn large_payloads_are_not_copied() {
        let big = Bytes::from(vec![9u8; COPY_LIMIT + 1]);
        let mut b = FrameBatch::new();
        b.push(Bytes::from_static(b"x"));
        b.push(big.clone());
        b.push(Bytes::from_static(b"y"));
        let parts = b.take();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1].as_ptr(), big.as_ptr());
        let mut expected = b"\x01\0\0\0x".to_vec();
        expected.extend_from_slice(&((COPY_LIMIT + 1) as u32).to_le_bytes());
        expected.extend_from_slice(&big);
        expected.extend_from_slice(b"\x01\0\0\0y");
        assert_eq!(wire(&parts), expected);
    }

    #[test]
    fn fills_up_before_iov_max() {
        let mut b = FrameBatch::new();
        let mut pushed = 0;
        while !b.is_full() {
            b.push(Bytes::from(vec![1u8; COPY_LIMIT + 1]));
            pushed += 1;
        }
        assert!(b.take().len() <= MAX_PARTS);
        assert!(pushed > 1);

        let mut b = FrameBatch::new();
        while !b.is_full() {
            b.push(Bytes::from_static(b"tiny"));
        }
        assert!(b.bytes() >= MAX_BYTES);
        assert_eq!(b.take().len(), 1);
    }
}
