//! The RPC frame codec.
//!
//! Wire layout of one frame:
//!
//! ```text
//! +------+---------+-------+----------------+-----------------+---------+------------+
//! | "CW" | version | flags | header_len u32 | header          | payload | attachment |
//! | 2 B  | u8 = 1  | u8 =0 | little endian  | flatbuffer      |         |            |
//! +------+---------+-------+----------------+-----------------+---------+------------+
//!  \______________ 8-byte preamble ________/   header_len B    lengths come from header
//! ```
//!
//! The header schema is `transport/schema/frame.fbs`; every received header goes
//! through the flatbuffers verifier with tight limits before any field is read.
//! Payload and attachment are opaque: the payload is the serialized message, the
//! attachment is bulk data kept separate so it can be sent/received without copies.

mod decoder;
mod encoder;
mod error;
mod header;
mod limits;
mod preamble;

#[allow(
    unsafe_code,
    unused_imports,
    dead_code,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    deprecated,
    missing_docs,
    clippy::all,
    clippy::pedantic
)]
#[rustfmt::skip]
mod header_generated;

pub use decoder::{Frame, FrameDecoder};
pub use encoder::FrameEncoder;
pub use error::FrameError;
pub use header::{FrameHeader, FrameKind, StatusCode};
pub use limits::FrameLimits;
pub use preamble::{FLAGS, MAGIC, PREAMBLE_LEN, VERSION};

#[cfg(test)]
mod tests;
