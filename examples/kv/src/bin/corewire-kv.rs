//! `corewire-kv`: the sharded Redis-compatible server. See `corewire-kv --help`.

use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;

use corewire::runtime::metrics::MetricsServer;
use corewire_kv::server::{self, ConfigError, ServerConfig, StartError};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Many small, short-lived allocations (requests, replies, cross-shard batches), some freed on
/// another shard than the one that allocated them: mimalloc's thread-local free lists suit
/// that better than glibc's arenas (Redis links jemalloc for the same reason).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = match ServerConfig::from_args(std::env::args().skip(1)) {
        Ok(config) => config,
        Err(ConfigError::Help) => {
            print!("{}", server::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("corewire-kv: {error}");
            return ExitCode::from(2);
        }
    };
    // The handlers only write to a pipe that this thread reads once the server is up.
    let mut signals = match Signals::new([SIGINT, SIGTERM]) {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("corewire-kv: installing signal handlers: {error}");
            return ExitCode::FAILURE;
        }
    };
    let fsync = config.aof.as_ref().map(|aof| aof.fsync.as_str());
    let running = match server::start(config.clone()) {
        Ok(running) => running,
        Err(error @ StartError::RdmaUnavailable(_)) => {
            eprintln!("corewire-kv: --rdma: {error}");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("corewire-kv: {error}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = match config.metrics {
        Some(addr) => match MetricsServer::serve(running.runtime(), 0, addr) {
            Ok(m) => Some(m),
            Err(error) => {
                eprintln!("corewire-kv: --metrics {addr}: {error}");
                running.shutdown();
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    // Tests and scripts wait for this line (and read the ports from it).
    let or_off = |addr: Option<std::net::SocketAddr>| addr.map_or("off".into(), |a| a.to_string());
    println!(
        "corewire-kv ready: resp={} binary={} rdma={} shards={} aof={} metrics={} cluster={} tls={}",
        or_off(running.resp_addr()),
        or_off(running.binary_addr()),
        or_off(running.rdma_addr()),
        running.shards(),
        fsync.unwrap_or("off"),
        or_off(metrics.as_ref().map(MetricsServer::local_addr)),
        or_off(running.cluster_bus_addr()),
        or_off(running.tls_addr()),
    );
    let _ = std::io::stdout().flush();
    if let Some(signal) = signals.forever().next() {
        tracing::info!(signal, "shutting down");
    }
    drop(metrics);
    running.shutdown();
    ExitCode::SUCCESS
}
