//! gRPC (tonic) unary echo: the RPC peer corewire's RPC layer is compared against.

pub mod client;
pub mod message;
pub mod server;

/// Generated service and client glue (see build.rs).
#[allow(clippy::all, missing_docs, unreachable_pub)]
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/corewire.bench.Echo.rs"));
}
