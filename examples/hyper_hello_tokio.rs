//! The benchmark peer of `hyper_hello`: the same hyper `http1` hello world on tokio's
//! current-thread runtime (one worker thread, epoll). Same response, same hyper settings.
//!
//!     cargo run --release --example hyper_hello_tokio -- [ADDR]
//!
//! See BENCHMARKS.md ("hyper on corewire vs hyper on tokio") for the commands that compare
//! the two with `wrk`, one vCPU each for server and load generator.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!\n",
    ))))
}

#[derive(Parser)]
#[command(
    name = "hyper_hello_tokio",
    about = "hyper_hello's peer: hyper on tokio's current-thread runtime"
)]
struct Cli {
    #[arg(default_value = "127.0.0.1:8081")]
    addr: std::net::SocketAddr,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = Cli::parse().addr;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!(
            "hyper on tokio (current thread): http://{}",
            listener.local_addr()?
        );
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(TokioIo::new(stream), service_fn(hello))
                    .await;
            });
        }
    })
}
