//! corewire RPC echo: `rpc_corewire server --addr A [--shards N] [--accept reuseport|handoff]
//! [--no-pin] [--budget-msgs N|unlimited] [--budget-bytes B] [--hash-rounds N] [--probe-addr P]
//! [--no-call-now] [--typed] [--grpc]` or
//! `rpc_corewire client --addr A [--conns C] [--depth D] [--size S] [--duration-ms MS] [--warmup-ms MS] [--threads T]
//! [--server-pid PID]` (prints one JSON line, mode "corewire-rpc"), or the fairness probe
//! `rpc_corewire client --probe --addr A [--probe-addr P] [--hot-conns H] [--hot-depth D] ...`.

use std::process::ExitCode;

use corewire::Budget;
use corewire_bench::alloc_count::CountingAlloc;
use corewire_bench::args::{Args, ArgsError};
use corewire_bench::corewire_rpc::budget::budget_from_flags;
use corewire_bench::corewire_rpc::client::{run_corewire_closed_loop, run_corewire_probe};
use corewire_bench::corewire_rpc::server::{self, CorewireRpcServerConfig};
use corewire_bench::loadgen::cli::{self, Command};
use corewire_bench::report::print_json;
use corewire_bench::servers::accept_mode::AcceptMode;

const USAGE: &str = "\
rpc_corewire server --addr HOST:PORT [--shards N (2)] [--accept reuseport|handoff (reuseport)]
                    [--no-pin] [--budget-msgs N|unlimited] [--budget-bytes B]
                    [--hash-rounds N (0: FNV-1a passes over each payload, the handler's cost)]
                    [--probe-addr HOST:PORT (a second listener, for the fairness probe: its
                     head-of-line counts are printed as probe_hol_*)]
                    [--no-call-now (answer through the handler's boxed future, not call_now:
                     the slow path, to compare allocations and polls per request)]
                    [--typed (the echo generated from proto/echo.proto, not the raw one)]
                    [--grpc (the typed echo over gRPC/HTTP2, not corewire's framing)]
rpc_corewire client --addr HOST:PORT [--conns C] [--depth D] [--size S] [--duration-ms MS]
                    [--warmup-ms MS] [--threads T (client shards)] [--server-pid PID]
                    [--typed (call the typed echo with its generated client)]
rpc_corewire client --probe --addr HOST:PORT [--probe-addr HOST:PORT] [--hot-conns 8]
                    [--hot-depth 32] [--size S] [--probe-size 64] [--duration-ms MS]
                    [--warmup-ms MS] [--threads T (hot client shards)] [--server-pid PID]";

/// Counts allocations, so the server can print allocations per request.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn usage_error(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("rpc_corewire: {e}\nusage:\n{USAGE}");
    ExitCode::from(2)
}

fn server_config(mut args: Args) -> Result<CorewireRpcServerConfig, String> {
    let mut parse = || -> Result<_, ArgsError> {
        let messages: Option<String> = args.opt("budget-msgs")?;
        let bytes: Option<usize> = args.opt("budget-bytes")?;
        let cfg = CorewireRpcServerConfig {
            addr: args.require("addr")?,
            shards: args.get("shards", 2usize)?,
            accept: args.get("accept", AcceptMode::Reuseport)?,
            pin: !args.switch("no-pin"),
            budget: Budget::UNLIMITED,
            hash_rounds: args.get("hash-rounds", 0u32)?,
            probe_addr: args.opt("probe-addr")?,
            no_call_now: args.switch("no-call-now"),
            typed: args.switch("typed"),
            grpc: args.switch("grpc"),
        };
        Ok((cfg, messages, bytes))
    };
    let (mut cfg, messages, bytes) = parse().map_err(|e| e.to_string())?;
    args.finish().map_err(|e| e.to_string())?;
    cfg.budget = budget_from_flags(messages.as_deref(), bytes).map_err(|e| e.to_string())?;
    Ok(cfg)
}

fn server_main(args: Args) -> ExitCode {
    let cfg = match server_config(args) {
        Ok(cfg) => cfg,
        Err(e) => return usage_error(e),
    };
    match server::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpc_corewire: {e}");
            ExitCode::FAILURE
        }
    }
}

fn client_main(mut args: Args) -> ExitCode {
    let typed = args.switch("typed");
    let run = match cli::parse(args) {
        Ok(Command::ClosedLoop(cfg)) => run_corewire_closed_loop(&cfg, typed).map(|r| {
            print_json(&r);
            r.errors
        }),
        Ok(Command::Probe(cfg)) => run_corewire_probe(&cfg).map(|r| {
            print_json(&r);
            r.errors
        }),
        Ok(Command::AcceptStorm(_)) => {
            return usage_error(ArgsError::Unexpected(vec![
                "--accept-storm (raw echo only)".to_string(),
            ]))
        }
        Err(e) => return usage_error(e),
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
    // Switches: the server's `--no-pin`, `--no-call-now` and `--grpc`, the client's `--probe`,
    // both's `--typed`; every other flag takes a value.
    let mut args = match Args::from_env(&["no-pin", "no-call-now", "probe", "typed", "grpc"]) {
        Ok(a) => a,
        Err(e) => return usage_error(e),
    };
    match args.take_positional().as_deref() {
        Some("server") => server_main(args),
        Some("client") => client_main(args),
        _ => {
            eprintln!("usage:\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
