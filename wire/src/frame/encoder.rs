//! Frame encoder. Produces preamble + header as one small buffer so the
//! transport can send `[header, payload, attachment]` as separate iovecs and
//! never copy the body.

use bytes::{BufMut, Bytes, BytesMut};
use flatbuffers::FlatBufferBuilder;

use super::error::FrameError;
use super::header::{deadline_to_micros, FrameHeader};
use super::header_generated::corewire::wire;
use super::limits::FrameLimits;
use super::preamble::{self, PREAMBLE_LEN, VERSION};

/// Encoded headers are carved out of one arena at least this large, so a
/// stream of frames costs one allocation per few dozen headers, not one each.
const ARENA_CHUNK: usize = 4096;

/// Frame encoder: preamble and header for a payload and attachment the caller keeps in its own
/// buffers (sent vectored, without copies), or a whole frame appended to one buffer.
pub struct FrameEncoder {
    limits: FrameLimits,
    /// Reused across frames: `reset()` keeps its allocation.
    fbb: FlatBufferBuilder<'static>,
    arena: BytesMut,
}

impl std::fmt::Debug for FrameEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The builder's allocator has no Debug; its contents are transient anyway.
        f.debug_struct("FrameEncoder")
            .field("limits", &self.limits)
            .field("arena_capacity", &self.arena.capacity())
            .finish_non_exhaustive()
    }
}

impl FrameEncoder {
    /// An encoder that refuses frames over `limits` (the peer's decoder would reject them).
    pub fn new(limits: FrameLimits) -> Self {
        Self {
            limits,
            fbb: FlatBufferBuilder::with_capacity(256),
            arena: BytesMut::new(),
        }
    }

    /// The limits this encoder enforces.
    pub fn limits(&self) -> FrameLimits {
        self.limits
    }

    /// Preamble + flatbuffer header for a frame whose payload and attachment
    /// have the given lengths. Fails if the peer's limits would reject it.
    pub fn encode_header(
        &mut self,
        header: &FrameHeader,
        payload_len: usize,
        attachment_len: usize,
    ) -> Result<Bytes, FrameError> {
        let header_len = self.build(header, payload_len, attachment_len)?;
        let needed = PREAMBLE_LEN + header_len;
        if self.arena.capacity() < needed {
            self.arena.reserve(needed.max(ARENA_CHUNK));
        }
        self.arena.put_slice(&preamble::write(header_len as u32));
        self.arena.put_slice(self.fbb.finished_data());
        Ok(self.arena.split().freeze())
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
        let header_len = self.build(header, payload.len(), attachment.len())?;
        dst.reserve(PREAMBLE_LEN + header_len + payload.len() + attachment.len());
        dst.put_slice(&preamble::write(header_len as u32));
        dst.put_slice(self.fbb.finished_data());
        dst.put_slice(payload);
        dst.put_slice(attachment);
        Ok(())
    }

    /// Builds the flatbuffer header into `self.fbb`; returns its length, which
    /// the limit check guarantees fits the preamble's `u32`.
    fn build(
        &mut self,
        header: &FrameHeader,
        payload_len: usize,
        attachment_len: usize,
    ) -> Result<usize, FrameError> {
        let too_large = |len: u64| FrameError::FrameTooLarge {
            len,
            max: self.limits.max_body_len,
        };
        let body_len = payload_len as u64 + attachment_len as u64;
        let payload_len = u32::try_from(payload_len).map_err(|_| too_large(body_len))?;
        let attachment_len = u32::try_from(attachment_len).map_err(|_| too_large(body_len))?;
        if body_len > self.limits.max_body_len as u64 {
            return Err(too_large(body_len));
        }

        self.fbb.reset();
        let error_message = header
            .error_message
            .as_deref()
            .map(|msg| self.fbb.create_string(msg));
        let args = wire::WireHeaderArgs {
            version: VERSION,
            kind: header.kind.to_wire(),
            service_id: header.service_id,
            method_id: header.method_id,
            correlation_id: header.correlation_id,
            status: header.status.to_wire(),
            payload_len,
            attachment_len,
            deadline_us: header.deadline.map(deadline_to_micros),
            error_message,
        };
        let root = wire::WireHeader::create(&mut self.fbb, &args);
        wire::finish_wire_header_buffer(&mut self.fbb, root);

        let header_len = self.fbb.finished_data().len();
        if header_len > self.limits.max_header_len || u32::try_from(header_len).is_err() {
            return Err(FrameError::HeaderTooLarge {
                len: header_len,
                max: self.limits.max_header_len,
            });
        }
        Ok(header_len)
    }
}
