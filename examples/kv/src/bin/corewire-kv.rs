//! `corewire-kv`: the sharded Redis-compatible server. See `corewire-kv --help`.

use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;

use corewire::runtime::metrics::MetricsServer;
use corewire_kv::config::load;
use corewire_kv::server::{self, logging, ConfigError, StartError};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter};

/// mimalloc with a count of the heap it holds (INFO's `used_memory`): see `heap`'s docs.
#[global_allocator]
static ALLOCATOR: corewire_kv::heap::Allocator = corewire_kv::heap::Allocator::new();

fn main() -> ExitCode {
    corewire_kv::heap::installed();
    let loaded = match load::from_args(std::env::args().skip(1)) {
        Ok(loaded) => loaded,
        Err(ConfigError::Info(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(ConfigError::CommandLine(text)) => {
            eprint!("{text}");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("corewire-kv: {error}");
            return ExitCode::from(2);
        }
    };
    let config = loaded.config;
    if let Err(error) = init_logging(&config) {
        eprintln!("corewire-kv: logfile: {error}");
        return ExitCode::FAILURE;
    }
    if config.disable_thp {
        if let Err(error) = corewire_kv::heap::disable_thp() {
            // Redis goes on too: huge pages cost memory, not correctness.
            tracing::warn!(%error, "could not disable transparent huge pages");
        }
    }
    if !loaded.notes.is_empty() {
        tracing::info!(
            options = loaded.notes.join(" "),
            "accepted with no effect here (Redis features this server does not have)"
        );
    }
    // The handlers only write to a pipe that the thread below reads.
    let signals = match Signals::new([SIGINT, SIGTERM]) {
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
    let pidfile = config.pidfile.clone();
    if let Some(path) = &pidfile {
        // Redis only warns when it cannot write its pid file.
        if let Err(error) = std::fs::write(path, format!("{}\n", std::process::id())) {
            tracing::warn!(path = %path.display(), %error, "could not write the pid file");
        }
    }
    // SHUTDOWN is honoured from the moment clients may send it.
    let stop = running.stop_requests();
    // Tests and scripts wait for these lines (and read the ports from the first); Redis's
    // own test harness looks for " PID: " and "Ready to accept connections".
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
    println!(
        "corewire-kv {} port: {} PID: {}",
        env!("CARGO_PKG_VERSION"),
        (running.resp_addr())
            .or(running.tls_addr())
            .map_or(0, |addr| addr.port()),
        std::process::id()
    );
    println!("Ready to accept connections tcp");
    let _ = std::io::stdout().flush();
    // A signal or SHUTDOWN, whichever comes first.
    std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut signals = signals;
            if let Some(signal) = signals.forever().next() {
                tracing::info!(signal, "shutting down");
                stop.request();
            }
        }
    });
    stop.wait();
    drop(metrics);
    running.shutdown();
    if let Some(path) = &pidfile {
        let _ = std::fs::remove_file(path);
    }
    ExitCode::SUCCESS
}

/// The log: to `logfile` (appended) or standard error, at `loglevel` unless RUST_LOG says
/// otherwise; CONFIG SET loglevel changes the level while running.
fn init_logging(config: &server::ServerConfig) -> std::io::Result<()> {
    let from_env = std::env::var("RUST_LOG").is_ok();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(logging::filter_for(&config.loglevel)));
    let (filter, handle) = reload::Layer::new(filter);
    let writer = match &config.logfile {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(Mutex::new(file))
        }
        None => tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr),
    };
    let ansi = config.logfile.is_none() && std::io::stderr().is_terminal();
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(ansi),
        )
        .init();
    if !from_env {
        logging::install(move |level| {
            let _ = handle.reload(EnvFilter::new(logging::filter_for(level)));
        });
    }
    Ok(())
}
