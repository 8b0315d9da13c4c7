//! The corewire RPC echo server: `shards` corewire shards serving [`Echo`] over TCP, stopped by
//! SIGTERM, after which it prints the per-shard `stats` lines benchctl reads, a `metric` line
//! (allocations and task polls per request, the listener's head-of-line counts; see
//! [`crate::server_metrics`]) and the runtime's own counters, for investigation.

use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use corewire::{Budget, Runtime, Server};
use corewire_runtime::accept::{
    AcceptMode as CoreAcceptMode, ListenerHandle, Placement, TcpEndpoint,
};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::typed::{EchoServer, TypedEcho};
use super::{Echo, Served};
use crate::alloc_count::alloc_count;
use crate::server_metrics::{metric_line, per_request};
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
    /// FNV-1a passes over each payload before echoing it (the handler's CPU cost).
    pub hash_rounds: u32,
    /// A second listener, same service and budget, for the fairness probe alone: its own
    /// head-of-line histogram is then the probe's (printed as `probe_hol_*`).
    pub probe_addr: Option<SocketAddr>,
    /// Serve through the handler's boxed future only (see [`Echo::no_call_now`]).
    pub no_call_now: bool,
    /// Serve the typed echo generated from `proto/echo.proto` instead of the raw one.
    pub typed: bool,
    /// Serve the typed echo over gRPC (HTTP/2) instead of corewire's framing.
    pub grpc: bool,
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
    let served = Arc::new(Served::new(rt.shard_count()));
    let (hash_rounds, no_call_now) = (cfg.hash_rounds, cfg.no_call_now);
    let endpoint = |addr| {
        TcpEndpoint::bind(addr)
            .mode(core_mode(cfg.accept))
            .budget(cfg.budget)
    };
    let counters = served.clone();
    let server = if cfg.typed || cfg.grpc {
        Server::builder()
            .service(move |shard| {
                EchoServer::new(TypedEcho {
                    served: Some((counters.clone(), shard)),
                })
            })
            .build()
    } else {
        Server::builder()
            .service(move |shard| Echo {
                hash_rounds,
                served: Some((counters.clone(), shard)),
                no_call_now,
            })
            .build()
    };
    let serve = |addr| {
        if cfg.grpc {
            server.serve_grpc(&rt, endpoint(addr))
        } else {
            server.serve(&rt, endpoint(addr))
        }
    };
    // The probe's listener first: benchctl counts the server as up once `addr` listens.
    let probe = cfg
        .probe_addr
        .map(serve)
        .transpose()
        .map_err(CorewireRpcServerError::Listen)?;
    let handle = serve(cfg.addr).map_err(CorewireRpcServerError::Listen)?;
    eprintln!(
        "rpc_corewire: serving on {} (shards={}, accept={}, pinned={}, budget={:?}, hash_rounds={}, call_now={}, typed={}, grpc={})",
        handle.local_addr(),
        rt.shard_count(),
        cfg.accept,
        cfg.pin,
        cfg.budget,
        cfg.hash_rounds,
        !cfg.no_call_now,
        cfg.typed,
        cfg.grpc
    );
    // Counted from here: what connections and requests cost, not start-up.
    let polls = || rt.stats().iter().map(|s| s.tasks_polled).sum::<u64>();
    let (allocs_before, polls_before) = (alloc_count(), polls());
    let _ = signals.forever().next();
    let (allocs, task_polls) = (alloc_count() - allocs_before, polls() - polls_before);

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
    let mut metrics = Vec::new();
    per_request(&mut metrics, served.total(), allocs, task_polls);
    hol_metrics(&mut metrics, HOL_KEYS, &handle);
    if let Some(probe) = &probe {
        hol_metrics(&mut metrics, PROBE_HOL_KEYS, probe);
    }
    let _ = writeln!(out, "{}", metric_line(&metrics));
    for (shard, snap) in runtime_stats.iter().enumerate() {
        let _ = writeln!(out, "runtime shard={shard} {snap}");
    }
    let _ = out.flush();
    handle.stop();
    if let Some(probe) = probe {
        probe.stop();
    }
    rt.shutdown();
    Ok(())
}

/// Metric names of the hot listener's head-of-line counts: count, p50, p99, p99.9, max.
const HOL_KEYS: [&str; 5] = ["hol_count", "hol_p50", "hol_p99", "hol_p999", "hol_max"];
/// The same for the probe's listener.
const PROBE_HOL_KEYS: [&str; 5] = [
    "probe_hol_count",
    "probe_hol_p50",
    "probe_hol_p99",
    "probe_hol_p999",
    "probe_hol_max",
];

/// The listener's head-of-line counts under `keys`.
fn hol_metrics(
    metrics: &mut Vec<(&'static str, f64)>,
    keys: [&'static str; 5],
    l: &ListenerHandle,
) {
    let hol = l.head_of_line();
    let values = [
        hol.count as f64,
        hol.quantile(0.5) as f64,
        hol.quantile(0.99) as f64,
        hol.quantile(0.999) as f64,
        hol.max as f64,
    ];
    metrics.extend(keys.into_iter().zip(values));
}
