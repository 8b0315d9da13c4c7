//! Server-side echo state for one connection: bytes read from the socket accumulate here, and
//! every complete frame at the head is handed back to be written out unchanged.
//!
//! Echoing all complete frames with one write is what makes a pipelined client cheap to serve:
//! D requests that arrive in one read leave in one write.

use crate::byte_queue::ByteQueue;
use crate::frame::{self, FrameError};

/// Smallest read the buffer offers, so small frames are read many at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Per-connection echo buffer.
#[derive(Debug)]
pub struct EchoBuffer {
    queue: ByteQueue,
    max_payload: usize,
}

impl EchoBuffer {
    /// A buffer that refuses frames over `max_payload`.
    pub fn new(max_payload: usize) -> EchoBuffer {
        EchoBuffer {
            queue: ByteQueue::with_capacity(READ_CHUNK),
            max_payload,
        }
    }

    /// Space to read into: at least a chunk, or the rest of a large frame whose header is in,
    /// so a 16 MiB frame does not need hundreds of reads.
    pub fn read_space(&mut self) -> &mut [u8] {
        let missing = match frame::payload_len(self.queue.filled(), self.max_payload) {
            Some(Ok(len)) => (frame::HEADER_LEN + len).saturating_sub(self.queue.len()),
            _ => 0,
        };
        self.queue.spare(missing.max(READ_CHUNK))
    }

    /// Records that `n` bytes were read into `read_space`.
    pub fn filled(&mut self, n: usize) {
        self.queue.commit(n);
    }

    /// Complete frames to write back, or the reason the connection must close.
    pub fn ready(&self) -> Result<&[u8], FrameError> {
        let filled = self.queue.filled();
        let n = frame::complete_prefix(filled, self.max_payload)?;
        Ok(&filled[..n])
    }

    /// Records that `n` bytes from `ready` were written back.
    pub fn echoed(&mut self, n: usize) {
        self.queue.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::header;

    fn receive(buf: &mut EchoBuffer, bytes: &[u8]) {
        buf.read_space()[..bytes.len()].copy_from_slice(bytes);
        buf.filled(bytes.len());
    }

    #[test]
    fn echoes_only_complete_frames_and_keeps_the_tail() {
        let mut buf = EchoBuffer::new(1024);
        let mut wire = header(3).to_vec();
        wire.extend_from_slice(b"abc");
        wire.extend_from_slice(&header(2));
        wire.extend_from_slice(b"d");
        receive(&mut buf, &wire);
        assert_eq!(buf.ready().unwrap(), &wire[..7]);
        buf.echoed(7);
        assert_eq!(buf.ready().unwrap(), b"");
        receive(&mut buf, b"e");
        assert_eq!(buf.ready().unwrap(), &[2, 0, 0, 0, b'd', b'e']);
    }

    #[test]
    fn offers_room_for_a_whole_large_frame() {
        let mut buf = EchoBuffer::new(1 << 20);
        receive(&mut buf, &header(500_000));
        assert!(buf.read_space().len() >= 500_000);
    }

    #[test]
    fn refuses_oversized_frames() {
        let mut buf = EchoBuffer::new(10);
        receive(&mut buf, &header(11));
        assert!(buf.ready().is_err());
    }
}
