//! What the two ends tell each other in rdma_cm private data when connecting, sans-I/O.

use std::fmt;

const MAGIC: [u8; 4] = *b"CWR1";
pub const HANDSHAKE_LEN: usize = 12;

/// Each side's receive window and receive buffer size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    /// Data messages the sender of this handshake accepts before returning credits.
    pub window: u32,
    /// Bytes each of its receive buffers holds: the largest message the peer may send.
    pub chunk_size: u32,
}

/// Why a peer's handshake (rdma_cm private data) was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeError {
    /// Fewer bytes than a handshake (how many).
    TooShort(usize),
    /// Not a corewire handshake.
    BadMagic,
    /// A corewire handshake with values out of range (which).
    Invalid(&'static str),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::TooShort(n) => {
                write!(f, "handshake of {n} bytes, need {HANDSHAKE_LEN}")
            }
            HandshakeError::BadMagic => f.write_str("peer is not a corewire RDMA endpoint"),
            HandshakeError::Invalid(why) => write!(f, "invalid handshake: {why}"),
        }
    }
}

impl std::error::Error for HandshakeError {}

impl Handshake {
    pub fn encode(&self) -> [u8; HANDSHAKE_LEN] {
        let mut out = [0u8; HANDSHAKE_LEN];
        out[..4].copy_from_slice(&MAGIC);
        out[4..8].copy_from_slice(&self.window.to_le_bytes());
        out[8..12].copy_from_slice(&self.chunk_size.to_le_bytes());
        out
    }

    /// Private data may be padded by the transport: trailing bytes are ignored.
    pub fn decode(bytes: &[u8]) -> Result<Handshake, HandshakeError> {
        if bytes.len() < HANDSHAKE_LEN {
            return Err(HandshakeError::TooShort(bytes.len()));
        }
        if bytes[..4] != MAGIC {
            return Err(HandshakeError::BadMagic);
        }
        let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let h = Handshake {
            window: word(4),
            chunk_size: word(8),
        };
        if h.window == 0 || h.window > 4096 {
            return Err(HandshakeError::Invalid("window out of range"));
        }
        if h.chunk_size < 64 || h.chunk_size > (1 << 20) {
            return Err(HandshakeError::Invalid("chunk size out of range"));
        }
        Ok(h)
    }
}

const REJECT_MAGIC: [u8; 4] = *b"CWRJ";

/// Rejection private data: the reason, so the client's error says why it was refused
/// (rdma_cm otherwise reports only a numeric reject code). Cut to `max_len` bytes at a
/// character boundary; the reason is NUL-terminated, as the transport pads with zeros.
pub fn encode_reject(reason: &str, max_len: usize) -> Vec<u8> {
    let room = max_len.saturating_sub(REJECT_MAGIC.len() + 1);
    let mut end = reason.len().min(room);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = REJECT_MAGIC.to_vec();
    out.extend_from_slice(&reason.as_bytes()[..end]);
    out.push(0);
    out
}

/// The reason of a rejection sent by [`encode_reject`]; `None` for anything else.
pub fn decode_reject(bytes: &[u8]) -> Option<String> {
    let text = bytes.strip_prefix(&REJECT_MAGIC)?;
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    Some(String::from_utf8_lossy(&text[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reject_reasons_survive_padding_and_truncation() {
        let mut wire = encode_reject("completion queue full", 148);
        wire.resize(148, 0);
        assert_eq!(
            decode_reject(&wire).as_deref(),
            Some("completion queue full")
        );
        let long = "é".repeat(200);
        let wire = encode_reject(&long, 148);
        assert!(wire.len() <= 148);
        let back = decode_reject(&wire).unwrap();
        assert!(long.starts_with(&back) && !back.is_empty());
        assert_eq!(decode_reject(b"nope"), None);
        assert_eq!(decode_reject(&[]), None);
    }

    #[test]
    fn roundtrip_with_padding() {
        let h = Handshake {
            window: 32,
            chunk_size: 8192,
        };
        let mut bytes = h.encode().to_vec();
        bytes.extend_from_slice(&[0; 40]);
        assert_eq!(Handshake::decode(&bytes), Ok(h));
    }

    #[test]
    fn rejects_foreign_and_absurd_peers() {
        assert_eq!(
            Handshake::decode(b"short"),
            Err(HandshakeError::TooShort(5))
        );
        assert_eq!(Handshake::decode(&[0u8; 12]), Err(HandshakeError::BadMagic));
        let bad = Handshake {
            window: 0,
            chunk_size: 8192,
        };
        assert!(Handshake::decode(&bad.encode()).is_err());
        let bad = Handshake {
            window: 8,
            chunk_size: 1 << 30,
        };
        assert!(Handshake::decode(&bad.encode()).is_err());
    }
}
