//! Raw echo framing used by the benchmarks: a `u32` little-endian length, then
//! that many payload bytes. No header, no versioning: it exists to measure the
//! transport, not the RPC layer.

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes in the length prefix.
pub const PREFIX_LEN: usize = 4;

/// Failure to frame or unframe a length-prefixed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthPrefixedError {
    /// The message (declared by a peer, or handed to the encoder) exceeds the limit.
    MessageTooLarge { len: u64, max: usize },
}

impl fmt::Display for LengthPrefixedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MessageTooLarge { len, max } => {
                write!(
                    f,
                    "length-prefixed message of {len} bytes exceeds limit of {max}"
                )
            }
        }
    }
}

impl std::error::Error for LengthPrefixedError {}

/// Incremental decoder: feed it whatever bytes arrived, take out whole messages.
#[derive(Debug, Clone)]
pub struct LengthPrefixedDecoder {
    max_len: usize,
    /// Length of the message whose prefix was already consumed; kept so a large
    /// message arriving in many reads does not re-parse the prefix each time.
    pending_len: Option<usize>,
}

impl LengthPrefixedDecoder {
    /// `max_len` bounds a single message; larger declared lengths are rejected
    /// as soon as the prefix arrives, before any of the body is buffered.
    pub fn new(max_len: usize) -> Self {
        Self {
            max_len,
            pending_len: None,
        }
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Returns the next whole message, split off `buf` without copying, or
    /// `Ok(None)` when more bytes are needed. After an error the stream is out of
    /// sync and the connection should be closed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, LengthPrefixedError> {
        let len = match self.pending_len {
            Some(len) => len,
            None => {
                if buf.len() < PREFIX_LEN {
                    return Ok(None);
                }
                let declared = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                let len = usize::try_from(declared).unwrap_or(usize::MAX);
                if len > self.max_len {
                    return Err(LengthPrefixedError::MessageTooLarge {
                        len: u64::from(declared),
                        max: self.max_len,
                    });
                }
                buf.advance(PREFIX_LEN);
                self.pending_len = Some(len);
                len
            }
        };
        if buf.len() < len {
            // Make room once so the caller's next reads land without regrowing.
            buf.reserve(len - buf.len());
            return Ok(None);
        }
        self.pending_len = None;
        Ok(Some(buf.split_to(len).freeze()))
    }
}

/// The 4-byte prefix for a message of `len` bytes, for vectored sends that keep
/// the payload in its own buffer.
pub fn encode_prefix(len: usize) -> Result<[u8; PREFIX_LEN], LengthPrefixedError> {
    u32::try_from(len)
        .map(u32::to_le_bytes)
        .map_err(|_| LengthPrefixedError::MessageTooLarge {
            len: len as u64,
            max: u32::MAX as usize,
        })
}

/// Appends prefix and payload to `dst`.
pub fn encode(payload: &[u8], dst: &mut BytesMut) -> Result<(), LengthPrefixedError> {
    let prefix = encode_prefix(payload.len())?;
    dst.reserve(PREFIX_LEN + payload.len());
    dst.put_slice(&prefix);
    dst.put_slice(payload);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_single_message() {
        let mut buf = BytesMut::new();
        encode(b"hello", &mut buf).unwrap();
        assert_eq!(&buf[..4], &5u32.to_le_bytes());
        let mut dec = LengthPrefixedDecoder::new(1024);
        assert_eq!(dec.decode(&mut buf).unwrap().unwrap(), &b"hello"[..]);
        assert!(buf.is_empty());
        assert_eq!(dec.decode(&mut buf).unwrap(), None);
    }

    #[test]
    fn empty_message_is_valid() {
        let mut buf = BytesMut::new();
        encode(b"", &mut buf).unwrap();
        let mut dec = LengthPrefixedDecoder::new(0);
        assert_eq!(dec.decode(&mut buf).unwrap().unwrap().len(), 0);
    }

    #[test]
    fn byte_at_a_time() {
        let mut wire = BytesMut::new();
        encode(b"abc", &mut wire).unwrap();
        encode(b"defgh", &mut wire).unwrap();
        let mut dec = LengthPrefixedDecoder::new(16);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for &b in wire.iter() {
            buf.put_u8(b);
            while let Some(msg) = dec.decode(&mut buf).unwrap() {
                out.push(msg);
            }
        }
        assert_eq!(
            out,
            vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defgh")]
        );
    }

    #[test]
    fn oversize_rejected_from_prefix_alone() {
        let mut buf = BytesMut::from(&100u32.to_le_bytes()[..]);
        let mut dec = LengthPrefixedDecoder::new(99);
        assert_eq!(
            dec.decode(&mut buf),
            Err(LengthPrefixedError::MessageTooLarge { len: 100, max: 99 })
        );
    }

    #[test]
    fn prefix_for_vectored_send() {
        assert_eq!(encode_prefix(258).unwrap(), [2, 1, 0, 0]);
    }
}
