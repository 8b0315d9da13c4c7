//! Incremental frame decoder: a state machine fed from a `BytesMut` that the
//! transport appends received bytes to.

use super::error::FrameError;
use super::header::{BodyLens, FrameHeader};
use super::header_codec;
use super::limits::FrameLimits;
use super::preamble::{self, PREAMBLE_LEN};
use bytes::{Buf, Bytes, BytesMut};

/// One decoded frame. `payload` and `attachment` share the receive buffer's
/// allocation (split off, not copied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The frame's header, verified and decoded.
    pub header: FrameHeader,
    /// The serialized message.
    pub payload: Bytes,
    /// Bulk bytes carried beside the payload (empty when the frame has none).
    pub attachment: Bytes,
}

#[derive(Debug)]
enum State {
    /// Waiting for a complete preamble + header.
    Header,
    /// Header consumed and validated; waiting for the whole body.
    Body { header: FrameHeader, lens: BodyLens },
    /// A previous error desynchronised the stream; it is reported again.
    Failed(FrameError),
}

#[derive(Debug)]
/// Incremental frame decoder: feed it whatever bytes arrived, take out whole frames. Limits
/// are checked as soon as the preamble and header arrive, before the body is buffered.
pub struct FrameDecoder {
    limits: FrameLimits,
    state: State,
}

impl FrameDecoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: FrameLimits) -> Self {
        Self {
            limits,
            state: State::Header,
        }
    }

    /// The limits this decoder enforces.
    pub fn limits(&self) -> FrameLimits {
        self.limits
    }

    /// Whether a frame's header was taken and its body is still awaited (the stream is inside
    /// a frame even when no byte of the body is buffered yet).
    pub fn in_frame(&self) -> bool {
        matches!(self.state, State::Body { .. })
    }

    /// Takes the next whole frame out of `buf`, or returns `Ok(None)` when more
    /// bytes are needed (the input may be split at any byte). Limits are checked
    /// as soon as the lengths are known, before the oversize part is buffered.
    /// After an error, every later call returns the same error: close the
    /// connection.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.step(buf) {
            Err(err) => {
                self.state = State::Failed(err.clone());
                Err(err)
            }
            ok => ok,
        }
    }

    fn step(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let (header, lens) = match std::mem::replace(&mut self.state, State::Header) {
            State::Failed(err) => return Err(err),
            State::Header => match self.take_header(buf)? {
                Some(parsed) => parsed,
                None => return Ok(None),
            },
            State::Body { header, lens } => (header, lens),
        };
        // The limit check in take_header bounds this by max_body_len: usize.
        let body_len = lens.total() as usize;
        if buf.len() < body_len {
            // Grow once now so the transport's following reads fill in place.
            buf.reserve(body_len - buf.len());
            self.state = State::Body { header, lens };
            return Ok(None);
        }
        let payload = buf.split_to(lens.payload as usize).freeze();
        // Most frames carry no attachment: an empty one needs no share of the buffer.
        let attachment = match lens.attachment {
            0 => Bytes::new(),
            n => buf.split_to(n as usize).freeze(),
        };
        Ok(Some(Frame {
            header,
            payload,
            attachment,
        }))
    }

    /// For a transport that carries some bodies out of band (RDMA's large messages, read
    /// from the sender's memory into a buffer of their own): take the next header only, and
    /// return the body lengths `(payload, attachment)` of the frame now pending; `Ok(None)`
    /// until the whole header has arrived. The body is then handed over with
    /// [`finish`](Self::finish), never taken from `buf` by this call, so bytes after the
    /// header are left alone (they may belong to a later frame). Errors as in `decode`.
    pub fn decode_header(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<(usize, usize)>, FrameError> {
        let taken = match std::mem::replace(&mut self.state, State::Header) {
            State::Failed(err) => Err(err),
            State::Header => self.take_header(buf),
            State::Body { header, lens } => Ok(Some((header, lens))),
        };
        match taken {
            Err(err) => {
                self.state = State::Failed(err.clone());
                Err(err)
            }
            Ok(None) => Ok(None),
            Ok(Some((header, lens))) => {
                let body = (lens.payload as usize, lens.attachment as usize);
                self.state = State::Body { header, lens };
                Ok(Some(body))
            }
        }
    }

    /// Complete the frame whose header [`decode_header`](Self::decode_header) took, with its
    /// payload and attachment from wherever the transport got them. `None` (and nothing
    /// changes) when no header is pending or the parts' lengths are not the declared ones.
    pub fn finish(&mut self, payload: Bytes, attachment: Bytes) -> Option<Frame> {
        match &self.state {
            State::Body { lens, .. }
                if lens.payload as usize == payload.len()
                    && lens.attachment as usize == attachment.len() => {}
            _ => return None,
        }
        match std::mem::replace(&mut self.state, State::Header) {
            State::Body { header, .. } => Some(Frame {
                header,
                payload,
                attachment,
            }),
            _ => unreachable!("checked above"),
        }
    }

    /// Consumes preamble + header from `buf` once both are complete.
    fn take_header(
        &self,
        buf: &mut BytesMut,
    ) -> Result<Option<(FrameHeader, BodyLens)>, FrameError> {
        if buf.len() < PREAMBLE_LEN {
            preamble::check_magic_prefix(buf)?;
            return Ok(None);
        }
        let mut pre = [0u8; PREAMBLE_LEN];
        pre.copy_from_slice(&buf[..PREAMBLE_LEN]);
        let declared = preamble::parse(&pre)?;
        let header_len = usize::try_from(declared).unwrap_or(usize::MAX);
        if header_len > self.limits.max_header_len {
            return Err(FrameError::HeaderTooLarge {
                len: header_len,
                max: self.limits.max_header_len,
            });
        }
        if buf.len() < PREAMBLE_LEN + header_len {
            return Ok(None);
        }
        let (header, lens) = header_codec::read(&buf[PREAMBLE_LEN..PREAMBLE_LEN + header_len])?;
        if lens.total() > self.limits.max_body_len as u64 {
            return Err(FrameError::FrameTooLarge {
                len: lens.total(),
                max: self.limits.max_body_len,
            });
        }
        buf.advance(PREAMBLE_LEN + header_len);
        Ok(Some((header, lens)))
    }
}
