//! gRPC over HTTP/2 on every shard: hyper's HTTP/2 server per connection, on the shard that
//! accepted it (its I/O through the ring, `runtime::compat`), answering with the same service
//! instances corewire's framing reaches.
//!
//! What a gRPC client gets: unary and server-streaming calls by their full names
//! (`/package.Service/Method`; an unknown one is `UNIMPLEMENTED`); `grpc-timeout` as the
//! call's deadline (the handler is dropped and the call ends `DEADLINE_EXCEEDED` when it
//! passes); cancellation when the client resets the stream (hyper drops the handler's future);
//! custom metadata in (request headers) and out (response headers); gzip messages from a
//! client that sends `grpc-encoding: gzip`, and gzip replies to it (or to every client that
//! accepts gzip, with [`GrpcOptions::compress_responses`]); `grpc-status` and `grpc-message`
//! trailers carrying the [`Status`](crate::Status) the service returned, one gRPC code per
//! status ([`Code`](corewire_transport::grpc::Code)).
//!
//! A malformed gRPC message (bad flag, over the size limit, cut short, bad gzip) fails its
//! call with `INTERNAL`, and a request protobuf that does not decode with `INVALID_ARGUMENT`;
//! each is counted in the shard's `protocol_errors` and logged as a sample, and the
//! connection's other streams go on.
//!
//! A server-streaming handler runs inside the response body: it runs only as fast as HTTP/2's
//! flow control lets the body send, so a client that stops reading stops the handler with one
//! message waiting (bounded, like corewire's own framing).

mod body;
mod call;
mod headers;

use std::io;

use corewire_runtime::accept::{Accepted, ListenerHandle, TcpEndpoint};
use corewire_runtime::compat::hyper::{LocalExecutor, Timer};
use corewire_runtime::compat::Compat;
use corewire_runtime::Runtime;
use hyper::server::conn::http2;

use crate::service::Server;

pub use body::GrpcBody;

/// gRPC settings of a server ([`ServerOptions::grpc`](crate::service::ServerOptions)).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct GrpcOptions {
    /// Largest message accepted, after decompression (default 4 MiB, gRPC's usual limit).
    pub max_message_len: usize,
    /// Gzip every reply to a client whose `grpc-accept-encoding` lists gzip (default false:
    /// only to clients that send gzip themselves).
    pub compress_responses: bool,
    /// Streams a client may have open on one connection (default 1024).
    pub max_concurrent_streams: u32,
}

impl Default for GrpcOptions {
    fn default() -> Self {
        GrpcOptions {
            max_message_len: 4 << 20,
            compress_responses: false,
            max_concurrent_streams: 1024,
        }
    }
}

impl Server {
    /// Serve gRPC over HTTP/2 (cleartext, "h2c" with prior knowledge, as gRPC clients speak
    /// it without TLS) on `endpoint`, on every shard: the services registered with names
    /// (generated from a `.proto` file) answer by those names. Serve corewire's framing
    /// beside it with [`serve`](Server::serve); the same instances answer both.
    pub fn serve_grpc(&self, rt: &Runtime, endpoint: TcpEndpoint) -> io::Result<ListenerHandle> {
        let server = self.clone();
        endpoint.serve(rt, move |conn: Accepted| {
            let server = server.clone();
            async move { serve_connection(server, conn).await }
        })
    }
}

async fn serve_connection(server: Server, conn: Accepted) {
    let options = server.options().grpc;
    let service = call::GrpcService::new(server, conn.peer);
    let mut builder = http2::Builder::new(LocalExecutor);
    builder
        .timer(Timer)
        .auto_date_header(false)
        .max_concurrent_streams(options.max_concurrent_streams);
    let served = builder
        .serve_connection(Compat::new(conn.stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(peer = ?conn.peer, error = %e, "gRPC connection ended with an error");
    }
}
