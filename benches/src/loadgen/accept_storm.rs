//! Accept storm: N sequential connect → one echo → close cycles split over T threads, measuring
//! how fast a server takes on new connections. Uses blocking std sockets: each thread has one
//! connection at a time, so an event loop would only add overhead.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::cpu;
use crate::latency::{round2, LatencyHistogram};
use crate::pipeline::Pipeline;
use crate::report::{AcceptStormReport, CpuUsage, MachineNote};

const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Accept-storm parameters.
#[derive(Debug, Clone)]
pub struct AcceptStormConfig {
    pub addr: SocketAddr,
    pub cycles: u64,
    pub threads: usize,
    pub size: usize,
    pub server_pid: Option<u32>,
}

/// Cycles each of `threads` threads runs: `cycles` split as evenly as possible.
pub fn shares(cycles: u64, threads: usize) -> Vec<u64> {
    let threads = threads.max(1) as u64;
    (0..threads)
        .map(|i| cycles / threads + u64::from(i < cycles % threads))
        .collect()
}

#[derive(Default)]
struct ThreadResult {
    latency: LatencyHistogram,
    completed: u64,
    errors: u64,
}

/// One connect → request → response → close cycle.
fn cycle(addr: SocketAddr, size: usize) -> Result<(), String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("nodelay: {e}"))?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| format!("timeout: {e}"))?;
    let mut pipe = Pipeline::new(size, 1);
    pipe.refill(0);
    stream
        .write_all(pipe.output())
        .map_err(|e| format!("write: {e}"))?;
    let sent = pipe.output().len();
    pipe.wrote(sent);
    loop {
        let n = stream
            .read(pipe.read_space())
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("server closed before echoing".to_string());
        }
        if pipe
            .received(n, 0, |_| {})
            .map_err(|e| format!("bad echo: {e}"))?
            == 1
        {
            return Ok(());
        }
    }
}

fn run_thread(addr: SocketAddr, cycles: u64, size: usize, start: Arc<Barrier>) -> ThreadResult {
    let mut result = ThreadResult::default();
    start.wait();
    let mut reported = 0;
    for _ in 0..cycles {
        let t0 = Instant::now();
        match cycle(addr, size) {
            Ok(()) => {
                result.latency.record(t0.elapsed().as_nanos() as u64);
                result.completed += 1;
            }
            Err(e) => {
                result.errors += 1;
                // A broken server fails every cycle; a few lines say why without flooding.
                if reported < 5 {
                    reported += 1;
                    eprintln!("loadgen: accept-storm cycle failed: {e}");
                }
            }
        }
    }
    result
}

fn cpu_now(server_pid: Option<u32>) -> (f64, Option<f64>) {
    let client = cpu::self_cpu_seconds().unwrap_or(0.0);
    let server = server_pid.and_then(|pid| cpu::process_cpu_seconds(pid).ok());
    (client, server)
}

/// Runs the accept storm.
pub fn run_accept_storm(cfg: &AcceptStormConfig) -> AcceptStormReport {
    let shares = shares(cfg.cycles, cfg.threads);
    let start = Arc::new(Barrier::new(shares.len() + 1));
    let handles: Vec<_> = shares
        .iter()
        .map(|&n| {
            let start = Arc::clone(&start);
            let (addr, size) = (cfg.addr, cfg.size);
            thread::spawn(move || run_thread(addr, n, size, start))
        })
        .collect();
    let (client0, server0) = cpu_now(cfg.server_pid);
    start.wait();
    let t0 = Instant::now();
    let mut total = ThreadResult::default();
    for h in handles {
        match h.join() {
            Ok(r) => {
                total.latency.merge(&r.latency);
                total.completed += r.completed;
                total.errors += r.errors;
            }
            Err(_) => total.errors += 1,
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let (client1, server1) = cpu_now(cfg.server_pid);
    let server_s = server1.zip(server0).map(|(a, b)| a - b);
    AcceptStormReport {
        mode: "accept_storm",
        addr: cfg.addr.to_string(),
        cycles: cfg.cycles,
        threads: shares.len(),
        size: cfg.size,
        completed: total.completed,
        errors: total.errors,
        elapsed_s: round2(elapsed),
        cycles_per_s: round2(total.completed as f64 / elapsed.max(1e-9)),
        latency: total.latency.summary(),
        cpu: CpuUsage::new(client1 - client0, server_s, total.completed),
        machine: MachineNote::current(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_split_evenly() {
        assert_eq!(shares(10, 3), vec![4, 3, 3]);
        assert_eq!(shares(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(shares(5, 0), vec![5]);
    }
}
