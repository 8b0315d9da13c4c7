//! tonic unary echo: `rpc_tonic server --addr A [--workers N]` or
//! `rpc_tonic client --addr A [--conns C] [--depth D] [--size S] [--duration-ms MS]
//! [--warmup-ms MS] [--threads T] [--server-pid PID]` (prints one JSON line, mode "grpc").

use std::process::ExitCode;

use corewire_bench::args::{Args, ArgsError};
use corewire_bench::loadgen::cli::{self, Command};
use corewire_bench::report::print_json;
use corewire_bench::rpc::client::run_grpc_closed_loop;
use corewire_bench::rpc::server::{self, RpcServerConfig};

const USAGE: &str = "\
rpc_tonic server --addr HOST:PORT [--workers N (2)]
rpc_tonic client --addr HOST:PORT [--conns C] [--depth D] [--size S] [--duration-ms MS]
                 [--warmup-ms MS] [--threads T] [--server-pid PID]";

fn usage_error(e: ArgsError) -> ExitCode {
    eprintln!("rpc_tonic: {e}\nusage:\n{USAGE}");
    ExitCode::from(2)
}

fn server_main(mut args: Args) -> ExitCode {
    let cfg = (|| -> Result<RpcServerConfig, ArgsError> {
        let cfg = RpcServerConfig {
            addr: args.require("addr")?,
            workers: args.get("workers", 2)?,
        };
        args.finish()?;
        Ok(cfg)
    })();
    let cfg = match cfg {
        Ok(cfg) => cfg,
        Err(e) => return usage_error(e),
    };
    match server::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpc_tonic: {e}");
            ExitCode::FAILURE
        }
    }
}

fn client_main(args: Args) -> ExitCode {
    let cfg = match cli::parse(args) {
        Ok(Command::ClosedLoop(cfg)) => cfg,
        Ok(_) => {
            return usage_error(ArgsError::Unexpected(vec![
                "--probe / --accept-storm (raw echo only)".to_string(),
            ]))
        }
        Err(e) => return usage_error(e),
    };
    let report = run_grpc_closed_loop(&cfg);
    print_json(&report);
    if report.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let mut args = match Args::from_env(&[]) {
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
