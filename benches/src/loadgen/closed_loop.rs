//! Closed-loop echo load (C connections × D outstanding) and the fairness probe (hot pipelined
//! connections plus one depth-1 probe), both on the raw length-prefixed echo protocol.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use tokio::net::TcpStream;

use super::echo_conn::{self, ConnSpec};
use super::harness::{self, GroupStats, Outcome, StartGate, ThreadBody};
use crate::latency::round2;
use crate::report::{ClosedLoopReport, CpuUsage, MachineNote, ProbeReport};

/// How long a connect may take before it counts as an error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Common run shape.
#[derive(Debug, Clone)]
pub struct RunShape {
    pub addr: SocketAddr,
    pub threads: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub server_pid: Option<u32>,
}

/// Closed-loop echo parameters.
#[derive(Debug, Clone)]
pub struct ClosedLoopConfig {
    pub shape: RunShape,
    pub conns: usize,
    pub depth: usize,
    pub size: usize,
}

/// Fairness probe parameters.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub shape: RunShape,
    pub hot_conns: usize,
    pub hot_depth: usize,
    pub size: usize,
    pub probe_size: usize,
    /// Where the probe connects; `None`: the hot connections' address. A server that gives
    /// the probe its own listener reports head-of-line counts for the probe alone.
    pub probe_addr: Option<SocketAddr>,
}

impl ProbeConfig {
    /// The probe connection's address.
    pub fn probe_addr(&self) -> SocketAddr {
        self.probe_addr.unwrap_or(self.shape.addr)
    }

    /// The hot connections dealt onto `threads` lists, then the probe's own list (last), so
    /// its latency reflects the server, not a busy client loop.
    pub fn conn_lists(&self) -> Vec<Vec<ConnSpec>> {
        let hot = ConnSpec {
            group: HOT,
            size: self.size,
            depth: self.hot_depth,
        };
        let probe = ConnSpec {
            group: PROBE,
            size: self.probe_size,
            depth: 1,
        };
        let mut lists = spread(&vec![hot; self.hot_conns], self.shape.threads);
        lists.retain(|l| !l.is_empty());
        lists.push(vec![probe]);
        lists
    }
}

/// Deals `conns` round-robin onto `threads` lists (at least one).
pub fn spread(conns: &[ConnSpec], threads: usize) -> Vec<Vec<ConnSpec>> {
    let mut lists = vec![Vec::new(); threads.max(1)];
    let n = lists.len();
    for (i, c) in conns.iter().enumerate() {
        lists[i % n].push(*c);
    }
    lists
}

/// One client thread: a current-thread tokio runtime driving its share of the connections.
struct EchoThread {
    addr: SocketAddr,
    conns: Vec<ConnSpec>,
}

impl ThreadBody for EchoThread {
    fn run(self, mut gate: StartGate, groups: usize) -> Vec<GroupStats> {
        let stats: Rc<Vec<RefCell<GroupStats>>> =
            Rc::new((0..groups).map(|_| RefCell::default()).collect());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        match runtime {
            Ok(rt) => {
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, self.drive_all(&mut gate, Rc::clone(&stats)));
            }
            Err(e) => {
                eprintln!("loadgen: cannot build runtime: {e}");
                for c in &self.conns {
                    stats[c.group].borrow_mut().errors += 1;
                }
            }
        }
        stats.iter().map(|s| s.borrow().clone()).collect()
    }
}

impl EchoThread {
    async fn drive_all(self, gate: &mut StartGate, stats: Rc<Vec<RefCell<GroupStats>>>) {
        let mut streams = Vec::with_capacity(self.conns.len());
        for spec in self.conns {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(self.addr)).await {
                Ok(Ok(stream)) => {
                    if let Err(e) = stream.set_nodelay(true) {
                        eprintln!("loadgen: TCP_NODELAY: {e}");
                    }
                    streams.push((spec, stream));
                }
                Ok(Err(e)) => {
                    eprintln!("loadgen: connect {}: {e}", self.addr);
                    stats[spec.group].borrow_mut().errors += 1;
                }
                Err(_) => {
                    eprintln!("loadgen: connect {}: timed out", self.addr);
                    stats[spec.group].borrow_mut().errors += 1;
                }
            }
        }
        let Some(timeline) = gate.wait() else {
            return;
        };
        let tasks: Vec<_> = streams
            .into_iter()
            .map(|(spec, stream)| {
                let task_stats = Rc::clone(&stats);
                let handle =
                    tokio::task::spawn_local(echo_conn::drive(stream, spec, timeline, task_stats));
                (spec, handle)
            })
            .collect();
        for (spec, handle) in tasks {
            let failure = match handle.await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(format!("connection task failed: {e}")),
            };
            if let Some(why) = failure {
                eprintln!("loadgen: connection (group {}): {why}", spec.group);
                stats[spec.group].borrow_mut().errors += 1;
            }
        }
    }
}

fn threads_for(addr: SocketAddr, lists: Vec<Vec<ConnSpec>>) -> Vec<EchoThread> {
    lists
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|conns| EchoThread { addr, conns })
        .collect()
}

fn per_second(count: u64, window: Duration) -> f64 {
    round2(count as f64 / window.as_secs_f64())
}

/// Runs a closed-loop echo benchmark.
pub fn run_closed_loop(cfg: &ClosedLoopConfig) -> ClosedLoopReport {
    let spec = ConnSpec {
        group: 0,
        size: cfg.size,
        depth: cfg.depth,
    };
    let lists = spread(&vec![spec; cfg.conns], cfg.shape.threads);
    let s = &cfg.shape;
    let out = harness::run(
        threads_for(s.addr, lists),
        1,
        s.warmup,
        s.duration,
        s.server_pid,
    );
    closed_loop_report("echo", cfg, &out)
}

/// Builds the closed-loop report from a harness outcome (group 0).
pub fn closed_loop_report(
    mode: &'static str,
    cfg: &ClosedLoopConfig,
    out: &Outcome,
) -> ClosedLoopReport {
    let s = &cfg.shape;
    let g = &out.groups[0];
    ClosedLoopReport {
        mode,
        addr: s.addr.to_string(),
        conns: cfg.conns,
        depth: cfg.depth,
        size: cfg.size,
        threads: s.threads,
        warmup_ms: s.warmup.as_millis() as u64,
        duration_ms: s.duration.as_millis() as u64,
        requests: g.requests,
        errors: g.errors,
        qps: per_second(g.requests, out.window),
        latency: g.latency.summary(),
        cpu: CpuUsage::new(out.client_cpu_s, out.server_cpu_s, g.requests)
            .with_server_detail(out.server_user_sys_s, out.server_syscalls, g.requests)
            .with_client_allocs(out.client_allocs, g.requests),
        machine: MachineNote::current(),
    }
}

/// Group of the hot connections' statistics.
pub const HOT: usize = 0;
/// Group of the probe's statistics.
pub const PROBE: usize = 1;

/// Runs the fairness probe: hot connections on `threads` threads, the probe on its own thread.
pub fn run_probe(cfg: &ProbeConfig) -> ProbeReport {
    let mut lists = cfg.conn_lists();
    let probe = lists.pop().unwrap_or_default();
    let mut threads = threads_for(cfg.shape.addr, lists);
    threads.extend(threads_for(cfg.probe_addr(), vec![probe]));
    let s = &cfg.shape;
    let out = harness::run(threads, 2, s.warmup, s.duration, s.server_pid);
    probe_report("probe", cfg, &out)
}

/// Builds the fairness report from a harness outcome (groups [`HOT`] and [`PROBE`]).
pub fn probe_report(mode: &'static str, cfg: &ProbeConfig, out: &Outcome) -> ProbeReport {
    let s = &cfg.shape;
    let (h, p) = (&out.groups[HOT], &out.groups[PROBE]);
    let probe_lat = p.latency.summary();
    let requests = h.requests + p.requests;
    let busy_pct = |cpu_s: f64| round2(cpu_s * 100.0 / out.window.as_secs_f64());
    ProbeReport {
        mode,
        addr: s.addr.to_string(),
        probe_addr: cfg.probe_addr().to_string(),
        hot_conns: cfg.hot_conns,
        hot_depth: cfg.hot_depth,
        size: cfg.size,
        probe_size: cfg.probe_size,
        threads: s.threads,
        warmup_ms: s.warmup.as_millis() as u64,
        duration_ms: s.duration.as_millis() as u64,
        probe_requests: p.requests,
        probe_p50_us: probe_lat.p50_us,
        probe_p90_us: probe_lat.p90_us,
        probe_p99_us: probe_lat.p99_us,
        probe_p999_us: probe_lat.p999_us,
        probe_avg_us: probe_lat.avg_us,
        hot_requests: h.requests,
        hot_msgs_per_s: per_second(h.requests, out.window),
        hot_mb_per_s: round2(h.payload_bytes as f64 / 1e6 / out.window.as_secs_f64()),
        hot_p99_us: h.latency.summary().p99_us,
        errors: h.errors + p.errors,
        requests,
        client_cpu_pct: busy_pct(out.client_cpu_s),
        server_cpu_pct: out.server_cpu_s.map(busy_pct),
        cpu: CpuUsage::new(out.client_cpu_s, out.server_cpu_s, requests),
        machine: MachineNote::current(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_connections_round_robin() {
        let c = |group| ConnSpec {
            group,
            size: 1,
            depth: 1,
        };
        let lists = spread(&[c(0), c(1), c(2)], 2);
        assert_eq!(lists, vec![vec![c(0), c(2)], vec![c(1)]]);
        assert_eq!(spread(&[c(0)], 0), vec![vec![c(0)]]);
    }
}
