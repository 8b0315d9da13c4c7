//! Raw-echo framing: each message is a u32 little-endian payload length followed by the payload
//! (`corewire_wire::length_prefixed`, the transport's own codec; this module only adds the
//! benchmarks' limit and an infallible header for payloads under it).
//!
//! Servers echo whole frames back unchanged, so they only need to know where complete frames end;
//! they never copy payloads into separate messages.

pub use corewire_wire::length_prefixed::{
    complete_prefix, encode_prefix, payload_len, LengthPrefixedError as FrameError,
    PREFIX_LEN as HEADER_LEN,
};

/// Largest payload a peer accepts before closing the connection (16 MiB).
pub const MAX_PAYLOAD: usize = 16 << 20;

/// Writes the header for a `len`-byte payload (at most [`MAX_PAYLOAD`]).
pub fn header(len: usize) -> [u8; HEADER_LEN] {
    encode_prefix(len).expect("benchmark payloads are at most MAX_PAYLOAD, which fits in u32")
}
