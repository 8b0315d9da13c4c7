//! tonic closed-loop client: each "connection" is one tonic `Channel` (one HTTP/2 connection)
//! with `depth` unary calls kept in flight on it. Same timeline, histogram and JSON report as
//! the raw-echo loadgen, with `mode` = "grpc".

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use prost::bytes::Bytes;
use tonic::transport::{Channel, Endpoint};

use super::generated::echo_client::EchoClient;
use super::message::EchoMessage;
use crate::frame::MAX_PAYLOAD;
use crate::loadgen::closed_loop::{closed_loop_report, spread, ClosedLoopConfig};
use crate::loadgen::echo_conn::ConnSpec;
use crate::loadgen::harness::{self, GroupStats, StartGate, ThreadBody, Timeline};
use crate::report::ClosedLoopReport;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a call loop stopped early.
#[derive(Debug)]
pub enum CallError {
    Status(tonic::Status),
    WrongLength { expected: usize, got: usize },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Status(s) => write!(f, "rpc failed: {s}"),
            CallError::WrongLength { expected, got } => {
                write!(f, "echo payload is {got} bytes, expected {expected}")
            }
        }
    }
}

impl std::error::Error for CallError {}

struct GrpcThread {
    uri: String,
    conns: Vec<ConnSpec>,
}

impl ThreadBody for GrpcThread {
    fn run(self, mut gate: StartGate, groups: usize) -> Vec<GroupStats> {
        let stats: Rc<Vec<RefCell<GroupStats>>> =
            Rc::new((0..groups).map(|_| RefCell::default()).collect());
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => {
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, self.drive_all(&mut gate, Rc::clone(&stats)));
            }
            Err(e) => {
                eprintln!("rpc_tonic: cannot build runtime: {e}");
                stats[0].borrow_mut().errors += self.conns.len() as u64;
            }
        }
        stats.iter().map(|s| s.borrow().clone()).collect()
    }
}

impl GrpcThread {
    async fn connect(&self) -> Result<Channel, String> {
        let endpoint = Endpoint::from_shared(self.uri.clone())
            .map_err(|e| e.to_string())?
            .tcp_nodelay(true)
            .connect_timeout(CONNECT_TIMEOUT);
        endpoint.connect().await.map_err(|e| format!("{e:?}"))
    }

    async fn drive_all(self, gate: &mut StartGate, stats: Rc<Vec<RefCell<GroupStats>>>) {
        let mut channels = Vec::with_capacity(self.conns.len());
        for spec in &self.conns {
            match self.connect().await {
                Ok(ch) => channels.push((*spec, ch)),
                Err(e) => {
                    eprintln!("rpc_tonic: connect {}: {e}", self.uri);
                    stats[spec.group].borrow_mut().errors += 1;
                }
            }
        }
        let Some(timeline) = gate.wait() else {
            return;
        };
        let mut tasks = Vec::new();
        for (spec, channel) in channels {
            for _ in 0..spec.depth.max(1) {
                let client = EchoClient::new(channel.clone())
                    .max_decoding_message_size(MAX_PAYLOAD + 64)
                    .max_encoding_message_size(MAX_PAYLOAD + 64);
                let task = call_loop(client, spec, timeline, Rc::clone(&stats));
                tasks.push((spec, tokio::task::spawn_local(task)));
            }
        }
        for (spec, task) in tasks {
            let failure = match task.await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(format!("call task failed: {e}")),
            };
            if let Some(why) = failure {
                eprintln!("rpc_tonic: {why}");
                stats[spec.group].borrow_mut().errors += 1;
            }
        }
    }
}

/// Issues calls back to back until the timeline ends.
async fn call_loop(
    mut client: EchoClient<Channel>,
    spec: ConnSpec,
    timeline: Timeline,
    stats: Rc<Vec<RefCell<GroupStats>>>,
) -> Result<(), CallError> {
    let payload = Bytes::from((0..spec.size).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let end = tokio::time::Instant::from_std(timeline.end());
    loop {
        let sent = timeline.now_ns();
        let call = client.echo(EchoMessage {
            payload: payload.clone(),
        });
        let response = match tokio::time::timeout_at(end, call).await {
            Err(_elapsed) => return Ok(()),
            Ok(r) => r.map_err(CallError::Status)?,
        };
        let got = response.get_ref().payload.len();
        if got != spec.size {
            return Err(CallError::WrongLength {
                expected: spec.size,
                got,
            });
        }
        let now = timeline.now_ns();
        if timeline.in_window(now) {
            stats[spec.group]
                .borrow_mut()
                .record(now.saturating_sub(sent), spec.size);
        }
    }
}

/// Runs a closed-loop gRPC echo benchmark.
pub fn run_grpc_closed_loop(cfg: &ClosedLoopConfig) -> ClosedLoopReport {
    let spec = ConnSpec {
        group: 0,
        size: cfg.size,
        depth: cfg.depth,
    };
    let s = &cfg.shape;
    let uri = format!("http://{}", s.addr);
    let threads = spread(&vec![spec; cfg.conns], s.threads)
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|conns| GrpcThread {
            uri: uri.clone(),
            conns,
        })
        .collect();
    let out = harness::run(threads, 1, s.warmup, s.duration, s.server_pid);
    closed_loop_report("grpc", cfg, &out)
}
