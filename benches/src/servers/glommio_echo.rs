//! Echo server on glommio: one executor per shard (pinned with `MaxSpread` unless asked not to),
//! each with its own listener. glommio's `TcpListener::bind` sets SO_REUSEPORT itself
//! (glommio 0.9 `net/tcp_socket.rs`), so the kernel spreads connections across shards.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorPoolBuilder, PoolPlacement};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::print_stats;
use crate::echo_buffer::EchoBuffer;
use crate::frame::MAX_PAYLOAD;
use crate::stats_line::ShardCounters;

/// Server parameters.
#[derive(Debug, Clone)]
pub struct GlommioEchoConfig {
    pub addr: SocketAddr,
    pub shards: usize,
    /// Pin each executor to its own CPU.
    pub pin: bool,
}

/// Why the server could not run.
#[derive(Debug)]
pub enum GlommioEchoError {
    Signals(io::Error),
    Executors(String),
}

impl fmt::Display for GlommioEchoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlommioEchoError::Signals(e) => write!(f, "cannot hook SIGTERM: {e}"),
            GlommioEchoError::Executors(e) => write!(f, "cannot start glommio executors: {e}"),
        }
    }
}

impl std::error::Error for GlommioEchoError {}

/// Runs until SIGTERM or SIGINT, then prints per-shard stats and exits the process with 0
/// (glommio executors have no external stop signal, so the process ends them).
pub fn run(cfg: &GlommioEchoConfig) -> Result<(), GlommioEchoError> {
    let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(GlommioEchoError::Signals)?;
    let shards = cfg.shards.max(1);
    let counters: Arc<Vec<ShardCounters>> =
        Arc::new((0..shards).map(|_| ShardCounters::default()).collect());
    let next_shard = Arc::new(AtomicUsize::new(0));
    let placement = if cfg.pin {
        PoolPlacement::MaxSpread(shards, None)
    } else {
        PoolPlacement::Unbound(shards)
    };
    let addr = cfg.addr;
    let shard_counters = Arc::clone(&counters);
    let _executors = LocalExecutorPoolBuilder::new(placement)
        .on_all_shards(move || async move {
            let shard = next_shard.fetch_add(1, Ordering::Relaxed);
            shard_main(addr, shard, shard_counters).await
        })
        .map_err(|e| GlommioEchoError::Executors(e.to_string()))?;
    eprintln!(
        "echo_glommio: listening on {addr} (shards={shards}, pinned={})",
        cfg.pin
    );
    // Blocks until a signal; other threads keep serving meanwhile.
    let _ = signals.forever().next();
    print_stats(&counters);
    std::process::exit(0);
}

async fn shard_main(addr: SocketAddr, shard: usize, counters: Arc<Vec<ShardCounters>>) {
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("echo_glommio: shard {shard}: bind {addr}: {e}");
            return;
        }
    };
    loop {
        match listener.accept().await {
            Ok(stream) => {
                counters[shard].accepted();
                let counters = Arc::clone(&counters);
                glommio::spawn_local(async move {
                    if let Err(e) = echo(stream).await {
                        tracing::debug!("echo_glommio: connection ended: {e}");
                    }
                    counters[shard].closed();
                })
                .detach();
            }
            Err(e) => {
                eprintln!("echo_glommio: shard {shard}: accept: {e}");
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }
}

/// Echoes complete frames until the peer closes or sends an oversized frame.
async fn echo(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = EchoBuffer::new(MAX_PAYLOAD);
    loop {
        let n = stream.read(buf.read_space()).await?;
        if n == 0 {
            return Ok(());
        }
        buf.filled(n);
        let ready = buf
            .ready()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if !ready.is_empty() {
            let len = ready.len();
            stream.write_all(ready).await?;
            buf.echoed(len);
        }
    }
}
