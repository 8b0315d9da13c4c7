//! Frame encoder. Produces preamble + header as one small buffer so the
//! transport can send `[header, payload, attachment]` as separate iovecs and
//! never copy the body.

use bytes::{BufMut, Bytes, BytesMut};

use super::error::FrameError;
use super::header::FrameHeader;
use super::header_codec;
use super::limits::FrameLimits;
use super::preamble::{self, PREAMBLE_LEN};

/// Encoded headers are carved out of one arena at least this large, so a
/// stream of frames costs one allocation per few dozen headers, not one each.
const ARENA_CHUNK: usize = 4096;

/// Frame encoder: preamble and header for a payload and attachment the caller keeps in its own
/// buffers (sent vectored, without copies), or a whole frame appended to one buffer.
#[derive(Debug)]
pub struct FrameEncoder {
    limits: FrameLimits,
    arena: BytesMut,
}

impl FrameEncoder {
    /// An encoder that refuses frames over `limits` (the peer's decoder would reject them).
    pub fn new(limits: FrameLimits) -> Self {
        Self {
            limits,
            arena: BytesMut::new(),
        }
    }

    /// The limits this encoder enforces.
    pub fn limits(&self) -> FrameLimits {
        self.limits
    }

    /// Bytes of the whole frame (preamble, header, payload, attachment), or why the peer's
    /// limits would reject it.
    pub fn frame_len(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment_len: usize,
    ) -> Result<usize, FrameError> {
        let header_len = self.check(header, payload_len, attachment_len)?;
        Ok(PREAMBLE_LEN + header_len + payload_len + attachment_len)
    }

    /// Preamble + flatbuffer header for a frame whose payload and attachment
    /// have the given lengths. Fails if the peer's limits would reject it.
    pub fn encode_header(
        &mut self,
        header: &FrameHeader,
        payload_len: usize,
        attachment_len: usize,
    ) -> Result<Bytes, FrameError> {
        let needed = PREAMBLE_LEN + self.check(header, payload_len, attachment_len)?;
        if self.arena.capacity() < needed {
            self.arena.reserve(needed.max(ARENA_CHUNK));
        }
        write_head(header, payload_len, attachment_len, &mut self.arena);
        Ok(self.arena.split().freeze())
    }

    /// Appends preamble + header for a frame whose payload and attachment have the given
    /// lengths to `dst`, for a caller that writes the payload in place behind it (the payload
    /// is never in a buffer of its own). Fails, writing nothing, if the peer's limits would
    /// reject the frame.
    pub fn encode_header_into(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment_len: usize,
        dst: &mut BytesMut,
    ) -> Result<(), FrameError> {
        self.check(header, payload_len, attachment_len)?;
        write_head(header, payload_len, attachment_len, dst);
        Ok(())
    }

    /// Appends a whole frame (preamble, header, payload, attachment) to `dst`;
    /// for transports without vectored sends, and for tests.
    pub fn encode_frame(
        &mut self,
        header: &FrameHeader,
        payload: &[u8],
        attachment: &[u8],
        dst: &mut BytesMut,
    ) -> Result<(), FrameError> {
        let header_len = self.check(header, payload.len(), attachment.len())?;
        dst.reserve(PREAMBLE_LEN + header_len + payload.len() + attachment.len());
        write_head(header, payload.len(), attachment.len(), dst);
        dst.put_slice(payload);
        dst.put_slice(attachment);
        Ok(())
    }

    /// Checks the frame against the peer's limits; the header's length, which then fits the
    /// preamble's `u32` (and the lengths fit the header's).
    fn check(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment_len: usize,
    ) -> Result<usize, FrameError> {
        let body_len = payload_len as u64 + attachment_len as u64;
        if body_len > self.limits.max_body_len as u64
            || u32::try_from(payload_len).is_err()
            || u32::try_from(attachment_len).is_err()
        {
            return Err(FrameError::FrameTooLarge {
                len: body_len,
                max: self.limits.max_body_len,
            });
        }
        let header_len = header_codec::encoded_len(header);
        if header_len > self.limits.max_header_len || u32::try_from(header_len).is_err() {
            return Err(FrameError::HeaderTooLarge {
                len: header_len,
                max: self.limits.max_header_len,
            });
        }
        Ok(header_len)
    }
}

/// Preamble and header of a frame [`FrameEncoder::check`] passed.
fn write_head(header: &FrameHeader, payload_len: usize, attachment_len: usize, dst: &mut BytesMut) {
    let header_len = header_codec::encoded_len(header);
    dst.put_slice(&preamble::write(header_len as u32));
    header_codec::write(header, payload_len as u32, attachment_len as u32, dst);
}
