//! Open-loop load generator (no coordinated omission): `openloop --addr HOST:PORT --proto
//! echo|resp|rpc --rate R ...`; `--rate 0` runs the same client closed-loop (to find a server's
//! maximum throughput). Prints one JSON line.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use corewire_bench::open_loop::driver::{run, OpenLoopConfig};
use corewire_bench::open_loop::replies::Wire;
use corewire_bench::report::print_json;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Proto {
    /// Raw length-prefixed echo frames.
    Echo,
    /// RESP SET/GET (alternating) on a fixed keyspace.
    Resp,
    /// corewire's RPC framing: unary calls of the bench's Echo service (`rpc_corewire
    /// server`, `echo_tokio --rpc`).
    Rpc,
}

#[derive(Debug, Parser)]
#[command(
    name = "openloop",
    about = "Fixed-rate load, latency from each request's intended send time",
    args_override_self = true
)]
struct Cli {
    #[arg(long, value_name = "HOST:PORT")]
    addr: SocketAddr,
    #[arg(long, value_enum, default_value = "echo")]
    proto: Proto,
    /// Requests per second over all connections; 0: closed loop at --max-in-flight.
    #[arg(long, value_name = "R")]
    rate: f64,
    #[arg(long, value_name = "C", default_value_t = 16)]
    conns: usize,
    /// Requests outstanding per connection at most.
    #[arg(long, value_name = "D", default_value_t = 64)]
    max_in_flight: usize,
    #[arg(long, value_name = "T", default_value_t = 1)]
    threads: usize,
    /// Echo or RPC payload, or RESP value size.
    #[arg(long, value_name = "S", default_value_t = 64)]
    size: usize,
    /// RESP keys.
    #[arg(long, value_name = "K", default_value_t = 100_000)]
    keyspace: u64,
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    duration_ms: u64,
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    warmup_ms: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.size > corewire_bench::frame::MAX_PAYLOAD {
        eprintln!("openloop: --size is over the 16 MiB frame limit");
        return ExitCode::FAILURE;
    }
    let cfg = OpenLoopConfig {
        addr: cli.addr,
        wire: match cli.proto {
            Proto::Echo => Wire::Echo { size: cli.size },
            Proto::Resp => Wire::Resp {
                size: cli.size,
                keyspace: cli.keyspace,
            },
            Proto::Rpc => Wire::Rpc { size: cli.size },
        },
        rate: cli.rate.max(0.0),
        conns: cli.conns.max(1),
        max_in_flight: cli.max_in_flight.max(1),
        threads: cli.threads,
        warmup: Duration::from_millis(cli.warmup_ms),
        duration: Duration::from_millis(cli.duration_ms.max(1)),
    };
    let report = run(&cfg);
    print_json(&report);
    if report.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
