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

use corewire::runtime::Runtime;
use corewire::transport::rdma::{self, RdmaConfig};
use corewire::transport::Connection;
use corewire::ClientOptions;
use corewire_kv::kv_client::bench::{self, BenchConfig, Transport};
use corewire_kv::kv_client::{KvClient, KvError};

const USAGE: &str = "\
Usage: kv-client [--addr HOST:PORT] [--rdma] COMMAND
  get KEY | set KEY VALUE [--ttl-ms MS] | del KEY... | mget KEY... | mset KEY VALUE...
  incr KEY [DELTA]
  bench [--conns N] [--depth N] [--size B] [--keys N] [--duration-ms MS] [--ratio SET:GET]
        [--threads N]
(--addr defaults to 127.0.0.1:7000, corewire-kv's --binary-port; with --rdma, give the
server's --rdma address)";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut addr: SocketAddr = ([127, 0, 0, 1], 7000).into();
    if let Some(i) = args.iter().position(|a| a == "--addr") {
        let Some(value) = args.get(i + 1) else {
            return usage("--addr needs a value");
        };
        match value.parse() {
            Ok(a) => addr = a,
            Err(_) => return usage(&format!("invalid address {value:?}")),
        }
        args.drain(i..i + 2);
    }
    let transport = match args.iter().position(|a| a == "--rdma") {
        Some(i) => {
            args.remove(i);
            Transport::Rdma
        }
        None => Transport::Tcp,
    };
    let Some(command) = args.first().cloned() else {
        return usage("no command");
    };
    let rest = args.split_off(1);
    if command == "bench" {
        return run_bench(addr, transport, rest);
    }
    if matches!(command.as_str(), "-h" | "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
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
                run_command(kv, &command, rest).await
            }
            Transport::Rdma => {
                let kv = KvClient::connect_rdma(addr, options).await?;
                run_command(kv, &command, rest).await
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
        Ok(Err(Failure::Usage(why))) => usage(&why),
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
    Usage(String),
    Kv(KvError),
}

impl From<KvError> for Failure {
    fn from(error: KvError) -> Self {
        Failure::Kv(error)
    }
}

/// Runs one command; its output lines in redis-cli's style.
async fn run_command<C: Connection>(
    kv: KvClient<C>,
    command: &str,
    args: Vec<String>,
) -> Result<Vec<String>, Failure> {
    let arity = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(Failure::Usage(format!(
                "wrong number of arguments for {command}"
            )))
        }
    };
    let bulk = |value: Option<bytes::Bytes>| {
        value.map_or_else(
            || "(nil)".to_owned(),
            |v| String::from_utf8_lossy(&v).into_owned(),
        )
    };
    match command {
        "get" => {
            arity(args.len() == 1)?;
            Ok(vec![bulk(kv.get(args[0].as_bytes()).await?)])
        }
        "set" => {
            let (key, value, ttl) = match args.as_slice() {
                [k, v] => (k, v, None),
                [k, v, flag, ms] if flag == "--ttl-ms" => {
                    let ms: u64 = ms
                        .parse()
                        .map_err(|_| Failure::Usage(format!("invalid --ttl-ms {ms:?}")))?;
                    (k, v, Some(Duration::from_millis(ms)))
                }
                _ => return Err(Failure::Usage("set KEY VALUE [--ttl-ms MS]".into())),
            };
            match ttl {
                None => kv.set(key.as_bytes(), value.as_bytes()).await?,
                Some(ttl) => {
                    kv.set_with_ttl(key.as_bytes(), value.as_bytes(), ttl)
                        .await?
                }
            }
            Ok(vec!["OK".into()])
        }
        "del" => {
            arity(!args.is_empty())?;
            Ok(vec![format!("(integer) {}", kv.del(&args).await?)])
        }
        "mget" => {
            arity(!args.is_empty())?;
            let values = kv.mget(&args).await?;
            Ok(values
                .into_iter()
                .enumerate()
                .map(|(i, v)| format!("{}) {}", i + 1, bulk(v)))
                .collect())
        }
        "mset" => {
            arity(!args.is_empty() && args.len().is_multiple_of(2))?;
            let pairs: Vec<(&str, &str)> = args
                .chunks(2)
                .map(|pair| (pair[0].as_str(), pair[1].as_str()))
                .collect();
            kv.mset(&pairs).await?;
            Ok(vec!["OK".into()])
        }
        "incr" => {
            arity(args.len() == 1 || args.len() == 2)?;
            let delta = match args.get(1) {
                None => 1,
                Some(d) => d
                    .parse()
                    .map_err(|_| Failure::Usage(format!("invalid delta {d:?}")))?,
            };
            Ok(vec![format!(
                "(integer) {}",
                kv.incr_by(args[0].as_bytes(), delta).await?
            )])
        }
        other => Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
}

fn run_bench(addr: SocketAddr, transport: Transport, args: Vec<String>) -> ExitCode {
    let config = match bench_config(&args) {
        Ok(config) => BenchConfig {
            transport,
            ..config
        },
        Err(why) => return usage(&why),
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

fn bench_config(args: &[String]) -> Result<BenchConfig, String> {
    let mut config = BenchConfig {
        threads: 0,
        ..BenchConfig::default()
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("invalid {flag} {value:?}"))
        };
        match flag.as_str() {
            "--conns" => config.conns = number()? as usize,
            "--depth" => config.depth = number()? as usize,
            "--size" => config.size = number()? as usize,
            "--keys" => config.keys = number()?.max(1),
            "--duration-ms" => config.duration = Duration::from_millis(number()?),
            "--threads" => config.threads = number()? as usize,
            "--ratio" => {
                let (sets, gets) = value
                    .split_once(':')
                    .and_then(|(s, g)| Some((s.parse().ok()?, g.parse().ok()?)))
                    .ok_or_else(|| format!("invalid --ratio {value:?} (want SET:GET)"))?;
                config.sets = sets;
                config.gets = gets;
            }
            other => return Err(format!("unknown bench option {other:?}")),
        }
    }
    if config.threads == 0 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        config.threads = config.conns.min(cpus).max(1);
    }
    Ok(config)
}

fn usage(why: &str) -> ExitCode {
    eprintln!("kv-client: {why}\n{USAGE}");
    ExitCode::from(2)
}
