//! Runs load-generating threads on a shared timeline: every thread connects first, then all
//! start together; completions before the warm-up ends are discarded; CPU time is sampled at the
//! window's edges by the coordinating thread, so connection setup and warm-up are not counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::alloc_count::alloc_count;
use crate::cpu;
use crate::latency::LatencyHistogram;
use crate::syscalls::{SyscallCounter, SyscallCounts};

/// Warm-up end and measurement end, as nanoseconds from a common base instant.
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    base: Instant,
    warm_end_ns: u64,
    end_ns: u64,
}

impl Timeline {
    /// A timeline whose warm-up starts now.
    pub fn starting_now(warmup: Duration, duration: Duration) -> Timeline {
        Timeline::starting_at(Instant::now(), warmup, duration)
    }

    /// A timeline whose warm-up starts at `base`.
    pub fn starting_at(base: Instant, warmup: Duration, duration: Duration) -> Timeline {
        let warm_end_ns = warmup.as_nanos() as u64;
        Timeline {
            base,
            warm_end_ns,
            end_ns: warm_end_ns + duration.as_nanos() as u64,
        }
    }

    /// Nanoseconds since the base.
    pub fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// True when a completion at `t_ns` belongs to the measured window.
    pub fn in_window(&self, t_ns: u64) -> bool {
        t_ns >= self.warm_end_ns && t_ns < self.end_ns
    }

    /// True when `t_ns` is at or past the end of the measurement.
    pub fn ended(&self, t_ns: u64) -> bool {
        t_ns >= self.end_ns
    }

    /// When the warm-up ends.
    pub fn warm_end(&self) -> Instant {
        self.base + Duration::from_nanos(self.warm_end_ns)
    }

    /// When the measurement ends.
    pub fn end(&self) -> Instant {
        self.base + Duration::from_nanos(self.end_ns)
    }

    /// Length of the measured window.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.end_ns - self.warm_end_ns)
    }
}

/// Results of one group of connections (e.g. "hot" or "probe") on one thread.
#[derive(Debug, Clone, Default)]
pub struct GroupStats {
    pub latency: LatencyHistogram,
    pub requests: u64,
    pub payload_bytes: u64,
    pub errors: u64,
}

impl GroupStats {
    /// Counts one completed request.
    pub fn record(&mut self, latency_ns: u64, payload: usize) {
        self.latency.record(latency_ns);
        self.requests += 1;
        self.payload_bytes += payload as u64;
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &GroupStats) {
        self.latency.merge(&other.latency);
        self.requests += other.requests;
        self.payload_bytes += other.payload_bytes;
        self.errors += other.errors;
    }
}

struct GateShared {
    ready: Barrier,
    go: Barrier,
    timeline: OnceLock<Timeline>,
}

/// Where a worker thread waits, after connecting, for the common start.
///
/// Dropping an unused gate still passes both barriers, so a worker that fails (or panics)
/// before starting cannot deadlock the others.
pub struct StartGate {
    shared: Arc<GateShared>,
    waited: bool,
}

impl StartGate {
    /// Blocks until every worker is connected and the timeline is set; returns it.
    pub fn wait(&mut self) -> Option<Timeline> {
        if !self.waited {
            self.waited = true;
            self.shared.ready.wait();
            self.shared.go.wait();
        }
        self.shared.timeline.get().copied()
    }
}

impl Drop for StartGate {
    fn drop(&mut self) {
        self.wait();
    }
}

/// A worker thread's job: connect, pass the gate, generate load until the timeline ends, and
/// return one `GroupStats` per group.
pub trait ThreadBody: Send + 'static {
    fn run(self, gate: StartGate, groups: usize) -> Vec<GroupStats>;
}

/// Totals over all workers.
#[derive(Debug)]
pub struct Outcome {
    pub groups: Vec<GroupStats>,
    pub window: Duration,
    pub client_cpu_s: f64,
    pub server_cpu_s: Option<f64>,
    /// The server's user and system CPU seconds, in clock ticks' resolution (their sum is
    /// `server_cpu_s` give or take a tick or two).
    pub server_user_sys_s: Option<(f64, f64)>,
    /// The server's io_uring enters and syscalls in the window, when counting was asked for.
    pub server_syscalls: Option<SyscallCounts>,
    /// Allocations this (client) process made in the window, when it counts them (a binary
    /// with the [`CountingAlloc`](crate::alloc_count::CountingAlloc) global allocator).
    pub client_allocs: Option<u64>,
}

static COUNT_SERVER_SYSCALLS: AtomicBool = AtomicBool::new(false);

/// Makes every later `run` with a server pid count the server's syscalls with `perf stat`
/// (loadgen's `--server-syscalls`).
pub fn count_server_syscalls(on: bool) {
    COUNT_SERVER_SYSCALLS.store(on, Ordering::Relaxed);
}

/// CPU counters at one instant.
struct CpuSample {
    client: f64,
    /// This process's allocations so far (0 where they are not counted).
    client_allocs: u64,
    server: Option<ServerCpu>,
}

/// The server's CPU time at one instant: the precise total and the tick-resolution split.
#[derive(Clone, Copy)]
struct ServerCpu {
    total: f64,
    user_sys: Option<(f64, f64)>,
}

impl CpuSample {
    fn take(server_pid: Option<u32>) -> CpuSample {
        let client = cpu::self_cpu_seconds().unwrap_or_else(|e| {
            eprintln!("loadgen: cannot read own CPU time: {e}");
            0.0
        });
        let server = server_pid.and_then(|pid| match cpu::process_cpu_seconds(pid) {
            Ok(total) => Some(ServerCpu {
                total,
                user_sys: cpu::process_user_sys_seconds(pid).ok(),
            }),
            Err(e) => {
                eprintln!("loadgen: cannot read CPU time of server pid {pid}: {e}");
                None
            }
        });
        CpuSample {
            client,
            client_allocs: alloc_count(),
            server,
        }
    }
}

/// Runs `bodies` (one thread each) through warm-up and the measured window.
pub fn run<B: ThreadBody>(
    bodies: Vec<B>,
    groups: usize,
    warmup: Duration,
    duration: Duration,
    server_pid: Option<u32>,
) -> Outcome {
    let shared = Arc::new(GateShared {
        ready: Barrier::new(bodies.len() + 1),
        go: Barrier::new(bodies.len() + 1),
        timeline: OnceLock::new(),
    });
    let handles: Vec<_> = bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            let gate = StartGate {
                shared: Arc::clone(&shared),
                waited: false,
            };
            thread::Builder::new()
                .name(format!("loadgen-{i}"))
                .spawn(move || body.run(gate, groups))
        })
        .collect();

    // Threads that failed to spawn never reach the barriers; stand in for them.
    let missing = handles.iter().filter(|h| h.is_err()).count();
    let stand_ins: Vec<_> = (0..missing)
        .map(|_| {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                shared.ready.wait();
                shared.go.wait();
            })
        })
        .collect();

    // perf is set up before the clock starts: on a loaded machine that takes longer than a
    // warm-up, and the counted window must still be the measured one.
    let mut counter = server_pid
        .filter(|_| COUNT_SERVER_SYSCALLS.load(Ordering::Relaxed))
        .and_then(|pid| match SyscallCounter::attach(pid) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("loadgen: cannot start perf to count syscalls: {e}");
                None
            }
        });

    shared.ready.wait();
    let timeline = Timeline::starting_now(warmup, duration);
    let _ = shared.timeline.set(timeline);
    shared.go.wait();
    sleep_until(timeline.warm_end());
    if let Some(c) = counter.as_mut() {
        if let Err(e) = c.enable() {
            eprintln!("loadgen: perf: {e}");
            counter = None;
        }
    }
    let before = CpuSample::take(server_pid);
    sleep_until(timeline.end());
    let after = CpuSample::take(server_pid);
    let server_syscalls = counter.and_then(|c| match c.finish() {
        Ok(counts) => Some(counts),
        Err(e) => {
            eprintln!("loadgen: perf: {e}");
            None
        }
    });

    let mut totals = vec![GroupStats::default(); groups];
    for handle in handles {
        let joined = handle
            .map_err(|e| e.to_string())
            .and_then(|h| h.join().map_err(|_| "load thread panicked".to_string()));
        match joined {
            Ok(stats) => {
                for (total, s) in totals.iter_mut().zip(&stats) {
                    total.merge(s);
                }
            }
            Err(e) => {
                eprintln!("loadgen: {e}");
                if let Some(first) = totals.first_mut() {
                    first.errors += 1;
                }
            }
        }
    }
    for stand_in in stand_ins {
        let _ = stand_in.join();
    }

    Outcome {
        groups: totals,
        window: timeline.window(),
        client_cpu_s: after.client - before.client,
        server_cpu_s: after
            .server
            .zip(before.server)
            .map(|(a, b)| a.total - b.total),
        server_user_sys_s: after
            .server
            .zip(before.server)
            .and_then(|(a, b)| a.user_sys.zip(b.user_sys))
            .map(|(a, b)| (a.0 - b.0, a.1 - b.1)),
        server_syscalls,
        client_allocs: (before.client_allocs > 0)
            .then(|| after.client_allocs - before.client_allocs),
    }
}

fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        thread::sleep(deadline - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_window_excludes_warmup() {
        let t = Timeline::starting_now(Duration::from_millis(10), Duration::from_millis(20));
        assert!(!t.in_window(9_999_999));
        assert!(t.in_window(10_000_000));
        assert!(t.in_window(29_999_999));
        assert!(!t.in_window(30_000_000));
        assert!(!t.ended(29_999_999));
        assert!(t.ended(30_000_000));
        assert_eq!(t.window(), Duration::from_millis(20));
        assert_eq!(t.end() - t.warm_end(), Duration::from_millis(20));
    }

    struct Counting(u64);

    impl ThreadBody for Counting {
        fn run(self, mut gate: StartGate, groups: usize) -> Vec<GroupStats> {
            let timeline = gate.wait().expect("timeline is set before go");
            let mut stats = vec![GroupStats::default(); groups];
            while timeline.now_ns() < timeline.warm_end_ns {}
            for _ in 0..self.0 {
                stats[0].record(1000, 8);
            }
            stats
        }
    }

    struct FailsEarly;

    impl ThreadBody for FailsEarly {
        fn run(self, _gate: StartGate, groups: usize) -> Vec<GroupStats> {
            let mut stats = vec![GroupStats::default(); groups];
            stats[1].errors = 1;
            stats
        }
    }

    enum Body {
        Counting(Counting),
        FailsEarly(FailsEarly),
    }

    impl ThreadBody for Body {
        fn run(self, gate: StartGate, groups: usize) -> Vec<GroupStats> {
            match self {
                Body::Counting(b) => b.run(gate, groups),
                Body::FailsEarly(b) => b.run(gate, groups),
            }
        }
    }

    #[test]
    fn merges_threads_and_survives_a_thread_that_never_starts() {
        let bodies = vec![
            Body::Counting(Counting(3)),
            Body::FailsEarly(FailsEarly),
            Body::Counting(Counting(4)),
        ];
        let out = run(
            bodies,
            2,
            Duration::from_millis(5),
            Duration::from_millis(20),
            None,
        );
        assert_eq!(out.groups[0].requests, 7);
        assert_eq!(out.groups[0].payload_bytes, 56);
        assert_eq!(out.groups[1].errors, 1);
        assert_eq!(out.window, Duration::from_millis(20));
        assert!(out.client_cpu_s >= 0.0);
        assert!(out.server_cpu_s.is_none());
    }
}
