//! The corewire RPC echo server: `shards` corewire shards serving [`Echo`] over TCP, stopped by
//! SIGTERM, after which it prints the per-shard `stats` lines benchctl reads (and the runtime's
//! own counters, for investigation).

use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;

use corewire::{Budget, Runtime, Server};
use corewire_runtime::accept::{AcceptMode as CoreAcceptMode, Placement, TcpEndpoint};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::Echo;
use crate::servers::accept_mode::AcceptMode;
use crate::stats_line::ShardLine;

/// Server parameters.
#[derive(Debug, Clone)]
pub struct CorewireRpcServerConfig {
    pub addr: SocketAddr,
    pub shards: usize,
    pub accept: AcceptMode,
    /// Pin shard `i` to CPU `i` of the allowed set (corewire's default).
    pub pin: bool,
    pub budget: Budget,
}

/// Why the server could not run.
#[derive(Debug)]
pub enum CorewireRpcServerError {
    Signals(io::Error),
    Runtime(io::Error),
    Listen(io::Error),
}

impl fmt::Display for CorewireRpcServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorewireRpcServerError::Signals(e) => write!(f, "cannot hook SIGTERM: {e}"),
            CorewireRpcServerError::Runtime(e) => write!(f, "cannot start corewire shards: {e}"),
            CorewireRpcServerError::Listen(e) => write!(f, "cannot listen: {e}"),
        }
    }
}

impl std::error::Error for CorewireRpcServerError {}

fn core_mode(mode: AcceptMode) -> CoreAcceptMode {
    match mode {
        AcceptMode::Reuseport => CoreAcceptMode::ReusePort,
        AcceptMode::Handoff => CoreAcceptMode::handoff(Placement::LeastConnections),
    }
}

/// Serves until SIGTERM or SIGINT, then prints stats and shuts the shards down.
pub fn run(cfg: &CorewireRpcServerConfig) -> Result<(), CorewireRpcServerError> {
    // Hooked before anything listens, so a SIGTERM right after start still prints stats.
    let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(CorewireRpcServerError::Signals)?;
    let rt = Runtime::builder()
        .shards(cfg.shards.max(1))
        .pin(cfg.pin)
        .name("rpc-server")
        .build()
        .map_err(CorewireRpcServerError::Runtime)?;
    let handle = Server::builder()
        .service(|_shard| Echo)
        .build()
        .serve(
            &rt,
            TcpEndpoint::bind(cfg.addr)
                .mode(core_mode(cfg.accept))
                .budget(cfg.budget),
        )
        .map_err(CorewireRpcServerError::Listen)?;
    eprintln!(
        "rpc_corewire: serving on {} (shards={}, accept={}, pinned={}, budget={:?})",
        handle.local_addr(),
        rt.shard_count(),
        cfg.accept,
        cfg.pin,
        cfg.budget
    );
    let _ = signals.forever().next();

    // Same keys as corewire's echo_server: `accepted` counts each shard's own listener,
    // `placed` where connections went (they differ in handoff mode).
    let placed = handle.placed_connections();
    let open = handle.open_connections();
    let runtime_stats = rt.stats();
    let mut out = io::stdout().lock();
    for (shard, snap) in runtime_stats.iter().enumerate() {
        let line = ShardLine {
            shard,
            accepted: snap.accepted,
            open: open.get(shard).copied().unwrap_or(0) as u64,
            budget_exhausted: snap.budget_exhausted,
            placed: placed.get(shard).copied(),
        }
        .line();
        let _ = writeln!(out, "{line}");
    }
    for (shard, snap) in runtime_stats.iter().enumerate() {
        let _ = writeln!(out, "runtime shard={shard} {snap}");
    }
    let _ = out.flush();
    handle.stop();
    rt.shutdown();
    Ok(())
}
