//! Closed-loop client on corewire: a runtime with `threads` shards (unpinned, like loadgen's
//! threads; pin from outside with `taskset`), each shard opening its share of the connections
//! and keeping `depth` calls in flight on each one (`depth` tasks sharing the connection's
//! pipelining [`Client`]). Same timeline, histogram and JSON report as the raw-echo loadgen,
//! with `mode` = "corewire-rpc"; the fairness probe likewise ("corewire-rpc-probe").

use std::cell::RefCell;
use std::fmt;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::{spawn_local, Client, ClientError, ClientOptions, Runtime, Service};

use super::typed::{EchoClient, EchoMessage};
use super::{Echo, ECHO_METHOD};
use crate::loadgen::closed_loop::{
    closed_loop_report, probe_report, spread, ClosedLoopConfig, ProbeConfig, RunShape,
};
use crate::loadgen::echo_conn::ConnSpec;
use crate::loadgen::harness::{self, GroupStats, Outcome, StartGate, ThreadBody, Timeline};
use crate::report::{ClosedLoopReport, ProbeReport};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after the window a call may still be outstanding before its loop counts as hung.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Why a call loop stopped early.
#[derive(Debug)]
pub enum CallLoopError {
    Call(ClientError),
    WrongEcho { expected: usize, got: usize },
    Hung,
}

impl fmt::Display for CallLoopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallLoopError::Call(e) => write!(f, "call failed: {e}"),
            CallLoopError::WrongEcho { expected, got } => write!(
                f,
                "echo payload is {got} bytes (or differs), expected {expected}"
            ),
            CallLoopError::Hung => write!(
                f,
                "a call was still unanswered {DRAIN_GRACE:?} after the run"
            ),
        }
    }
}

impl std::error::Error for CallLoopError {}

/// One client shard's share of the connections.
struct ShardBody {
    rt: Arc<Runtime>,
    shard: usize,
    addr: SocketAddr,
    conns: Vec<ConnSpec>,
    /// Call the typed echo (generated client) instead of the raw one.
    typed: bool,
}

impl ThreadBody for ShardBody {
    fn run(self, gate: StartGate, groups: usize) -> Vec<GroupStats> {
        let ShardBody {
            rt,
            shard,
            addr,
            conns,
            typed,
        } = self;
        let n = conns.len();
        match rt.run_on(shard, move || drive_shard(addr, conns, gate, groups, typed)) {
            Ok(stats) => stats,
            Err(e) => {
                eprintln!("rpc_corewire: client shard {shard} failed: {e}");
                let mut stats = vec![GroupStats::default(); groups];
                stats[0].errors += n as u64;
                stats
            }
        }
    }
}

async fn connect(addr: SocketAddr, depth: usize) -> Result<Client, String> {
    let options = {
        let mut o = ClientOptions::default();
        o.window = depth.max(1);
        o
    };
    match corewire::timeout(CONNECT_TIMEOUT, Client::connect_tcp(addr, options)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".to_string()),
    }
}

async fn drive_shard(
    addr: SocketAddr,
    conns: Vec<ConnSpec>,
    mut gate: StartGate,
    groups: usize,
    typed: bool,
) -> Vec<GroupStats> {
    let stats: Rc<Vec<RefCell<GroupStats>>> =
        Rc::new((0..groups).map(|_| RefCell::default()).collect());
    let mut clients = Vec::with_capacity(conns.len());
    for spec in conns {
        match connect(addr, spec.depth).await {
            Ok(c) => clients.push((spec, c)),
            Err(e) => {
                eprintln!("rpc_corewire: connect {addr}: {e}");
                stats[spec.group].borrow_mut().errors += 1;
            }
        }
    }
    // Blocking this shard's thread at the start barrier is harmless: its connections are
    // idle until every client thread has connected and the timeline is set.
    let Some(timeline) = gate.wait() else {
        return collect(&stats);
    };
    let mut tasks = Vec::new();
    for (spec, client) in &clients {
        for _ in 0..spec.depth.max(1) {
            let task = call_loop(client.clone(), *spec, typed, timeline, Rc::clone(&stats));
            tasks.push((*spec, spawn_local(task)));
        }
    }
    let give_up = timeline.end() + DRAIN_GRACE;
    for (spec, task) in tasks {
        let left = give_up.saturating_duration_since(Instant::now());
        let failure = match corewire::timeout(left, task).await {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) => Some(e.to_string()),
            Ok(Err(e)) => Some(format!("call task failed: {e}")),
            Err(_) => Some(CallLoopError::Hung.to_string()),
        };
        if let Some(why) = failure {
            eprintln!("rpc_corewire: {why}");
            stats[spec.group].borrow_mut().errors += 1;
        }
    }
    drop(clients);
    collect(&stats)
}

fn collect(stats: &[RefCell<GroupStats>]) -> Vec<GroupStats> {
    stats.iter().map(|s| s.borrow().clone()).collect()
}

/// Issues calls back to back until the timeline ends. No per-call timer: a hung call is
/// caught once, by the drain deadline in `drive_shard`.
async fn call_loop(
    client: Client,
    spec: ConnSpec,
    typed: bool,
    timeline: Timeline,
    stats: Rc<Vec<RefCell<GroupStats>>>,
) -> Result<(), CallLoopError> {
    let payload = Bytes::from((0..spec.size).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let typed = typed.then(|| EchoClient::from_client(client.clone()));
    // One clock read per call: the time a reply was recorded is when the next call starts
    // (the raw-echo loadgen likewise reads the clock once per read, not per request).
    let mut sent = timeline.now_ns();
    loop {
        if timeline.ended(sent) {
            return Ok(());
        }
        let reply = match &typed {
            Some(echo) => echo
                .echo(EchoMessage {
                    payload: payload.clone(),
                })
                .await
                .map(|r| r.into_inner().payload),
            None => client.call(Echo::ID, ECHO_METHOD, payload.clone()).await,
        }
        .map_err(CallLoopError::Call)?;
        // Length and last byte, as loadgen checks (a full compare would load the client).
        if reply.len() != spec.size || reply.last() != payload.last() {
            return Err(CallLoopError::WrongEcho {
                expected: spec.size,
                got: reply.len(),
            });
        }
        let now = timeline.now_ns();
        if timeline.in_window(now) {
            stats[spec.group]
                .borrow_mut()
                .record(now.saturating_sub(sent), spec.size);
        }
        sent = now;
    }
}

/// Why the client could not run at all.
#[derive(Debug)]
pub struct ClientRuntimeError(std::io::Error);

impl fmt::Display for ClientRuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot start corewire client shards: {}", self.0)
    }
}

impl std::error::Error for ClientRuntimeError {}

/// Runs `lists` of connections, one client shard per list (each list to its address), through
/// the harness's warm-up and window.
fn run_shards(
    lists: Vec<(SocketAddr, Vec<ConnSpec>)>,
    groups: usize,
    shape: &RunShape,
    typed: bool,
) -> Result<Outcome, ClientRuntimeError> {
    let lists: Vec<_> = lists.into_iter().filter(|(_, l)| !l.is_empty()).collect();
    let rt = Runtime::builder()
        .shards(lists.len().max(1))
        .pin(false)
        .name("rpc-client")
        .build()
        .map(Arc::new)
        .map_err(ClientRuntimeError)?;
    let bodies = lists
        .into_iter()
        .enumerate()
        .map(|(shard, (addr, conns))| ShardBody {
            rt: Arc::clone(&rt),
            shard,
            addr,
            conns,
            typed,
        })
        .collect();
    let out = harness::run(
        bodies,
        groups,
        shape.warmup,
        shape.duration,
        shape.server_pid,
    );
    drop(rt);
    Ok(out)
}

/// Runs a closed-loop benchmark against a corewire RPC echo server (its typed echo, generated
/// from `proto/echo.proto`, when `typed`).
pub fn run_corewire_closed_loop(
    cfg: &ClosedLoopConfig,
    typed: bool,
) -> Result<ClosedLoopReport, ClientRuntimeError> {
    let spec = ConnSpec {
        group: 0,
        size: cfg.size,
        depth: cfg.depth,
    };
    let s = &cfg.shape;
    let lists = spread(&vec![spec; cfg.conns], s.threads)
        .into_iter()
        .map(|l| (s.addr, l))
        .collect();
    let out = run_shards(lists, 1, s, typed)?;
    let mode = if typed {
        "corewire-typed"
    } else {
        "corewire-rpc"
    };
    Ok(closed_loop_report(mode, cfg, &out))
}

/// Runs the fairness probe against a corewire RPC echo server: the hot connections on
/// `threads` client shards, the probe alone on one more (to `--probe-addr`, the server's probe
/// listener, when given), with the raw-echo probe's report.
pub fn run_corewire_probe(cfg: &ProbeConfig) -> Result<ProbeReport, ClientRuntimeError> {
    let mut lists: Vec<_> = cfg
        .conn_lists()
        .into_iter()
        .map(|l| (cfg.shape.addr, l))
        .collect();
    if let Some(probe) = lists.last_mut() {
        probe.0 = cfg.probe_addr();
    }
    let out = run_shards(lists, 2, &cfg.shape, false)?;
    Ok(probe_report("corewire-rpc-probe", cfg, &out))
}
