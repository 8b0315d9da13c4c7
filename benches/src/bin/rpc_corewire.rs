//! corewire RPC echo: `rpc_corewire server --addr A [--shards N] [--accept reuseport|handoff]
//! [--no-pin] [--budget-msgs N|unlimited] [--budget-bytes B] [--hash-rounds N] [--probe-addr P]
//! [--no-call-now] [--typed] [--grpc]` or
//! `rpc_corewire client --addr A [--conns C] [--depth D] [--size S] [--duration-ms MS] [--warmup-ms MS] [--threads T]
//! [--server-pid PID]` (prints one JSON line, mode "corewire-rpc"), or the fairness probe
//! `rpc_corewire client --probe --addr A [--probe-addr P] [--hot-conns H] [--hot-depth D] ...`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use corewire_bench::alloc_count::CountingAlloc;
use corewire_bench::corewire_rpc::budget::budget_from_flags;
use corewire_bench::corewire_rpc::client::{run_corewire_closed_loop, run_corewire_probe};
use corewire_bench::corewire_rpc::server::{self, CorewireRpcServerConfig};
use corewire_bench::loadgen::cli::{Command, LoadArgs};
use corewire_bench::report::print_json;
use corewire_bench::servers::accept_mode::AcceptMode;

#[derive(Parser)]
#[command(
    name = "rpc_corewire",
    about = "corewire RPC echo: its server, or a closed-loop or fairness-probe client"
)]
enum Cli {
    /// Serve the echo.
    Server(ServerArgs),
    /// Run a closed loop (or, with --probe, the fairness probe) against it; prints one JSON
    /// line (mode "corewire-rpc").
    Client {
        /// Call the typed echo with its generated client.
        #[arg(long)]
        typed: bool,
        #[command(flatten)]
        load: LoadArgs,
    },
}

#[derive(clap::Args)]
struct ServerArgs {
    #[arg(long, value_name = "HOST:PORT")]
    addr: SocketAddr,
    #[arg(long, value_name = "N", default_value_t = 2)]
    shards: usize,
    #[arg(long, value_name = "reuseport|handoff", default_value = "reuseport")]
    accept: AcceptMode,
    /// Leave the shards unpinned.
    #[arg(long)]
    no_pin: bool,
    /// Messages a connection handles per round (default: unlimited).
    #[arg(long, value_name = "N|unlimited")]
    budget_msgs: Option<String>,
    /// Bytes a connection handles per round.
    #[arg(long, value_name = "B")]
    budget_bytes: Option<usize>,
    /// FNV-1a passes over each payload (the handler's cost; 0: plain echo).
    #[arg(long, value_name = "N", default_value_t = 0)]
    hash_rounds: u32,
    /// A second listener, for the fairness probe: its head-of-line counts are printed as
    /// probe_hol_*.
    #[arg(long, value_name = "HOST:PORT")]
    probe_addr: Option<SocketAddr>,
    /// Answer through the handler's boxed future, not call_now: the slow path, to compare
    /// allocations and polls per request.
    #[arg(long)]
    no_call_now: bool,
    /// The echo generated from proto/echo.proto, not the raw one.
    #[arg(long)]
    typed: bool,
    /// The typed echo over gRPC/HTTP2, not corewire's framing.
    #[arg(long)]
    grpc: bool,
}

/// Counts allocations, so the server can print allocations per request.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn server_main(args: ServerArgs) -> ExitCode {
    let budget = match budget_from_flags(args.budget_msgs.as_deref(), args.budget_bytes) {
        Ok(budget) => budget,
        Err(e) => Cli::command()
            .error(clap::error::ErrorKind::ValueValidation, e.to_string())
            .exit(),
    };
    let cfg = CorewireRpcServerConfig {
        addr: args.addr,
        shards: args.shards,
        accept: args.accept,
        pin: !args.no_pin,
        budget,
        hash_rounds: args.hash_rounds,
        probe_addr: args.probe_addr,
        no_call_now: args.no_call_now,
        typed: args.typed,
        grpc: args.grpc,
    };
    match server::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpc_corewire: {e}");
            ExitCode::FAILURE
        }
    }
}

fn client_main(typed: bool, load: LoadArgs) -> ExitCode {
    let run = match load.command() {
        Command::ClosedLoop(cfg) => run_corewire_closed_loop(&cfg, typed).map(|r| {
            print_json(&r);
            r.errors
        }),
        Command::Probe(cfg) => run_corewire_probe(&cfg).map(|r| {
            print_json(&r);
            r.errors
        }),
        Command::AcceptStorm(_) => Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--accept-storm is the raw echo's (loadgen)",
            )
            .exit(),
    };
    match run {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rpc_corewire: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    match Cli::parse() {
        Cli::Server(args) => server_main(args),
        Cli::Client { typed, load } => client_main(typed, load),
    }
}
