//! The one-line JSON reports the load generators print. benchctl reads them back by key, so the
//! key names are the contract: keep them stable.

use serde::Serialize;

use crate::latency::{round2, LatencySummary};
use crate::syscalls::SyscallCounts;

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// What every report says about where it ran: client and server share the machine's cores,
/// so absolute numbers are only comparable on the same machine with the same pinning.
#[derive(Debug, Clone, Serialize)]
pub struct MachineNote {
    /// CPUs online on the machine.
    pub cores: usize,
    /// CPUs this client may run on (less than `cores` when pinned with taskset).
    pub client_cpus_allowed: usize,
    pub note: &'static str,
}

impl MachineNote {
    /// Describes the current machine.
    pub fn current() -> MachineNote {
        MachineNote {
            cores: online_cpus(),
            client_cpus_allowed: std::thread::available_parallelism().map_or(1, |n| n.get()),
            note: "client and server share this machine's cores (127.0.0.1)",
        }
    }
}

/// CPUs online, falling back to the ones this process may use.
fn online_cpus() -> usize {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN) {
        Ok(Some(n)) if n > 0 => n as usize,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// CPU seconds spent inside the measured window.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CpuUsage {
    pub client_cpu_s: f64,
    pub client_cpu_us_per_req: f64,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_req: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_user_us_per_req: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_sys_us_per_req: Option<f64>,
    /// `io_uring_enter` calls per request (perf, with `--server-syscalls`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_enters_per_req: Option<f64>,
    /// All system calls per request (perf, with `--server-syscalls`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_syscalls_per_req: Option<f64>,
    /// The client's allocations per request (a client that counts them: the corewire RPC
    /// client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_allocs_per_req: Option<f64>,
}

impl CpuUsage {
    /// Per-request figures from window totals.
    pub fn new(client_s: f64, server_s: Option<f64>, requests: u64) -> CpuUsage {
        let per_req = |s: f64| {
            if requests == 0 {
                0.0
            } else {
                round2(s * 1e6 / requests as f64)
            }
        };
        CpuUsage {
            client_cpu_s: round2(client_s),
            client_cpu_us_per_req: per_req(client_s),
            server_cpu_s: server_s.map(round2),
            server_cpu_us_per_req: server_s.map(per_req),
            ..CpuUsage::default()
        }
    }

    /// Adds the server's user/system split and syscall counts, per request.
    pub fn with_server_detail(
        mut self,
        user_sys_s: Option<(f64, f64)>,
        syscalls: Option<SyscallCounts>,
        requests: u64,
    ) -> CpuUsage {
        let per_req = |x: f64| (requests > 0).then(|| x / requests as f64);
        self.server_user_us_per_req = user_sys_s.and_then(|(u, _)| per_req(u * 1e6)).map(round2);
        self.server_sys_us_per_req = user_sys_s.and_then(|(_, s)| per_req(s * 1e6)).map(round2);
        self.server_enters_per_req = syscalls
            .and_then(|c| per_req(c.uring_enters as f64))
            .map(round3);
        self.server_syscalls_per_req = syscalls
            .and_then(|c| per_req(c.syscalls as f64))
            .map(round3);
        self
    }

    /// Adds the client's allocations in the window, per request.
    pub fn with_client_allocs(mut self, allocs: Option<u64>, requests: u64) -> CpuUsage {
        self.client_allocs_per_req = allocs
            .filter(|_| requests > 0)
            .map(|a| round3(a as f64 / requests as f64));
        self
    }
}

/// Closed-loop echo or RPC run (`mode` = "echo" or "grpc").
#[derive(Debug, Clone, Serialize)]
pub struct ClosedLoopReport {
    pub mode: &'static str,
    pub addr: String,
    pub conns: usize,
    pub depth: usize,
    pub size: usize,
    pub threads: usize,
    pub warmup_ms: u64,
    pub duration_ms: u64,
    pub requests: u64,
    pub errors: u64,
    pub qps: f64,
    #[serde(flatten)]
    pub latency: LatencySummary,
    #[serde(flatten)]
    pub cpu: CpuUsage,
    #[serde(flatten)]
    pub machine: MachineNote,
}

/// Fairness probe: one depth-1 connection measured while hot connections flood the server.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub mode: &'static str,
    pub addr: String,
    /// Where the probe connected (its own listener, or `addr`).
    pub probe_addr: String,
    pub hot_conns: usize,
    pub hot_depth: usize,
    pub size: usize,
    pub probe_size: usize,
    pub threads: usize,
    pub warmup_ms: u64,
    pub duration_ms: u64,
    pub probe_requests: u64,
    pub probe_p50_us: f64,
    pub probe_p90_us: f64,
    pub probe_p99_us: f64,
    pub probe_p999_us: f64,
    pub probe_avg_us: f64,
    pub hot_requests: u64,
    pub hot_msgs_per_s: f64,
    /// Echoed payload bytes received by the hot connections per second, in 10^6 bytes.
    pub hot_mb_per_s: f64,
    pub hot_p99_us: f64,
    pub errors: u64,
    /// Requests counted for CPU per request: hot + probe.
    pub requests: u64,
    /// The client's CPU time over the window, in % of one CPU: near 100 × its threads, the
    /// client (not the server) limits the hot throughput.
    pub client_cpu_pct: f64,
    /// The server's CPU time over the window, in % of one CPU.
    pub server_cpu_pct: Option<f64>,
    #[serde(flatten)]
    pub cpu: CpuUsage,
    #[serde(flatten)]
    pub machine: MachineNote,
}

/// Accept storm: sequential connect / one echo / close cycles.
#[derive(Debug, Clone, Serialize)]
pub struct AcceptStormReport {
    pub mode: &'static str,
    pub addr: String,
    pub cycles: u64,
    pub threads: usize,
    pub size: usize,
    pub completed: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub cycles_per_s: f64,
    /// Latency of a whole cycle (connect + echo + close).
    #[serde(flatten)]
    pub latency: LatencySummary,
    #[serde(flatten)]
    pub cpu: CpuUsage,
    #[serde(flatten)]
    pub machine: MachineNote,
}

/// Prints a report as one JSON line on stdout.
pub fn print_json<T: Serialize>(report: &T) {
    match serde_json::to_string(report) {
        Ok(line) => println!("{line}"),
        Err(e) => eprintln!("cannot serialise report: {e}"),
    }
}
