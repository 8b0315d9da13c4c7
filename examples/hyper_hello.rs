//! HTTP/1.1 hello world: hyper's `http1` server on every corewire shard, each connection
//! served on the shard that accepted it, its I/O through the ring (`compat::Compat`).
//!
//!     cargo run --release --example hyper_hello -- [ADDR] [SHARDS]
//!     curl http://127.0.0.1:8080/
//!
//! Defaults: 127.0.0.1:8080, one shard per CPU. Stops on Ctrl-C.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use corewire::runtime::accept::Accepted;
use corewire::runtime::compat::{hyper::Timer, Compat};
use corewire::Runtime;
use corewire::TcpEndpoint;
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn, Request, Response};

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!\n",
    ))))
}

#[derive(Parser)]
#[command(
    name = "hyper_hello",
    about = "HTTP/1.1 hello world: hyper on every corewire shard"
)]
struct Cli {
    #[arg(default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Shards (default: one per CPU).
    shards: Option<usize>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt::init();
    let Cli { addr, shards } = Cli::parse();
    let mut builder = Runtime::builder();
    if let Some(shards) = shards {
        builder = builder.shards(shards);
    }
    let rt = builder.build()?;
    let server = TcpEndpoint::bind(addr).serve(&rt, |conn: Accepted| async move {
        let served = http1::Builder::new()
            .timer(Timer)
            // A client that opens a connection and says nothing is closed.
            .header_read_timeout(Duration::from_secs(10))
            .serve_connection(Compat::new(conn.stream), service_fn(hello))
            .await;
        if let Err(e) = served {
            tracing::debug!(error = %e, "connection ended with an error");
        }
    })?;
    println!(
        "hyper on corewire: http://{} ({} shards)",
        server.local_addr(),
        rt.shard_count()
    );
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])?;
    signals.forever().next();
    server.stop();
    rt.shutdown();
    Ok(())
}
