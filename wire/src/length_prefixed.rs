//! Raw echo framing used by the benchmarks: a `u32` little-endian length, then
//! that many payload bytes. No header, no versioning: it exists to measure the
//! transport, not the RPC layer.
//!
//! Two ways to read it: [`LengthPrefixedDecoder`] splits whole messages off a `BytesMut`
//! (the transport's raw connections), and [`payload_len`] / [`complete_prefix`] look at a
//! plain byte slice (echo servers that send whole frames back without copying them out).

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes in the length prefix.
pub const PREFIX_LEN: usize = 4;

/// Failure to frame or unframe a length-prefixed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LengthPrefixedError {
    /// The message (declared by a peer, or handed to the encoder) exceeds the limit.
    MessageTooLarge {
        /// The message's length.
        len: u64,
        /// The limit.
        max: usize,
    },
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

    /// The largest message this decoder accepts.
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

/// Payload length announced by the prefix at the start of `buf`: `None` until the prefix is
/// complete, an error when it is over `max`.
pub fn payload_len(buf: &[u8], max: usize) -> Option<Result<usize, LengthPrefixedError>> {
    let prefix: [u8; PREFIX_LEN] = buf.get(..PREFIX_LEN)?.try_into().ok()?;
    let declared = u32::from_le_bytes(prefix);
    let len = usize::try_from(declared).unwrap_or(usize::MAX);
    Some(if len > max {
        Err(LengthPrefixedError::MessageTooLarge {
            len: u64::from(declared),
            max,
        })
    } else {
        Ok(len)
    })
}

/// Length of the longest prefix of `buf` that consists of complete messages.
///
/// Errors as soon as any prefix (complete or not yet followed by its payload) is over `max`,
/// so a peer can close without waiting for 4 GiB that it would refuse anyway.
pub fn complete_prefix(buf: &[u8], max: usize) -> Result<usize, LengthPrefixedError> {
    let mut at = 0;
    while let Some(len) = payload_len(&buf[at..], max) {
        let end = at + PREFIX_LEN + len?;
        if end > buf.len() {
            break;
        }
        at = end;
    }
    Ok(at)
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

    fn message(payload: &[u8]) -> Vec<u8> {
        let mut v = encode_prefix(payload.len()).unwrap().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn complete_prefix_finds_whole_messages_and_stops_at_partial_ones() {
        let mut buf = message(b"hello");
        buf.extend(message(b""));
        let whole = buf.len();
        buf.extend(message(b"partial")[..6].iter());
        assert_eq!(complete_prefix(&buf, 1 << 20), Ok(whole));
        assert_eq!(complete_prefix(&buf[..3], 1 << 20), Ok(0));
        assert_eq!(complete_prefix(&[], 1 << 20), Ok(0));
    }

    #[test]
    fn complete_prefix_rejects_oversized_prefixes_before_their_payload() {
        let mut buf = message(b"ok");
        buf.extend_from_slice(&encode_prefix(100).unwrap());
        assert_eq!(
            complete_prefix(&buf, 99),
            Err(LengthPrefixedError::MessageTooLarge { len: 100, max: 99 })
        );
        assert_eq!(payload_len(&encode_prefix(99).unwrap(), 99), Some(Ok(99)));
        assert_eq!(payload_len(&[1, 2], 99), None);
    }

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
