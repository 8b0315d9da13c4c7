//! A tokio-util `LengthDelimitedCodec` echo server on corewire: `Framed` over a ring stream
//! through the `tokio::io` adapter (`compat::Compat`), one connection per task, every shard.
//!
//!     cargo run --release --example codec_echo -- [ADDR]
//!
//! Frames are a 4-byte big-endian length and that many bytes; each comes back unchanged.
//! Without ADDR it serves on a free port, sends itself a few frames and exits.

use std::io::{Read, Write};
use std::net::SocketAddr;

use clap::Parser;
use corewire::runtime::accept::Accepted;
use corewire::runtime::compat::Compat;
use corewire::Runtime;
use corewire::TcpEndpoint;
use futures_util::{SinkExt, StreamExt};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

async fn echo(conn: Accepted) {
    let codec = LengthDelimitedCodec::builder()
        .max_frame_length(1 << 20)
        .new_codec();
    let mut framed = Framed::new(Compat::new(conn.stream), codec);
    while let Some(frame) = framed.next().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                // Oversized or truncated frame: close this connection only.
                tracing::info!(error = %e, "closing a connection");
                return;
            }
        };
        if framed.send(frame.freeze()).await.is_err() {
            return;
        }
    }
}

#[derive(Parser)]
#[command(
    name = "codec_echo",
    about = "A LengthDelimitedCodec echo server on corewire"
)]
struct Cli {
    /// Serve here until SIGINT/SIGTERM (without it: a free port, a self-test, exit).
    addr: Option<SocketAddr>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt::init();
    let addr = Cli::parse().addr;
    let rt = Runtime::builder().build()?;
    let bind = addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let server = TcpEndpoint::bind(bind).serve(&rt, echo)?;
    println!("codec echo on {}", server.local_addr());
    if addr.is_some() {
        let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])?;
        signals.forever().next();
    } else {
        let mut client = std::net::TcpStream::connect(server.local_addr())?;
        for msg in ["hello", "length", "delimited"] {
            client.write_all(&(msg.len() as u32).to_be_bytes())?;
            client.write_all(msg.as_bytes())?;
            let mut len = [0u8; 4];
            client.read_exact(&mut len)?;
            let mut back = vec![0u8; u32::from_be_bytes(len) as usize];
            client.read_exact(&mut back)?;
            println!("echoed {:?}", String::from_utf8_lossy(&back));
            assert_eq!(back, msg.as_bytes());
        }
    }
    server.stop();
    rt.shutdown();
    Ok(())
}
