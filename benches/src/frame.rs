//! Raw-echo framing: each message is a u32 little-endian payload length followed by the payload.
//!
//! Servers echo whole frames back unchanged, so they only need to know where complete frames end;
//! they never copy payloads into separate messages.

use std::fmt;

/// Bytes in a frame header.
pub const HEADER_LEN: usize = 4;

/// Largest payload a peer accepts before closing the connection (16 MiB).
pub const MAX_PAYLOAD: usize = 16 << 20;

/// A frame that a peer must refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The header announced a payload larger than the limit.
    TooLarge { len: usize, max: usize },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len, max } => {
                write!(
                    f,
                    "frame payload of {len} bytes exceeds the {max}-byte limit"
                )
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Payload length announced by the header at the start of `buf`, if the header is complete.
pub fn payload_len(buf: &[u8], max: usize) -> Option<Result<usize, FrameError>> {
    let header: [u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
    let len = u32::from_le_bytes(header) as usize;
    Some(if len > max {
        Err(FrameError::TooLarge { len, max })
    } else {
        Ok(len)
    })
}

/// Length of the longest prefix of `buf` that consists of complete frames.
///
/// Errors as soon as any header (complete or not yet followed by its payload) is over `max`, so
/// a peer can close without waiting for 4 GiB that it would refuse anyway.
pub fn complete_prefix(buf: &[u8], max: usize) -> Result<usize, FrameError> {
    let mut at = 0;
    while let Some(len) = payload_len(&buf[at..], max) {
        let end = at + HEADER_LEN + len?;
        if end > buf.len() {
            break;
        }
        at = end;
    }
    Ok(at)
}

/// Writes the header for a `len`-byte payload.
pub fn header(len: usize) -> [u8; HEADER_LEN] {
    // Callers never build frames over MAX_PAYLOAD, which fits in u32.
    (len as u32).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = header(payload.len()).to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn finds_complete_frames_and_stops_at_partial_ones() {
        let mut buf = frame(b"hello");
        buf.extend(frame(b""));
        let whole = buf.len();
        buf.extend(frame(b"partial")[..6].iter());
        assert_eq!(complete_prefix(&buf, MAX_PAYLOAD), Ok(whole));
        assert_eq!(complete_prefix(&buf[..3], MAX_PAYLOAD), Ok(0));
        assert_eq!(complete_prefix(&[], MAX_PAYLOAD), Ok(0));
    }

    #[test]
    fn rejects_oversized_headers_before_their_payload_arrives() {
        let mut buf = frame(b"ok");
        buf.extend_from_slice(&header(100));
        assert_eq!(
            complete_prefix(&buf, 99),
            Err(FrameError::TooLarge { len: 100, max: 99 })
        );
        assert_eq!(payload_len(&header(99), 99), Some(Ok(99)));
        assert_eq!(payload_len(&[1, 2], 99), None);
    }
}
