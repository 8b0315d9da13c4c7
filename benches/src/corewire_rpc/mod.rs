//! corewire's own RPC framework as a benchmark peer: an echo [`Service`] served on corewire
//! shards, and a closed-loop client built on corewire's pipelining [`corewire::Client`], with the
//! same timeline, histograms and JSON report as `loadgen` and the tonic peer.

pub mod budget;
pub mod client;
pub mod server;

use corewire::{service_id, Request, Response, Service, Status};

/// Returns each request's payload as the response (like the tonic peer's `Echo/Echo`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Echo;

/// The method clients call on [`Echo`].
pub const ECHO_METHOD: u32 = 0;

impl Service for Echo {
    const ID: u32 = service_id("corewire.bench.Echo");

    async fn call(&self, req: Request) -> Result<Response, Status> {
        // The payload is a slice of the connection's read buffer: echoing it copies nothing,
        // as the raw echo servers do.
        Ok(Response::new(req.payload))
    }
}
