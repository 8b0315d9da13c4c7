//! The binary protocol: KV commands as flatbuffers (`schema/kv.fbs`) over corewire RPC frames,
//! so any [`corewire::transport::Connection`] (TCP today, RDMA later) can carry them.
//!
//! - [`request`]: encode requests (client) and decode them into [`crate::Command`]s (server).
//! - [`response`]: encode a command's [`crate::Reply`] (server) and decode it (client).
//! - [`KvService`]: the [`corewire::Service`] that executes them on the owning shard.

pub mod request;
pub mod response;
mod service;

#[allow(
    unsafe_code,
    unused_imports,
    dead_code,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    deprecated,
    missing_docs,
    mismatched_lifetime_syntaxes,
    clippy::all,
    clippy::pedantic
)]
#[rustfmt::skip]
mod kv_generated;

use std::fmt;

pub use kv_generated::corewire_kv::wire;
pub use service::{serve_connection, KvService};

/// The id the KV service is addressed by in RPC frames.
pub const SERVICE_ID: u32 = corewire::service_id("corewire-kv");

/// A payload that is not the flatbuffer its method expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    UnknownMethod(u32),
    /// The flatbuffer failed verification, or a required field is missing.
    Malformed(String),
    /// The response does not have the shape its method promises.
    UnexpectedReply(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::UnknownMethod(method) => write!(f, "unknown KV method {method}"),
            WireError::Malformed(why) => write!(f, "malformed KV message: {why}"),
            WireError::UnexpectedReply(what) => write!(f, "unexpected KV reply: {what}"),
        }
    }
}

impl std::error::Error for WireError {}

impl From<flatbuffers::InvalidFlatbuffer> for WireError {
    fn from(error: flatbuffers::InvalidFlatbuffer) -> Self {
        WireError::Malformed(error.to_string())
    }
}

/// A finished flatbuffer as `Bytes`, without copying it out of the builder.
fn finish<T>(
    mut builder: flatbuffers::FlatBufferBuilder<'_>,
    root: flatbuffers::WIPOffset<T>,
) -> bytes::Bytes {
    builder.finish_minimal(root);
    let (buffer, head) = builder.collapse();
    bytes::Bytes::from(buffer).slice(head..)
}
