//! corewire's wire formats, sans-I/O: plain state machines over bytes, with no sockets,
//! clocks or runtime (time is passed in by the caller). Every transport (`corewire-transport`:
//! TCP, RDMA, in-memory) and the benchmarks share this one copy.
//!
//! - [`frame`]: the RPC frame codec (preamble, flatbuffers header, payload, attachment).
//! - [`rpc`]: RPC call state on a connection (which calls are in flight, how replies are formed).
//! - [`grpc`]: gRPC's message framing, status codes, `grpc-timeout` and gzip.
//! - [`length_prefixed`]: the raw-echo codec (u32 little-endian length, then the payload).

#![deny(missing_docs)]

pub mod frame;
pub mod grpc;
pub mod length_prefixed;
pub mod rpc;
