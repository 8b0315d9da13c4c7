//! Echo server on tokio's multi-thread runtime, or (`--current-thread`) on one current-thread
//! runtime: the per-core peer.
//!
//! `--accept reuseport` binds one SO_REUSEPORT listener per worker (each with its own accept
//! task; tokio still schedules connections on any worker); `handoff` binds one listener. The
//! `stats shard=i` lines count per listener.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::signal::unix::{signal, SignalKind};

use super::accept_mode::AcceptMode;
use super::print_stats;
use crate::echo_buffer::EchoBuffer;
use crate::frame::MAX_PAYLOAD;
use crate::stats_line::ShardCounters;

/// Server parameters.
#[derive(Debug, Clone)]
pub struct TokioEchoConfig {
    pub addr: SocketAddr,
    pub workers: usize,
    pub accept: AcceptMode,
    /// One current-thread runtime (the per-core peer) instead of `workers` worker threads.
    pub current_thread: bool,
    /// Serve corewire's RPC framing (the Echo service, [`super::tokio_rpc`]) instead of raw
    /// echo frames.
    pub rpc: bool,
}

/// Runs until SIGTERM or SIGINT, then prints per-listener stats.
pub fn run(cfg: &TokioEchoConfig) -> io::Result<()> {
    let runtime = if cfg.current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.workers.max(1))
            .enable_all()
            .build()?
    };
    runtime.block_on(serve_until_signal(cfg))
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn serve_until_signal(cfg: &TokioEchoConfig) -> io::Result<()> {
    // Signals are hooked before listening, so a SIGTERM sent as soon as the port is up is
    // never lost to the default action.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let listeners = match cfg.accept {
        AcceptMode::Reuseport if cfg.current_thread => 1,
        AcceptMode::Reuseport => cfg.workers.max(1),
        AcceptMode::Handoff => 1,
    };
    let counters: Arc<Vec<ShardCounters>> =
        Arc::new((0..listeners).map(|_| ShardCounters::default()).collect());
    for shard in 0..listeners {
        let listener = bind(cfg.addr)?;
        tokio::spawn(accept_loop(listener, Arc::clone(&counters), shard, cfg.rpc));
    }
    eprintln!(
        "echo_tokio: listening on {} (workers={}, accept={}, current_thread={}, rpc={})",
        cfg.addr, cfg.workers, cfg.accept, cfg.current_thread, cfg.rpc
    );
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    print_stats(&counters);
    Ok(())
}

async fn accept_loop(
    listener: TcpListener,
    counters: Arc<Vec<ShardCounters>>,
    shard: usize,
    rpc: bool,
) {
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                counters[shard].accepted();
                let counters = Arc::clone(&counters);
                tokio::spawn(async move {
                    let served = if rpc {
                        super::tokio_rpc::serve(stream).await
                    } else {
                        echo(stream).await
                    };
                    if let Err(e) = served {
                        tracing::debug!("echo_tokio: connection ended: {e}");
                    }
                    counters[shard].closed();
                });
            }
            // Usually EMFILE under an accept storm: keep serving existing connections.
            Err(e) => {
                eprintln!("echo_tokio: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
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
