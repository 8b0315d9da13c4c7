use std::fmt;

/// Why a frame could not be decoded or encoded. Any decode error leaves the
/// byte stream out of sync: the connection should be closed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The stream does not start with `b"CW"` (the bytes seen so far; a missing
    /// second byte reads as 0).
    BadMagic([u8; 2]),
    /// Preamble or header carries a version this build does not speak.
    UnsupportedVersion(u8),
    /// Preamble flags other than 0.
    UnsupportedFlags(u8),
    /// Declared (decode) or built (encode) header exceeds `FrameLimits::max_header_len`.
    HeaderTooLarge {
        /// The header's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The header is not a valid `WireHeader` flatbuffer; what is wrong with it.
    InvalidHeader(String),
    /// The header's frame kind is not one this build knows.
    UnknownKind(u8),
    /// The header's status code is not one this build knows.
    UnknownStatus(u8),
    /// Payload + attachment exceed `FrameLimits::max_body_len` (or a length does
    /// not fit the wire's `u32`).
    FrameTooLarge {
        /// The body's length.
        len: u64,
        /// The limit.
        max: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMagic(found) => write!(f, "bad frame magic {found:02x?}, expected \"CW\""),
            Self::UnsupportedVersion(v) => write!(f, "unsupported frame version {v}"),
            Self::UnsupportedFlags(flags) => write!(f, "unsupported frame flags {flags:#04x}"),
            Self::HeaderTooLarge { len, max } => {
                write!(f, "frame header of {len} bytes exceeds limit of {max}")
            }
            Self::InvalidHeader(why) => write!(f, "invalid frame header: {why}"),
            Self::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            Self::UnknownStatus(s) => write!(f, "unknown status code {s}"),
            Self::FrameTooLarge { len, max } => {
                write!(f, "frame body of {len} bytes exceeds limit of {max}")
            }
        }
    }
}

impl std::error::Error for FrameError {}
