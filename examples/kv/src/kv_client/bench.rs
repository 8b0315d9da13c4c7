//! Closed-loop load over the binary protocol: `conns` connections spread over the client's
//! own shards, `depth` calls in flight on each, SET/GET in a fixed ratio over `keys` keys.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::runtime::{spawn_local, Runtime};
use corewire::transport::rdma::{self, RdmaConfig};
use corewire::transport::Connection;
use corewire::ClientOptions;
use hdrhistogram::Histogram;

use super::KvClient;

/// Which transport carries the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    /// rdma_cm + verbs; needs an RDMA device (soft-RoCE works).
    Rdma,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchConfig {
    pub transport: Transport,
    pub conns: usize,
    /// Calls in flight per connection.
    pub depth: usize,
    /// Value size in bytes.
    pub size: usize,
    /// Keys are `key:000000000000` .. `keys - 1`.
    pub keys: u64,
    pub duration: Duration,
    /// SET:GET ratio, e.g. 1:10.
    pub sets: u32,
    pub gets: u32,
    /// Client shard threads (default: min(conns, CPUs)).
    pub threads: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            transport: Transport::Tcp,
            conns: 4,
            depth: 16,
            size: 64,
            keys: 100_000,
            duration: Duration::from_secs(5),
            sets: 1,
            gets: 1,
            threads: 1,
        }
    }
}

#[derive(Debug, Clone)]
pub struct BenchReport {
    pub ops: u64,
    pub sets: u64,
    pub gets: u64,
    /// GETs that found their key.
    pub hits: u64,
    pub errors: u64,
    pub elapsed: Duration,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl BenchReport {
    pub fn qps(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ops={} (set={} get={} hits={}) errors={} in {:.2}s\nqps={:.0}\nlatency_us p50={} p99={} p99.9={} max={}",
            self.ops,
            self.sets,
            self.gets,
            self.hits,
            self.errors,
            self.elapsed.as_secs_f64(),
            self.qps(),
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us
        )
    }
}

/// What one client shard measured.
struct ShardTally {
    histogram: Histogram<u64>,
    sets: u64,
    gets: u64,
    hits: u64,
    errors: u64,
    first_error: Option<String>,
}

/// Runs the benchmark against the binary protocol at `addr` and blocks until it is done.
pub fn run(addr: SocketAddr, config: &BenchConfig) -> Result<BenchReport, String> {
    if config.conns == 0 || config.depth == 0 || config.sets + config.gets == 0 {
        return Err("conns, depth and the ratio must be positive".into());
    }
    let threads = config.threads.clamp(1, config.conns);
    let rt = Runtime::builder()
        .shards(threads)
        .name("kv-bench")
        .build()
        .map_err(|e| format!("client runtime: {e}"))?;
    if config.transport == Transport::Rdma {
        rdma::install(&rt, RdmaConfig::default()).map_err(|e| format!("RDMA transport: {e}"))?;
    }
    let started = Instant::now();
    let deadline = started + config.duration;
    let config_shared = config.clone();
    let handles = rt.spawn_on_all(move |shard| {
        let config = config_shared.clone();
        async move { run_shard(shard, threads, addr, config, deadline).await }
    });
    let mut total = ShardTally {
        histogram: new_histogram(),
        sets: 0,
        gets: 0,
        hits: 0,
        errors: 0,
        first_error: None,
    };
    for handle in handles {
        let tally = handle
            .wait()
            .map_err(|_| "a client shard died".to_string())??;
        total
            .histogram
            .add(&tally.histogram)
            .map_err(|e| format!("merging histograms: {e}"))?;
        total.sets += tally.sets;
        total.gets += tally.gets;
        total.hits += tally.hits;
        total.errors += tally.errors;
        total.first_error = total.first_error.or(tally.first_error);
    }
    let elapsed = started.elapsed();
    rt.shutdown();
    if let Some(error) = total.first_error {
        tracing::warn!(errors = total.errors, first = %error, "calls failed");
    }
    let h = &total.histogram;
    Ok(BenchReport {
        ops: total.sets + total.gets,
        sets: total.sets,
        gets: total.gets,
        hits: total.hits,
        errors: total.errors,
        elapsed,
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        max_us: h.max(),
    })
}

fn new_histogram() -> Histogram<u64> {
    // 1 µs .. 60 s at 3 significant digits; creation cannot fail with these bounds.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

async fn run_shard(
    shard: usize,
    threads: usize,
    addr: SocketAddr,
    config: BenchConfig,
    deadline: Instant,
) -> Result<ShardTally, String> {
    let options = {
        let mut o = ClientOptions::default();
        o.window = config.depth;
        o
    };
    let count = (shard..config.conns).step_by(threads).count();
    let connect_failed = |e: super::KvError| format!("connect {addr}: {e}");
    match config.transport {
        Transport::Tcp => {
            let mut clients = Vec::with_capacity(count);
            for _ in 0..count {
                clients.push(
                    KvClient::connect_tcp(addr, options)
                        .await
                        .map_err(connect_failed)?,
                );
            }
            drive(shard, clients, config, deadline).await
        }
        Transport::Rdma => {
            let mut clients = Vec::with_capacity(count);
            for _ in 0..count {
                clients.push(
                    KvClient::connect_rdma(addr, options)
                        .await
                        .map_err(connect_failed)?,
                );
            }
            drive(shard, clients, config, deadline).await
        }
    }
}

/// Runs `depth` workers on each of this shard's clients until the deadline.
async fn drive<C: Connection>(
    shard: usize,
    clients: Vec<KvClient<C>>,
    config: BenchConfig,
    deadline: Instant,
) -> Result<ShardTally, String> {
    let tally = Rc::new(RefCell::new(ShardTally {
        histogram: new_histogram(),
        sets: 0,
        gets: 0,
        hits: 0,
        errors: 0,
        first_error: None,
    }));
    let value = Bytes::from(vec![b'x'; config.size]);
    let stop = Rc::new(Cell::new(false));
    let mut workers = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for d in 0..config.depth {
            let seed = (shard as u64) << 40 ^ (c as u64) << 20 ^ d as u64;
            workers.push(spawn_local(worker(
                client.clone(),
                tally.clone(),
                value.clone(),
                config.clone(),
                seed,
                deadline,
                stop.clone(),
            )));
        }
    }
    for worker in workers {
        let _ = worker.await;
    }
    drop(clients);
    let tally = Rc::try_unwrap(tally)
        .map_err(|_| "workers still hold the tally".to_string())?
        .into_inner();
    Ok(tally)
}

async fn worker<C: Connection>(
    client: KvClient<C>,
    tally: Rc<RefCell<ShardTally>>,
    value: Bytes,
    config: BenchConfig,
    seed: u64,
    deadline: Instant,
    stop: Rc<Cell<bool>>,
) {
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let cycle = u64::from(config.sets + config.gets);
    let mut turn = seed % cycle;
    while !stop.get() {
        let started = Instant::now();
        if started >= deadline {
            stop.set(true);
            break;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let key = format!("key:{:012}", rng % config.keys.max(1));
        let is_set = turn < u64::from(config.sets);
        turn = (turn + 1) % cycle;
        let result = if is_set {
            client.set(key.as_bytes(), &value).await.map(|()| false)
        } else {
            client.get(key.as_bytes()).await.map(|v| v.is_some())
        };
        let micros = started.elapsed().as_micros() as u64;
        let mut t = tally.borrow_mut();
        match result {
            Ok(hit) => {
                let _ = t.histogram.record(micros.max(1));
                if is_set {
                    t.sets += 1;
                } else {
                    t.gets += 1;
                    t.hits += u64::from(hit);
                }
            }
            Err(error) => {
                t.errors += 1;
                if t.first_error.is_none() {
                    t.first_error = Some(error.to_string());
                }
                if matches!(error, super::KvError::Rpc(_)) {
                    // The connection is gone: no point hammering it.
                    break;
                }
            }
        }
    }
}
