/// Size limits a peer enforces on frames. Both sides should agree; the decoder
/// rejects violations before buffering the offending bytes, and the encoder
/// refuses to produce frames the peer would reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameLimits {
    /// Largest flatbuffer header, in bytes (preamble not included).
    pub max_header_len: usize,
    /// Largest payload + attachment of one frame, in bytes.
    pub max_body_len: usize,
}

impl FrameLimits {
    /// Default [`FrameLimits::max_header_len`] (1 KiB).
    pub const DEFAULT_MAX_HEADER_LEN: usize = 1024;
    /// Default [`FrameLimits::max_body_len`] (16 MiB).
    pub const DEFAULT_MAX_BODY_LEN: usize = 16 * 1024 * 1024;

    /// Limits of `max_header_len` header bytes and `max_body_len` body bytes.
    pub const fn new(max_header_len: usize, max_body_len: usize) -> FrameLimits {
        FrameLimits {
            max_header_len,
            max_body_len,
        }
    }
}

impl Default for FrameLimits {
    fn default() -> Self {
        Self {
            max_header_len: Self::DEFAULT_MAX_HEADER_LEN,
            max_body_len: Self::DEFAULT_MAX_BODY_LEN,
        }
    }
}
