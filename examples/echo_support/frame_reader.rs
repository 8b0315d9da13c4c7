//! Incoming side of the echo protocol: whole frames out of whatever bytes arrived, and the
//! difference between a peer that closed between frames and one that closed inside one.
//! [`whole_frames`] only finds where the whole frames end (a server that echoes them sends
//! those bytes back as they are); [`FrameReader`] hands each payload up on its own.

use std::fmt;

use bytes::{Bytes, BytesMut};
use corewire::transport::length_prefixed::{
    payload_len, LengthPrefixedDecoder, LengthPrefixedError, PREFIX_LEN,
};

/// The peer broke the framing; the connection cannot continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// A frame declared more bytes than this end accepts.
    Oversize { len: u64, max: usize },
    /// End-of-stream arrived with part of a frame received.
    ClosedMidFrame { pending: u64 },
    /// Anything else the decoder refused.
    Invalid(String),
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Oversize { len, max } => {
                write!(f, "oversize frame: {len} bytes declared, limit {max}")
            }
            ProtocolError::ClosedMidFrame { pending } => {
                write!(
                    f,
                    "peer closed mid-frame with {pending} bytes of it received"
                )
            }
            ProtocolError::Invalid(why) => write!(f, "invalid frame: {why}"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// The whole frames at the head of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeFrames {
    pub frames: u32,
    /// Their bytes, prefixes included: where the first partial frame (if any) starts.
    pub bytes: usize,
}

/// Count the whole frames at the head of `buf`. Fails as soon as a prefix declares more than
/// `max_msg`, complete or not, so a peer is refused without waiting for the payload.
pub fn whole_frames(buf: &[u8], max_msg: usize) -> Result<WholeFrames, ProtocolError> {
    let mut whole = WholeFrames {
        frames: 0,
        bytes: 0,
    };
    while let Some(len) = payload_len(&buf[whole.bytes..], max_msg) {
        let end = whole.bytes + PREFIX_LEN + len.map_err(ProtocolError::from)?;
        if end > buf.len() {
            break;
        }
        whole.bytes = end;
        whole.frames += 1;
    }
    Ok(whole)
}

impl From<LengthPrefixedError> for ProtocolError {
    fn from(e: LengthPrefixedError) -> ProtocolError {
        match e {
            LengthPrefixedError::MessageTooLarge { len, max } => {
                ProtocolError::Oversize { len, max }
            }
            e => ProtocolError::Invalid(e.to_string()),
        }
    }
}

/// Frames out of a byte stream. The decoder consumes a prefix as soon as it arrives, so the
/// buffer alone cannot tell whether a frame is in progress: the reader counts bytes in and
/// bytes framed instead.
#[derive(Debug)]
pub struct FrameReader {
    decoder: LengthPrefixedDecoder,
    received: u64,
    framed: u64,
}

impl FrameReader {
    pub fn new(max_msg: usize) -> FrameReader {
        FrameReader {
            decoder: LengthPrefixedDecoder::new(max_msg),
            received: 0,
            framed: 0,
        }
    }

    /// `n` more bytes were appended to the buffer passed to [`FrameReader::next`].
    pub fn received(&mut self, n: usize) {
        self.received += n as u64;
    }

    /// The next whole payload, split off `buf` without copying.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, ProtocolError> {
        match self.decoder.decode(buf) {
            Ok(Some(payload)) => {
                self.framed += (PREFIX_LEN + payload.len()) as u64;
                Ok(Some(payload))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The stream ended: fine between frames, a protocol error inside one.
    pub fn finish(&self) -> Result<(), ProtocolError> {
        match self.received - self.framed {
            0 => Ok(()),
            pending => Err(ProtocolError::ClosedMidFrame { pending }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corewire::transport::length_prefixed::encode;

    fn feed(reader: &mut FrameReader, buf: &mut BytesMut, bytes: &[u8]) {
        buf.extend_from_slice(bytes);
        reader.received(bytes.len());
    }

    #[test]
    fn frames_split_across_arrivals() {
        let mut wire = BytesMut::new();
        encode(b"hello", &mut wire).unwrap();
        encode(b"", &mut wire).unwrap();
        let mut reader = FrameReader::new(16);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in wire.chunks(3) {
            feed(&mut reader, &mut buf, chunk);
            while let Some(p) = reader.next(&mut buf).unwrap() {
                out.push(p);
            }
        }
        assert_eq!(out, vec![Bytes::from_static(b"hello"), Bytes::new()]);
        assert_eq!(reader.finish(), Ok(()));
    }

    #[test]
    fn close_inside_a_prefix_or_a_body_is_an_error() {
        let mut reader = FrameReader::new(16);
        let mut buf = BytesMut::new();
        feed(&mut reader, &mut buf, &[5, 0]);
        assert_eq!(reader.next(&mut buf), Ok(None));
        assert_eq!(
            reader.finish(),
            Err(ProtocolError::ClosedMidFrame { pending: 2 })
        );

        let mut reader = FrameReader::new(16);
        let mut buf = BytesMut::new();
        feed(&mut reader, &mut buf, &[5, 0, 0, 0, b'a']);
        // The prefix is consumed here, leaving one body byte in the buffer.
        assert_eq!(reader.next(&mut buf), Ok(None));
        assert_eq!(
            reader.finish(),
            Err(ProtocolError::ClosedMidFrame { pending: 5 })
        );
    }

    #[test]
    fn whole_frames_stop_at_the_first_partial_one() {
        let mut wire = BytesMut::new();
        encode(b"hello", &mut wire).unwrap();
        encode(b"", &mut wire).unwrap();
        encode(b"cut short", &mut wire).unwrap();
        let two = 4 + 5 + 4;
        for (end, expected) in [
            (0, (0, 0)),
            (3, (0, 0)),
            (9, (1, 9)),
            (two, (2, two)),
            (two + 3, (2, two)),
            (wire.len() - 1, (2, two)),
            (wire.len(), (3, wire.len())),
        ] {
            let (frames, bytes) = expected;
            assert_eq!(
                whole_frames(&wire[..end], 16),
                Ok(WholeFrames { frames, bytes }),
                "first {end} bytes"
            );
        }
        // An oversize prefix fails even behind whole frames and before its payload.
        let mut wire = BytesMut::new();
        encode(b"ok", &mut wire).unwrap();
        wire.extend_from_slice(&17u32.to_le_bytes());
        assert_eq!(
            whole_frames(&wire, 16),
            Err(ProtocolError::Oversize { len: 17, max: 16 })
        );
    }

    #[test]
    fn oversize_is_reported_from_the_prefix() {
        let mut reader = FrameReader::new(16);
        let mut buf = BytesMut::new();
        feed(&mut reader, &mut buf, &17u32.to_le_bytes());
        assert_eq!(
            reader.next(&mut buf),
            Err(ProtocolError::Oversize { len: 17, max: 16 })
        );
    }
}
