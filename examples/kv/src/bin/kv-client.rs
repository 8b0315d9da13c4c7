//! `kv-client`: commands and a load generator over corewire-kv's binary protocol.
//!
//! `--rdma` uses the RDMA transport (rdma_cm; the address is the server's `--rdma` one).
//!
//!     kv-client [--addr HOST:PORT] get KEY
//!     kv-client [--addr HOST:PORT] set KEY VALUE [--ttl-ms MS]
//!     kv-client [--addr HOST:PORT] del KEY...
//!     kv-client [--addr HOST:PORT] mget KEY...
//!     kv-client [--addr HOST:PORT] mset KEY VALUE [KEY VALUE...]
//!     kv-client [--addr HOST:PORT] incr KEY [DELTA]
//!     kv-client [--addr HOST:PORT] bench [--conns N] [--depth N] [--size B] [--keys N]
//!                                        [--duration-ms MS] [--ratio SET:GET] [--threads N]

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use corewire::runtime::Runtime;
use corewire::transport::rdma::{self, RdmaConfig};
use corewire::transport::Connection;
use corewire::ClientOptions;
use corewire_kv::kv_client::bench::{self, BenchConfig, Transport};
use corewire_kv::kv_client::{KvClient, KvError};

#[derive(Parser)]
#[command(
    name = "kv-client",
    version,
    about = "Commands and a load generator over corewire-kv's binary protocol"
)]
struct Cli {
    /// The server: corewire-kv's --binary-port (with --rdma, its --rdma address).
    #[arg(
        long,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:7000",
        global = true
    )]
    addr: SocketAddr,
    /// Use the RDMA transport (rdma_cm).
    #[arg(long, global = true)]
    rdma: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// GET KEY.
    Get { key: String },
    /// SET KEY VALUE.
    Set {
        key: String,
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// Expire after this many milliseconds.
        #[arg(long, value_name = "MS")]
        ttl_ms: Option<u64>,
    },
    /// DEL KEY...
    Del {
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// MGET KEY...
    Mget {
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// MSET KEY VALUE [KEY VALUE ...]
    Mset {
        #[arg(required = true, value_name = "KEY VALUE", allow_hyphen_values = true)]
        pairs: Vec<String>,
    },
    /// INCRBY KEY DELTA (1 when not given).
    Incr {
        key: String,
        #[arg(allow_negative_numbers = true)]
        delta: Option<i64>,
    },
    /// A closed-loop load; prints its report.
    Bench(BenchArgs),
}

#[derive(clap::Args)]
struct BenchArgs {
    #[arg(long, value_name = "N", default_value_t = BenchConfig::default().conns)]
    conns: usize,
    /// Calls in flight per connection.
    #[arg(long, value_name = "N", default_value_t = BenchConfig::default().depth)]
    depth: usize,
    /// Value bytes.
    #[arg(long, value_name = "B", default_value_t = BenchConfig::default().size)]
    size: usize,
    /// Keys `key:000000000000` up to this count.
    #[arg(long, value_name = "N", default_value_t = BenchConfig::default().keys)]
    keys: u64,
    #[arg(long, value_name = "MS", default_value_t = BenchConfig::default().duration.as_millis() as u64)]
    duration_ms: u64,
    /// SETs to GETs (default 1:1).
    #[arg(long, value_name = "SET:GET", value_parser = parse_ratio)]
    ratio: Option<(u32, u32)>,
    /// Client shard threads (default: min(conns, CPUs)).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

fn parse_ratio(text: &str) -> Result<(u32, u32), String> {
    text.split_once(':')
        .and_then(|(s, g)| Some((s.parse().ok()?, g.parse().ok()?)))
        .ok_or_else(|| "want SET:GET".to_owned())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let addr = cli.addr;
    let transport = if cli.rdma {
        Transport::Rdma
    } else {
        Transport::Tcp
    };
    let command = match cli.command {
        Cmd::Bench(args) => return run_bench(addr, transport, args),
        Cmd::Mset { pairs } if pairs.len() % 2 == 1 => Cli::command()
            .error(
                clap::error::ErrorKind::WrongNumberOfValues,
                "mset takes KEY VALUE pairs",
            )
            .exit(),
        command => command,
    };
    let rt = match Runtime::builder().shards(1).name("kv-client").build() {
        Ok(rt) => rt,
        Err(error) => {
            eprintln!("kv-client: {error}");
            return ExitCode::FAILURE;
        }
    };
    if transport == Transport::Rdma {
        if let Err(error) = rdma::install(&rt, RdmaConfig::default()) {
            eprintln!("kv-client: RDMA transport not available: {error}");
            return ExitCode::FAILURE;
        }
    }
    let outcome = rt.run_on(0, move || async move {
        let options = ClientOptions::default();
        match transport {
            Transport::Tcp => {
                let kv = KvClient::connect_tcp(addr, options).await?;
                run_command(kv, command).await
            }
            Transport::Rdma => {
                let kv = KvClient::connect_rdma(addr, options).await?;
                run_command(kv, command).await
            }
        }
    });
    rt.shutdown();
    match outcome {
        Ok(Ok(lines)) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Ok(Err(Failure::Kv(KvError::Server(message)))) => {
            println!("(error) {message}");
            ExitCode::FAILURE
        }
        Ok(Err(Failure::Kv(error))) => {
            eprintln!("kv-client: {error}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("kv-client: the client shard died");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    Kv(KvError),
}

impl From<KvError> for Failure {
    fn from(error: KvError) -> Self {
        Failure::Kv(error)
    }
}

/// Runs one command; its output lines in redis-cli's style.
async fn run_command<C: Connection>(kv: KvClient<C>, command: Cmd) -> Result<Vec<String>, Failure> {
    let bulk = |value: Option<bytes::Bytes>| {
        value.map_or_else(
            || "(nil)".to_owned(),
            |v| String::from_utf8_lossy(&v).into_owned(),
        )
    };
    match command {
        Cmd::Get { key } => Ok(vec![bulk(kv.get(key.as_bytes()).await?)]),
        Cmd::Set { key, value, ttl_ms } => {
            match ttl_ms {
                None => kv.set(key.as_bytes(), value.as_bytes()).await?,
                Some(ms) => {
                    kv.set_with_ttl(key.as_bytes(), value.as_bytes(), Duration::from_millis(ms))
                        .await?
                }
            }
            Ok(vec!["OK".into()])
        }
        Cmd::Del { keys } => Ok(vec![format!("(integer) {}", kv.del(&keys).await?)]),
        Cmd::Mget { keys } => {
            let values = kv.mget(&keys).await?;
            Ok(values
                .into_iter()
                .enumerate()
                .map(|(i, v)| format!("{}) {}", i + 1, bulk(v)))
                .collect())
        }
        Cmd::Mset { pairs } => {
            let pairs: Vec<(&str, &str)> = pairs
                .chunks(2)
                .map(|pair| (pair[0].as_str(), pair[1].as_str()))
                .collect();
            kv.mset(&pairs).await?;
            Ok(vec!["OK".into()])
        }
        Cmd::Incr { key, delta } => Ok(vec![format!(
            "(integer) {}",
            kv.incr_by(key.as_bytes(), delta.unwrap_or(1)).await?
        )]),
        Cmd::Bench(_) => unreachable!("bench runs on its own threads"),
    }
}

fn run_bench(addr: SocketAddr, transport: Transport, args: BenchArgs) -> ExitCode {
    let (sets, gets) = args.ratio.unwrap_or((1, 1));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let config = BenchConfig {
        transport,
        conns: args.conns,
        depth: args.depth,
        size: args.size,
        keys: args.keys.max(1),
        duration: Duration::from_millis(args.duration_ms),
        sets,
        gets,
        threads: args.threads.unwrap_or(args.conns.min(cpus).max(1)),
    };
    println!(
        "bench {addr} ({:?}): conns={} depth={} size={} keys={} duration={}ms ratio={}:{} threads={}",
        config.transport,
        config.conns,
        config.depth,
        config.size,
        config.keys,
        config.duration.as_millis(),
        config.sets,
        config.gets,
        config.threads
    );
    match bench::run(addr, &config) {
        Ok(report) => {
            println!("{report}");
            if report.errors > 0 || report.ops == 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(error) => {
            eprintln!("kv-client bench: {error}");
            ExitCode::FAILURE
        }
    }
}
