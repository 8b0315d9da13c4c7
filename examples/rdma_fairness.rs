//! rdma_fairness: the fairness layout of `benchctl fairness` over RDMA.
//! One server shard runs the RPC echo service with a handler cost
//! (`--hash-rounds` FNV-1a passes over each payload), with the CQ poller in `--mode`; on it,
//! `--hot-conns` connections keep `--hot-depth` calls in flight each on one listener and a
//! probe keeps one call in flight on a second listener, so the probe's head-of-line counts
//! are its own. Server and client are separate runtimes (one shard each, separate threads)
//! in this process, both on the same RDMA device (rxe in the VM: client and server must
//! share it).
//!
//!     rdma_fairness [--budget unlimited|N] [--mode polling|event|adaptive[:US]]
//!                   [--client-mode event|polling|...]
//!                   [--hot-conns 8] [--hot-depth 256] [--size 64] [--hash-rounds 32]
//!                   [--duration-ms 2000] [--warmup-ms 500] [--addr IP]
//!                   [--server-cpu 0] [--client-cpu 1]
//!
//! Prints one JSON line: the probe's latency (p50/p99/p99.9, full round trip), its
//! head-of-line counts (messages the server shard handed up while a probe request waited),
//! hot throughput, the calls the hot connections actually had in flight (sampled every
//! millisecond by the client), the server's RDMA counters `max_conn_recvs_per_poll` (receive
//! completions one connection consumed in one CQ poller pass) and `max_round_frames` (frames
//! one connection handed up in one budget round), the server's completions per call over the
//! measurement window (`cqes_per_call`: replies go out in smaller messages when a budget cuts
//! rounds short), and both sides' CPU. The budget applies to
//! the server only; the client keeps the default. Run it inside the soft-RoCE VM
//! (`vm/bench/rdma-fairness.sh` runs the whole table).

#[path = "support/thread_cpu.rs"]
mod thread_cpu;
use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use thread_cpu::thread_cpu_seconds;

use bytes::Bytes;
use corewire::transport::rdma::{self, PollerMode, RdmaConfig, RdmaEndpoint};
use corewire::{
    service_id, sleep, spawn_local, Budget, CallNow, Client, ClientOptions, Request, Response,
    Runtime, Server, Service, Status,
};
use hdrhistogram::Histogram;

/// Echoes the payload after `rounds` passes of FNV-1a over it (the fairness suite's handler
/// cost; the same function as `corewire_bench::corewire_rpc::spend`).
struct HashEcho {
    rounds: u32,
}

impl HashEcho {
    fn answer(&self, req: Request) -> Response {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for _ in 0..self.rounds {
            for &b in std::hint::black_box(&req.payload[..]) {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        std::hint::black_box(hash);
        Response::new(req.payload)
    }
}

impl Service for HashEcho {
    const ID: u32 = service_id("corewire.bench.Echo");

    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(self.answer(req))
    }

    /// Answered on the fast path, as the TCP suite's server does.
    fn call_now(&self, req: Request, _reply: corewire::ReplyTo<'_>) -> CallNow {
        CallNow::Done(Ok(self.answer(req)))
    }
}

#[derive(Debug, Clone)]
struct Opts {
    budget: Budget,
    budget_name: String,
    mode: PollerMode,
    mode_name: String,
    client_mode: PollerMode,
    client_mode_name: String,
    hot_conns: usize,
    hot_depth: usize,
    size: usize,
    hash_rounds: u32,
    duration: Duration,
    warmup: Duration,
    addr: IpAddr,
    server_cpu: usize,
    client_cpu: usize,
}

#[derive(clap::Parser)]
#[command(
    name = "rdma_fairness",
    about = "The fairness layout of `benchctl fairness` over RDMA: hot connections and a probe"
)]
struct Cli {
    /// Messages a connection handles per round.
    #[arg(long, value_name = "unlimited|N", default_value = "unlimited")]
    budget: String,
    /// The server's poller.
    #[arg(
        long,
        value_name = "polling|event|adaptive[:US]",
        default_value = "polling"
    )]
    mode: String,
    /// The client's poller.
    #[arg(
        long,
        value_name = "polling|event|adaptive[:US]",
        default_value = "event"
    )]
    client_mode: String,
    #[arg(long, value_name = "N", default_value_t = 8)]
    hot_conns: usize,
    /// Calls in flight per hot connection (at least 1).
    #[arg(long, value_name = "N", default_value_t = 256)]
    hot_depth: usize,
    /// Payload bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// FNV-1a passes over each payload (the handler's cost).
    #[arg(long, value_name = "N", default_value_t = 32)]
    hash_rounds: u32,
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    duration_ms: u64,
    #[arg(long, value_name = "MS", default_value_t = 500)]
    warmup_ms: u64,
    /// The RDMA device's address (default: the test device's).
    #[arg(long, value_name = "IP")]
    addr: Option<IpAddr>,
    #[arg(long, value_name = "CPU", default_value_t = 0)]
    server_cpu: usize,
    #[arg(long, value_name = "CPU", default_value_t = 1)]
    client_cpu: usize,
}

fn parse() -> Result<Opts, String> {
    let cli = <Cli as clap::Parser>::parse();
    let budget = match cli.budget.as_str() {
        "unlimited" => Budget::UNLIMITED,
        n => {
            let n: u64 = n
                .parse()
                .map_err(|_| format!("--budget: bad number {n:?}"))?;
            Budget::messages(n.max(1) as u32)
        }
    };
    Ok(Opts {
        budget,
        budget_name: cli.budget,
        mode: cli.mode.parse()?,
        mode_name: cli.mode,
        client_mode: cli.client_mode.parse()?,
        client_mode_name: cli.client_mode,
        hot_conns: cli.hot_conns,
        hot_depth: cli.hot_depth.max(1),
        size: cli.size,
        hash_rounds: cli.hash_rounds,
        duration: Duration::from_millis(cli.duration_ms),
        warmup: Duration::from_millis(cli.warmup_ms),
        addr: cli.addr.unwrap_or_else(corewire_verbs::testing::rdma_addr),
        server_cpu: cli.server_cpu,
        client_cpu: cli.client_cpu,
    })
}

/// What the client measured.
struct ClientFigures {
    probe: Histogram<u64>,
    hot_calls: u64,
    /// Mean of the hot connections' calls in flight, summed over connections.
    in_flight: f64,
    /// Server and client CPU over the measurement window, % of one CPU.
    cpu_pct: (f64, f64),
}

/// Keep one call in flight on `client` until `end`; latencies of calls inside the
/// measurement window go to `hist`, and the number of such calls is returned.
async fn call_loop(
    client: Client<rdma::RdmaConnection>,
    payload: Bytes,
    window: (Instant, Instant),
    hist: Option<Rc<RefCell<Histogram<u64>>>>,
) -> u64 {
    let (from, end) = window;
    let mut n = 0;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            return n;
        }
        let reply = client
            .request(HashEcho::ID, 0)
            .payload(payload.clone())
            .send()
            .await
            .expect("call failed");
        let t1 = Instant::now();
        assert_eq!(reply.payload.len(), payload.len());
        if t0 >= from && t1 <= end {
            n += 1;
            if let Some(h) = &hist {
                let _ = h
                    .borrow_mut()
                    .record(t1.duration_since(t0).as_nanos() as u64);
            }
        }
    }
}

async fn run_client(
    o: Opts,
    hot: SocketAddr,
    probe: SocketAddr,
    window_tx: mpsc::Sender<(Instant, Instant)>,
) -> ClientFigures {
    let payload = Bytes::from(vec![0x5a; o.size]);
    let opts = |window: usize| {
        let mut o = ClientOptions::default();
        o.window = window;
        o
    };
    let mut hot_clients = Vec::new();
    for _ in 0..o.hot_conns {
        let c = Client::connect_rdma(hot, opts(o.hot_depth))
            .await
            .expect("rdma connect (hot)");
        hot_clients.push(c);
    }
    let probe_client = Client::connect_rdma(probe, opts(1))
        .await
        .expect("rdma connect (probe)");
    // Connection set-up is slow under emulation: the clock starts once all are up.
    let from = Instant::now() + o.warmup;
    let end = from + o.duration;
    // The main thread reads the server's counters at both ends of the window.
    let _ = window_tx.send((from, end));
    let mut hot_tasks = Vec::new();
    for c in &hot_clients {
        for _ in 0..o.hot_depth {
            hot_tasks.push(spawn_local(call_loop(
                c.clone(),
                payload.clone(),
                (from, end),
                None,
            )));
        }
    }
    let hist = Rc::new(RefCell::new(Histogram::new(3).unwrap()));
    let probe_task = spawn_local(call_loop(
        probe_client,
        payload.clone(),
        (from, end),
        Some(hist.clone()),
    ));
    // Sample the hot calls in flight (sent, reply not yet read by the client) every
    // millisecond of the measurement window.
    let sampler = {
        let hot_clients = hot_clients.clone();
        spawn_local(async move {
            let (mut sum, mut samples) = (0u64, 0u64);
            while Instant::now() < end {
                sleep(Duration::from_millis(1)).await;
                let now = Instant::now();
                if now >= from && now < end {
                    sum += hot_clients
                        .iter()
                        .map(|c| c.in_flight() as u64)
                        .sum::<u64>();
                    samples += 1;
                }
            }
            sum as f64 / samples.max(1) as f64
        })
    };
    // CPU over the measurement window only (not connection set-up).
    let cpu = || (thread_cpu_seconds("srv"), thread_cpu_seconds("cli"));
    sleep(from.saturating_duration_since(Instant::now())).await;
    let cpu0 = cpu();
    sleep(end.saturating_duration_since(Instant::now())).await;
    let cpu1 = cpu();
    let secs = o.duration.as_secs_f64().max(1e-9);
    let cpu_pct = (
        100.0 * (cpu1.0 - cpu0.0) / secs,
        100.0 * (cpu1.1 - cpu0.1) / secs,
    );
    let mut hot_calls = 0;
    for t in hot_tasks {
        hot_calls += t.await.unwrap_or(0);
    }
    let _ = probe_task.await;
    let in_flight = sampler.await.unwrap_or(0.0);
    let probe = hist.borrow().clone();
    ClientFigures {
        probe,
        hot_calls,
        in_flight,
        cpu_pct,
    }
}

/// The server shard's completions, CQ polls and budget yields so far.
fn server_counters(rt: &Runtime) -> (u64, u64, u64) {
    let st = rdma::stats(rt).first().copied().unwrap_or_default();
    let yields = rt.stats().iter().map(|s| s.budget_exhausted).sum();
    (st.completions, st.cq_polls, yields)
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let o = match parse() {
        Ok(o) => o,
        Err(e) => <Cli as clap::CommandFactory>::command()
            .error(clap::error::ErrorKind::ValueValidation, e)
            .exit(),
    };
    let runtime = |cpu, name| {
        Runtime::builder()
            .shards(1)
            .cpus(vec![cpu])
            .name(name)
            .build()
            .expect("runtime")
    };
    let (server_rt, client_rt) = (runtime(o.server_cpu, "srv"), runtime(o.client_cpu, "cli"));
    let base = RdmaConfig::default();
    let server_config = {
        let mut c = base.clone();
        c.budget = o.budget;
        c.mode = o.mode;
        c
    };
    let client_config = {
        let mut c = base.clone();
        c.mode = o.client_mode;
        c
    };
    for (rt, config) in [(&server_rt, server_config), (&client_rt, client_config)] {
        if let Err(e) = rdma::install(rt, config) {
            eprintln!(
                "rdma_fairness: {e}\n{}",
                corewire_verbs::testing::NO_DEVICE_MESSAGE
            );
            std::process::exit(1);
        }
    }
    let rounds = o.hash_rounds;
    let server = Server::builder()
        .service(move |_| HashEcho { rounds })
        .build();
    let (hot_addr, probe_addr) = (
        SocketAddr::new(o.addr, 18600),
        SocketAddr::new(o.addr, 18601),
    );
    let hot = server
        .serve(&server_rt, RdmaEndpoint::bind(hot_addr))
        .expect("rdma listen (hot)");
    let probe = server
        .serve(&server_rt, RdmaEndpoint::bind(probe_addr))
        .expect("rdma listen (probe)");

    let opts = o.clone();
    let (window_tx, window_rx) = mpsc::channel();
    let client = client_rt.spawn_on(0, move || run_client(opts, hot_addr, probe_addr, window_tx));
    let window = window_rx.recv().ok().map(|(from, end)| {
        std::thread::sleep(from.saturating_duration_since(Instant::now()));
        let before = server_counters(&server_rt);
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        let after = server_counters(&server_rt);
        (after.0 - before.0, after.1 - before.1, after.2 - before.2)
    });
    let figures = client.wait().expect("client run");
    let (window_cqes, window_polls, window_yields) = window.unwrap_or_default();
    let calls = (figures.hot_calls + figures.probe.len()).max(1);
    let rdma_stats = rdma::stats(&server_rt).first().copied().unwrap_or_default();
    let exhausted: u64 = server_rt.stats().iter().map(|s| s.budget_exhausted).sum();
    let (probe_hol, hot_hol) = (probe.head_of_line(), hot.head_of_line());
    let us = |q: f64| figures.probe.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{{\"transport\":\"rdma\",\"mode\":\"{}\",\"client_mode\":\"{}\",\"budget\":\"{}\",\"hot_conns\":{},\"hot_depth\":{},\
         \"hot_in_flight\":{:.1},\"size\":{},\"hash_rounds\":{},\"probe_calls\":{},\
         \"probe_p50_us\":{:.1},\"probe_p99_us\":{:.1},\"probe_p999_us\":{:.1},\
         \"probe_hol_p50\":{},\"probe_hol_p99\":{},\"probe_hol_max\":{},\"hot_hol_p99\":{},\
         \"hot_msgs_s\":{:.0},\"max_conn_recvs_per_poll\":{},\"max_round_frames\":{},\
         \"budget_exhausted\":{},\"cq_polls\":{},\"completions\":{},\"poll_batch\":{},\
         \"window_cqes\":{},\"window_cq_polls\":{},\"window_budget_yields\":{},\"cqes_per_call\":{:.3},\
         \"window\":{},\"server_cpu_pct\":{:.0},\"client_cpu_pct\":{:.0}}}",
        o.mode_name,
        o.client_mode_name,
        o.budget_name,
        o.hot_conns,
        o.hot_depth,
        figures.in_flight,
        o.size,
        o.hash_rounds,
        figures.probe.len(),
        us(0.5),
        us(0.99),
        us(0.999),
        probe_hol.quantile(0.5),
        probe_hol.quantile(0.99),
        probe_hol.max,
        hot_hol.quantile(0.99),
        figures.hot_calls as f64 / o.duration.as_secs_f64(),
        rdma_stats.max_conn_recvs_per_poll,
        rdma_stats.max_round_frames,
        exhausted,
        rdma_stats.cq_polls,
        rdma_stats.completions,
        base.poll_batch,
        window_cqes,
        window_polls,
        window_yields,
        window_cqes as f64 / calls as f64,
        base.window,
        figures.cpu_pct.0,
        figures.cpu_pct.1,
    );
    hot.stop();
    probe.stop();
    client_rt.shutdown();
    server_rt.shutdown();
}
