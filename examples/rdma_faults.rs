//! rdma_faults: both ends of the two-VM fault suite (`vm/two-vm.sh faults`
//! boots the VMs, kills the server VM and cuts the link). Not a benchmark: it checks what a
//! client sees when its server's machine dies or the cable is cut, and prints JSON lines.
//!
//!     rdma_faults server --listen 10.78.0.1:7878
//!     rdma_faults client --connect 10.78.0.1:7878 [--faults server_kill,link_cut]
//!
//! The client connects (retrying while the server VM boots), checks 50 calls, then for each
//! fault keeps 16 echo calls in flight and prints `{"event":"steady","fault":...}`: the
//! harness then injects the fault. It checks that every pending call fails (none hangs)
//! within `FAIL_BOUND` of the last reply, that the shard's connection resources go back to 0
//! within `RELEASE_BOUND`, then reconnects (the harness has restarted the server or restored
//! the link) and checks 50 calls again. Exit status 0 only if every check passed.
//!
//! Failure detection needs traffic, and a peer that acknowledged every request before dying
//! leaves nothing to retransmit: the transport's keepalive (`RdmaConfig::keepalive`, here
//! every 500 ms) probes a connection that completed nothing for an interval, and the probe
//! is what runs out of transport retries. To show that it is the keepalive that notices,
//! each phase also holds a second connection that carries nothing after its first call: it
//! must end too (`idle_closed`). QP settings: `RdmaConfig::retry_count` 6 (the default; rxe
//! retries forever at 7) and `ack_timeout` 16 (4.096 µs × 2^16 ≈ 0.27 s; rdma_cm's own is
//! ~2 s), so the retry budget is 7 × 0.27 s ≈ 1.9 s.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::transport::rdma::{self, PollerMode, RdmaConfig, RdmaEndpoint, RdmaStats};
use corewire::{
    service_id, sleep, spawn_local, Client, ClientOptions, Request, Response, Runtime, Server,
    Service, Status,
};

/// Every pending call must have failed this long after the last reply (the ~1.9 s retry
/// budget, the 500 ms keepalive, and TCG's slowness under a loaded host, with a margin).
const FAIL_BOUND: Duration = Duration::from_secs(30);
/// A failed connection's resources must be back within this.
const RELEASE_BOUND: Duration = Duration::from_secs(10);
/// How long the client keeps trying to reach a server that is booting or cut off.
const CONNECT_BOUND: Duration = Duration::from_secs(300);
/// 4.096 µs × 2^16 ≈ 0.27 s per try: short, yet well above a loaded TCG guest's stalls.
const ACK_TIMEOUT: u8 = 16;
/// The keepalive interval of the client's connections.
const KEEPALIVE: Duration = Duration::from_millis(500);
const IN_FLIGHT: usize = 16;
const VERIFY_CALLS: usize = 50;
const STEADY_CALLS: u64 = 300;
const ECHO: u32 = 0;
const EXIT: u32 = 1;

const NO_DEVICE: &str = "no RDMA device: rdma_faults runs inside the two-VM harness \
    (`vm/two-vm.sh faults`, see vm/README.md)";

/// Echo, plus a method that tells the server process to exit (the harness's clean stop).
struct FaultEcho {
    exit: Arc<AtomicBool>,
}

impl Service for FaultEcho {
    const ID: u32 = service_id("corewire.faults.Echo");

    async fn call(&self, req: Request) -> Result<Response, Status> {
        if req.method == EXIT {
            self.exit.store(true, Ordering::Relaxed);
            return Ok(Response::new(Bytes::new()));
        }
        Ok(Response::new(req.payload))
    }
}

/// The keepalive interval: `KEEPALIVE`, or `RDMA_FAULTS_KEEPALIVE_MS` (0 = off: the control
/// run, in which the idle connections must NOT be noticed and the suite must fail).
fn keepalive() -> Option<Duration> {
    match std::env::var("RDMA_FAULTS_KEEPALIVE_MS").map(|v| v.parse::<u64>()) {
        Ok(Ok(0)) => None,
        Ok(Ok(ms)) => Some(Duration::from_millis(ms)),
        _ => Some(KEEPALIVE),
    }
}

#[derive(clap::Parser)]
#[command(
    name = "rdma_faults",
    about = "RDMA fault suite: a server, and a client that injects faults"
)]
enum Cli {
    /// Serve until a client calls EXIT.
    Server {
        #[arg(long, value_name = "IP:PORT")]
        listen: SocketAddr,
    },
    /// Keep calls in flight while the faults happen; prints JSON lines.
    Client {
        #[arg(long, value_name = "IP:PORT")]
        connect: SocketAddr,
        /// Comma-separated.
        #[arg(long, value_name = "a,b", default_value = "server_kill,link_cut")]
        faults: String,
    },
}

/// One shard in event mode: the guests run one vCPU each without idle=poll (two TCG guests
/// on a shared 2-core host), so nothing may spin.
fn runtime() -> Runtime {
    let rt = Runtime::builder().shards(1).build().expect("runtime");
    let config = {
        let mut o = RdmaConfig::default();
        o.mode = PollerMode::Event;
        o.ack_timeout = Some(ACK_TIMEOUT);
        o.keepalive = keepalive();
        o
    };
    if let Err(e) = rdma::install(&rt, config) {
        eprintln!("{NO_DEVICE} ({e})");
        std::process::exit(2);
    }
    rt
}

fn stats(rt: &Runtime) -> RdmaStats {
    rdma::stats(rt).into_iter().next().unwrap_or_default()
}

fn json_stats(s: &RdmaStats) -> String {
    format!(
        "{{\"connections_open\":{},\"connections_opened\":{},\"connection_errors\":{},\
         \"pool_send_chunks\":{},\"cq_reserved\":{},\"srq_grants_outstanding\":{},\
         \"keepalives_sent\":{}}}",
        s.connections_open,
        s.connections_opened,
        s.connection_errors,
        s.pool_send_chunks,
        s.cq_reserved,
        s.srq_grants_outstanding,
        s.keepalives_sent
    )
}

fn main() {
    match <Cli as clap::Parser>::parse() {
        Cli::Server { listen } => server(listen),
        Cli::Client { connect, faults } => {
            let faults: Vec<String> = faults.split(',').map(str::to_owned).collect();
            let ok = client::run(connect, &faults);
            std::process::exit(if ok { 0 } else { 1 });
        }
    }
}

/// Serves until a client calls EXIT; prints its counters whenever they change.
fn server(listen: SocketAddr) {
    let rt = runtime();
    let exit = Arc::new(AtomicBool::new(false));
    let flag = exit.clone();
    let server = Server::builder()
        .service(move |_| FaultEcho { exit: flag.clone() })
        .build()
        .serve(&rt, RdmaEndpoint::bind(listen))
        .expect("rdma listen");
    println!("{{\"role\":\"server\",\"event\":\"listening\",\"addr\":\"{listen}\"}}");
    let started = Instant::now();
    let mut last = String::new();
    while !exit.load(Ordering::Relaxed) {
        let now = json_stats(&stats(&rt));
        if now != last {
            let t = started.elapsed().as_secs_f64();
            println!("{{\"role\":\"server\",\"event\":\"stats\",\"t_s\":{t:.2},\"stats\":{now}}}");
            last = now;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Let the EXIT reply go out before the connection closes under it.
    std::thread::sleep(Duration::from_millis(300));
    server.stop();
    std::thread::sleep(Duration::from_millis(300));
    let end = json_stats(&stats(&rt));
    println!("{{\"role\":\"server\",\"event\":\"exit\",\"stats\":{end}}}");
    rdma::uninstall(&rt);
    rt.shutdown();
}

mod client {
    use std::cell::RefCell;

    use super::*;

    enum Step {
        Fault(Outcome),
        /// The last reconnect worked and the server was told to exit.
        Done,
        ReconnectFailed,
    }

    /// What one fault did to the calls pending on the connection.
    struct Outcome {
        ok_calls: u64,
        pending_failed: usize,
        hung: usize,
        /// From the last reply to the last pending call's failure.
        fail_s: f64,
        /// The connection that carried nothing ended too (only a keepalive can notice).
        idle_closed: bool,
        errors: Vec<String>,
        /// The transport's own reason (the RPC client reports any end as a disconnect).
        end_reason: String,
    }

    #[derive(Default)]
    struct Tally {
        ok: u64,
        last_ok: Option<Instant>,
        failed: Vec<(Instant, String)>,
    }

    async fn connect(addr: SocketAddr) -> Result<(Client<rdma::RdmaConnection>, u32), String> {
        let started = Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Client::connect_rdma(addr, ClientOptions::default()).await {
                Ok(c) => return Ok((c, attempts)),
                Err(e) if started.elapsed() > CONNECT_BOUND => {
                    return Err(format!("{attempts} attempts, last: {e}"))
                }
                Err(_) => sleep(Duration::from_millis(500)).await,
            }
        }
    }

    async fn verify(client: &Client<rdma::RdmaConnection>) -> Result<(), String> {
        for i in 0..VERIFY_CALLS {
            let payload = Bytes::from(format!("verify {i}"));
            let reply = client
                .call(FaultEcho::ID, ECHO, payload.clone())
                .await
                .map_err(|e| format!("call {i}: {e}"))?;
            if reply != payload {
                return Err(format!("call {i}: wrong reply {reply:?}"));
            }
        }
        Ok(())
    }

    /// Connect after `after` (start, or a fault) and check calls work; then, if `fault` is
    /// given, keep calls in flight until the harness injects it and report what happened.
    async fn phase(addr: SocketAddr, after: String, fault: Option<String>) -> Step {
        let t0 = Instant::now();
        let result = match connect(addr).await {
            Ok((client, attempts)) => verify(&client).await.map(|()| (client, attempts)),
            Err(e) => Err(e),
        };
        let connect_s = t0.elapsed().as_secs_f64();
        let (client, attempts) = match result {
            Ok(c) => c,
            Err(e) => {
                println!(
                    "{{\"event\":\"reconnect\",\"after\":\"{after}\",\"ok\":false,\"s\":{connect_s:.2},\"error\":{e:?}}}"
                );
                return Step::ReconnectFailed;
            }
        };
        println!(
            "{{\"event\":\"reconnect\",\"after\":\"{after}\",\"ok\":true,\"s\":{connect_s:.2},\"attempts\":{attempts},\"verified_calls\":{VERIFY_CALLS}}}"
        );
        let Some(fault) = fault else {
            // The end: stop the server (its process exits 0, so the harness knows it was fine).
            let _ = client.call(FaultEcho::ID, EXIT, Bytes::new()).await;
            return Step::Done;
        };
        // A second connection that carries nothing from here on: only a keepalive notices
        // that its peer is gone.
        let idle = match connect(addr).await {
            Ok((idle, _)) => idle,
            Err(e) => {
                println!("{{\"event\":\"idle_connect\",\"ok\":false,\"error\":{e:?}}}");
                return Step::ReconnectFailed;
            }
        };
        if let Err(e) = idle
            .call(FaultEcho::ID, ECHO, Bytes::from_static(b"idle"))
            .await
        {
            println!("{{\"event\":\"idle_connect\",\"ok\":false,\"error\":\"{e}\"}}");
            return Step::ReconnectFailed;
        }
        Step::Fault(until_failure(client, idle, &fault).await)
    }

    async fn until_failure(
        client: Client<rdma::RdmaConnection>,
        idle: Client<rdma::RdmaConnection>,
        fault: &str,
    ) -> Outcome {
        let tally = Rc::new(RefCell::new(Tally::default()));
        let callers: Vec<_> = (0..IN_FLIGHT)
            .map(|i| {
                let (client, tally) = (client.clone(), tally.clone());
                spawn_local(async move {
                    let payload = Bytes::from(vec![i as u8; 64]);
                    loop {
                        match client.call(FaultEcho::ID, ECHO, payload.clone()).await {
                            Ok(_) => {
                                let mut t = tally.borrow_mut();
                                t.ok += 1;
                                t.last_ok = Some(Instant::now());
                            }
                            Err(e) => {
                                tally
                                    .borrow_mut()
                                    .failed
                                    .push((Instant::now(), e.to_string()));
                                return;
                            }
                        }
                    }
                })
            })
            .collect();
        while tally.borrow().ok < STEADY_CALLS && tally.borrow().failed.is_empty() {
            sleep(Duration::from_millis(20)).await;
        }
        let ok = tally.borrow().ok;
        println!("{{\"event\":\"steady\",\"fault\":\"{fault}\",\"ok_calls\":{ok},\"in_flight\":{IN_FLIGHT}}}");
        // Wait for every caller to fail and the idle connection to end, or give up FAIL_BOUND
        // after the last reply.
        let steady_at = Instant::now();
        loop {
            let done = {
                let t = tally.borrow();
                (t.failed.len() == IN_FLIGHT && idle.is_closed())
                    || t.last_ok.unwrap_or(steady_at).elapsed() > FAIL_BOUND
            };
            if done {
                break;
            }
            sleep(Duration::from_millis(20)).await;
        }
        let outcome = {
            let t = tally.borrow();
            let last_fail = t.failed.iter().map(|(at, _)| *at).max();
            let fail_s = match (t.last_ok, last_fail) {
                (Some(ok), Some(f)) => f.saturating_duration_since(ok).as_secs_f64(),
                _ => f64::NAN,
            };
            let mut errors: Vec<String> = t.failed.iter().map(|(_, e)| e.clone()).collect();
            errors.sort();
            errors.dedup();
            Outcome {
                ok_calls: t.ok,
                pending_failed: t.failed.len(),
                hung: IN_FLIGHT - t.failed.len(),
                fail_s,
                idle_closed: idle.is_closed(),
                errors,
                end_reason: client.connection().end_reason().unwrap_or_default(),
            }
        };
        let hung = outcome.hung;
        if hung == 0 {
            for c in callers {
                let _ = c.await;
            }
        }
        // The callers that hung (if any) keep their clones; ours goes here.
        drop(client);
        outcome
    }

    /// Waits for the shard's connection resources to be given back (to what they were
    /// before the first connection: the shared receive queue keeps its CQ entries); the
    /// time it took.
    fn released(rt: &Runtime, idle: &RdmaStats) -> (bool, f64, RdmaStats) {
        let t0 = Instant::now();
        loop {
            let s = stats(rt);
            let free = s.connections_open == 0
                && s.pool_send_chunks == 0
                && s.cq_reserved == idle.cq_reserved
                && s.srq_grants_outstanding == 0;
            if free || t0.elapsed() > RELEASE_BOUND {
                return (free, t0.elapsed().as_secs_f64(), s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs every fault in turn; true if every check passed.
    pub fn run(addr: SocketAddr, faults: &[String]) -> bool {
        let rt = runtime();
        let idle = stats(&rt);
        let mut all_ok = true;
        let mut after = "start".to_string();
        for step in 0..=faults.len() {
            let fault = faults.get(step).cloned();
            let prev = after.clone();
            let outcome = rt
                .spawn_on(0, move || phase(addr, prev, fault))
                .wait()
                .expect("client shard");
            let o = match outcome {
                Step::Fault(o) => o,
                Step::Done => break,
                Step::ReconnectFailed => {
                    all_ok = false;
                    break;
                }
            };
            let (free, release_s, s) = released(&rt, &idle);
            let ok = o.hung == 0 && o.fail_s <= FAIL_BOUND.as_secs_f64() && o.idle_closed && free;
            all_ok &= ok;
            println!(
                "{{\"event\":\"fault\",\"fault\":\"{}\",\"ok\":{ok},\"pending_failed\":{},\"hung\":{},\
                 \"fail_s\":{},\"fail_bound_s\":{},\"released\":{free},\"release_s\":{release_s:.2},\
                 \"release_bound_s\":{},\"ok_calls_before\":{},\"idle_closed\":{},\"errors\":{:?},\"end_reason\":{:?},\"stats\":{}}}",
                faults[step],
                o.pending_failed,
                o.hung,
                // null when no call failed (JSON has no NaN)
                if o.fail_s.is_nan() {
                    "null".to_string()
                } else {
                    format!("{:.2}", o.fail_s)
                },
                FAIL_BOUND.as_secs(),
                RELEASE_BOUND.as_secs(),
                o.ok_calls,
                o.idle_closed,
                o.errors,
                o.end_reason,
                json_stats(&s)
            );
            after = faults[step].clone();
        }
        println!("{{\"event\":\"done\",\"ok\":{all_ok}}}");
        if all_ok {
            rdma::uninstall(&rt);
        }
        rt.shutdown();
        all_ok
    }
}
