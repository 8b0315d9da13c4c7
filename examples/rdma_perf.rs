//! rdma_perf: request/response latency and throughput over RDMA (or TCP for comparison), in
//! the spirit of brpc's `example/rdma_performance`. Server and client run in one process on
//! separate runtimes (separate shard threads), so each side's CPU use is measured on its own.
//!
//!     rdma_perf [--transport rdma|tcp] [--mode polling|polling-yield|event|adaptive[:US]]
//!               [--conns 1] [--depth 1] [--size 4096] [--echo on|off]
//!               [--duration-ms 3000] [--warmup-ms 500] [--idle-ms 1000]
//!               [--addr IP] [--server-cpu N] [--client-cpu N] [--bandwidth on|off]
//!               [--solicited on|off] [--large-threshold BYTES|off] [--registered on|off]
//!               [--spin-us US]
//!
//! `--spin-us` sets both runtimes' `spin_before_park` (how long an idle shard spins before
//! it parks in its ring; the runtime's default when unset).
//!
//! `--large-threshold` sets `RdmaConfig::large_message_threshold` (default 256 KiB: larger
//! attachments go by RDMA READ from the sender's memory; `off` copies everything through the
//! send chunks). `--registered on` sends the request attachment from a `RegisteredBuf`
//! (registered once, sent by READ whatever its size) instead of registering it per message.
//!
//! `--solicited on` sets `RdmaConfig::solicited_wakeups` (event and adaptive modes: a send's
//! own completion wakes nobody). Latency is the full round trip (request out, response back). `--bandwidth on` is the
//! bandwidth mode: requests carry `--size` bytes and replies none (`--echo off`), with 16
//! calls in flight unless `--depth` says otherwise; `send_mib_s` is then the one-way
//! throughput, in perftest's unit (MiB/s, 2^20 bytes), to set beside `ib_send_bw -R` and
//! `ib_write_bw -R` (vm/bench/rdma-bw.sh). `--idle-ms` keeps the
//! connections open and idle after the load and reports the server's CPU while idle (what
//! adaptive mode saves over polling). Needs an RDMA device for `--transport rdma`: run it
//! inside the soft-RoCE VM with `cargo xtask vm -- target/release/examples/rdma_perf ...`.

#[path = "support/thread_cpu.rs"]
mod thread_cpu;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use thread_cpu::thread_cpu_seconds;

use bytes::Bytes;
use corewire::runtime::RuntimeBuilder;
use corewire::transport::rdma::{self, PollerMode, RdmaConfig, RdmaEndpoint};
use corewire::transport::Connection;
use corewire::TcpEndpoint;
use corewire::{
    service_id, spawn_local, Client, ClientOptions, Request, Response, Runtime, Server, Service,
    Status,
};
use hdrhistogram::Histogram;

struct Echo;

impl Service for Echo {
    const ID: u32 = service_id("perf-echo");

    async fn call(&self, req: Request) -> Result<Response, Status> {
        // method 0: echo the attachment back; method 1: reply empty.
        Ok(match req.method {
            0 => Response::default().with_attachment(req.attachment),
            _ => Response::default(),
        })
    }
}

#[derive(Debug, Clone)]
struct Opts {
    transport: String,
    mode: PollerMode,
    mode_name: String,
    conns: usize,
    depth: usize,
    size: usize,
    echo: bool,
    duration: Duration,
    warmup: Duration,
    idle: Duration,
    addr: std::net::IpAddr,
    server_cpu: usize,
    client_cpu: usize,
    spin: Option<Duration>,
    bandwidth: bool,
    solicited: bool,
    large_threshold: Option<usize>,
    registered: bool,
}

#[derive(clap::Parser)]
#[command(
    name = "rdma_perf",
    about = "RPC echo latency and bandwidth over RDMA (or TCP)"
)]
struct Cli {
    #[arg(long, value_parser = ["rdma", "tcp"], default_value = "rdma")]
    transport: String,
    /// The poller of both sides.
    #[arg(
        long,
        value_name = "polling|event|adaptive[:US]",
        default_value = "polling"
    )]
    mode: String,
    #[arg(long, value_name = "N", default_value_t = 1)]
    conns: usize,
    /// Calls in flight per connection (default 1; 16 with --bandwidth on).
    #[arg(long, value_name = "N")]
    depth: Option<usize>,
    /// Payload bytes.
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// Echo the payload back (off: empty replies).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off)]
    echo: bool,
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    duration_ms: u64,
    #[arg(long, value_name = "MS", default_value_t = 500)]
    warmup_ms: u64,
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    idle_ms: u64,
    /// The RDMA device's address (default: the test device's).
    #[arg(long, value_name = "IP")]
    addr: Option<std::net::IpAddr>,
    #[arg(long, value_name = "CPU", default_value_t = 0)]
    server_cpu: usize,
    #[arg(long, value_name = "CPU", default_value_t = 1)]
    client_cpu: usize,
    /// How long an idle shard polls before sleeping.
    #[arg(long, value_name = "US")]
    spin_us: Option<u64>,
    /// Bandwidth mode: requests of --size bytes, empty replies.
    #[arg(long, value_name = "on|off", default_value = "off", value_parser = on_off)]
    bandwidth: bool,
    #[arg(long, value_name = "on|off", default_value = "off", value_parser = on_off)]
    solicited: bool,
    /// Payloads from this size go by RDMA READ (off: never; default: the transport's).
    #[arg(long, value_name = "BYTES|off")]
    large_threshold: Option<String>,
    #[arg(long, value_name = "on|off", default_value = "off", value_parser = on_off)]
    registered: bool,
}

fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err("expected on or off".into()),
    }
}

fn parse() -> Result<Opts, String> {
    let cli = <Cli as clap::Parser>::parse();
    let large_threshold = match cli.large_threshold.as_deref() {
        None => RdmaConfig::default().large_message_threshold,
        Some("off") => None,
        Some(n) => Some(
            n.parse()
                .map_err(|_| format!("--large-threshold: bad number {n:?}"))?,
        ),
    };
    Ok(Opts {
        transport: cli.transport,
        mode: cli.mode.parse()?,
        mode_name: cli.mode,
        conns: cli.conns,
        depth: cli.depth.unwrap_or(if cli.bandwidth { 16 } else { 1 }),
        size: cli.size,
        echo: cli.echo && !cli.bandwidth,
        duration: Duration::from_millis(cli.duration_ms),
        warmup: Duration::from_millis(cli.warmup_ms),
        idle: Duration::from_millis(cli.idle_ms),
        addr: cli.addr.unwrap_or_else(corewire_verbs::testing::rdma_addr),
        server_cpu: cli.server_cpu,
        client_cpu: cli.client_cpu,
        spin: cli.spin_us.map(Duration::from_micros),
        bandwidth: cli.bandwidth,
        solicited: cli.solicited,
        large_threshold,
        registered: cli.registered,
    })
}

type Hist = Rc<RefCell<Histogram<u64>>>;

async fn drive<C: Connection>(client: Client<C>, o: Opts, start: Instant, hist: Hist) -> u64 {
    // Registered once on this (the client's) shard, kept for the whole run: every call
    // sends it by READ.
    let registered = (o.registered && o.transport == "rdma")
        .then(|| rdma::RegisteredBuf::new(vec![0x5a; o.size]).expect("register the attachment"));
    let payload = match &registered {
        Some(r) => r.bytes(),
        None => Bytes::from(vec![0x5a; o.size]),
    };
    let method = if o.echo { 0 } else { 1 };
    let measure_from = start + o.warmup;
    let end = measure_from + o.duration;
    let bandwidth = o.bandwidth;
    let tasks: Vec<_> = (0..o.depth)
        .map(|_| {
            let client = client.clone();
            let payload = payload.clone();
            let hist = hist.clone();
            spawn_local(async move {
                let mut n = 0u64;
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        return n;
                    }
                    let reply = client
                        .request(Echo::ID, method)
                        .attachment(payload.clone())
                        .send()
                        .await
                        .expect("call failed");
                    let t1 = Instant::now();
                    assert_eq!(
                        reply.attachment.len(),
                        if method == 0 { payload.len() } else { 0 }
                    );
                    if t0 >= measure_from && t1 <= end {
                        let _ = hist
                            .borrow_mut()
                            .record(t1.duration_since(t0).as_nanos() as u64);
                        if !bandwidth {
                            n += 1;
                        }
                    }
                    // Large calls at depth take long: throughput counts every call that
                    // completes in the window, wherever it started.
                    if bandwidth && t1 >= measure_from && t1 <= end {
                        n += 1;
                    }
                }
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap_or(0);
    }
    total
}

/// `--spin-us`: how long an idle shard spins before it parks (the runtime's default if unset).
fn spin(b: RuntimeBuilder, spin: Option<Duration>) -> RuntimeBuilder {
    match spin {
        Some(d) => b.spin_before_park(d),
        None => b,
    }
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
    let command: Vec<String> = std::env::args().collect();
    let server_rt = spin(Runtime::builder(), o.spin)
        .shards(1)
        .cpus(vec![o.server_cpu])
        .name("srv")
        .build()
        .expect("server runtime");
    let client_rt = spin(Runtime::builder(), o.spin)
        .shards(1)
        .cpus(vec![o.client_cpu])
        .name("cli")
        .build()
        .expect("client runtime");
    let server = Server::builder().service(|_| Echo).build();
    let rdma_config = {
        let mut c = RdmaConfig::default();
        c.mode = o.mode;
        c.solicited_wakeups = o.solicited;
        c.large_message_threshold = o.large_threshold;
        c
    };
    let (addr, _tcp_handle, rdma_handle): (SocketAddr, _, _) = if o.transport == "rdma" {
        for rt in [&server_rt, &client_rt] {
            if let Err(e) = rdma::install(rt, rdma_config.clone()) {
                eprintln!(
                    "rdma_perf: {e}\n{}",
                    corewire_verbs::testing::NO_DEVICE_MESSAGE
                );
                std::process::exit(1);
            }
        }
        let addr = SocketAddr::new(o.addr, 18515);
        let h = server
            .serve(&server_rt, RdmaEndpoint::bind(addr))
            .expect("rdma listen");
        (addr, None, Some(h))
    } else {
        let h = server
            .serve(
                &server_rt,
                TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()),
            )
            .expect("tcp listen");
        (h.local_addr(), Some(h), None)
    };

    let start = Instant::now() + Duration::from_millis(200);
    let cpu0 = (thread_cpu_seconds("srv"), thread_cpu_seconds("cli"));
    let t0 = Instant::now();
    let opts = o.clone();
    let run = client_rt.spawn_on(0, move || async move {
        let hist: Hist = Rc::new(RefCell::new(Histogram::new(3).unwrap()));
        let mut clients = Vec::new();
        for _ in 0..opts.conns {
            let co = {
                let mut o = ClientOptions::default();
                o.window = opts.depth.max(1);
                o
            };
            if opts.transport == "rdma" {
                let c = Client::connect_rdma(addr, co).await.expect("rdma connect");
                clients.push(spawn_local(drive(c, opts.clone(), start, hist.clone())));
            } else {
                let c = Client::connect_tcp(addr, co).await.expect("tcp connect");
                clients.push(spawn_local(drive(c, opts.clone(), start, hist.clone())));
            }
        }
        let mut n = 0;
        for c in clients {
            n += c.await.unwrap_or(0);
        }
        let h = hist.borrow().clone();
        // Hold the connections open and idle, to measure idle CPU.
        let idle_cpu0 = thread_cpu_seconds("srv");
        corewire::sleep(opts.idle).await;
        let idle_cpu = thread_cpu_seconds("srv") - idle_cpu0;
        (n, h, idle_cpu)
    });
    let (requests, hist, idle_cpu) = run.wait().expect("client run");
    let wall = t0.elapsed().as_secs_f64() - o.idle.as_secs_f64();
    let cpu1 = (thread_cpu_seconds("srv"), thread_cpu_seconds("cli"));
    let secs = o.duration.as_secs_f64();
    let qps = requests as f64 / secs;
    let bytes_per_req = o.size * if o.echo { 2 } else { 1 };
    let mbps = qps * bytes_per_req as f64 / 1e6;
    // What the client sent, in perftest's unit.
    let send_mib_s = qps * o.size as f64 / (1u64 << 20) as f64;
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let server_cpu = 100.0 * (cpu1.0 - cpu0.0 - idle_cpu) / wall.max(1e-9);
    let client_cpu = 100.0 * (cpu1.1 - cpu0.1) / wall.max(1e-9);
    let idle_pct = 100.0 * idle_cpu / o.idle.as_secs_f64().max(1e-9);
    println!("command: {}", command.join(" "));
    println!(
        "transport={} mode={} conns={} depth={} size={} echo={} | {:.2} MiB/s sent | avg={:.1}us p90={:.1}us p99={:.1}us p99.9={:.1}us | {:.0} qps {:.2} MB/s | server_cpu={:.0}% client_cpu={:.0}% server_idle_cpu={:.1}%",
        o.transport,
        if o.transport == "rdma" { o.mode_name.as_str() } else { "-" },
        o.conns,
        o.depth,
        o.size,
        if o.echo { "on" } else { "off" },
        send_mib_s,
        hist.mean() / 1000.0,
        us(0.90),
        us(0.99),
        us(0.999),
        qps,
        mbps,
        server_cpu,
        client_cpu,
        idle_pct,
    );
    println!(
        "{{\"transport\":\"{}\",\"mode\":\"{}\",\"conns\":{},\"depth\":{},\"size\":{},\"echo\":{},\"requests\":{},\"avg_us\":{:.2},\"p50_us\":{:.2},\"p90_us\":{:.2},\"p99_us\":{:.2},\"p999_us\":{:.2},\"qps\":{:.0},\"mb_s\":{:.3},\"server_cpu_pct\":{:.1},\"client_cpu_pct\":{:.1},\"server_idle_cpu_pct\":{:.2},\"bandwidth\":{},\"send_mib_s\":{:.3},\"solicited\":{},\"large_threshold\":{},\"registered\":{}}}",
        o.transport,
        o.mode_name,
        o.conns,
        o.depth,
        o.size,
        o.echo,
        requests,
        hist.mean() / 1000.0,
        us(0.5),
        us(0.90),
        us(0.99),
        us(0.999),
        qps,
        mbps,
        server_cpu,
        client_cpu,
        idle_pct,
        o.bandwidth,
        send_mib_s,
        o.solicited,
        o.large_threshold.map_or("null".into(), |t| t.to_string()),
        o.registered
    );
    if let Some(h) = rdma_handle {
        h.stop();
    }
    client_rt.shutdown();
    server_rt.shutdown();
}
