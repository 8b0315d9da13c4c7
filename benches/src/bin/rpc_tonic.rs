//! tonic unary echo: `rpc_tonic server --addr A [--workers N]` or
//! `rpc_tonic client --addr A [--conns C] [--depth D] [--size S] [--duration-ms MS]
//! [--warmup-ms MS] [--threads T] [--server-pid PID]` (prints one JSON line, mode "grpc").

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use corewire_bench::loadgen::cli::{Command, LoadArgs};
use corewire_bench::report::print_json;
use corewire_bench::rpc::client::run_grpc_closed_loop;
use corewire_bench::rpc::server::{self, RpcServerConfig};

#[derive(Parser)]
#[command(
    name = "rpc_tonic",
    about = "tonic unary echo: its server, or a closed-loop client"
)]
enum Cli {
    /// Serve the echo.
    Server {
        #[arg(long, value_name = "HOST:PORT")]
        addr: SocketAddr,
        /// tokio worker threads.
        #[arg(long, value_name = "N", default_value_t = 2)]
        workers: usize,
    },
    /// Run a closed loop against it; prints one JSON line (mode "grpc").
    Client(LoadArgs),
}

fn server_main(cfg: RpcServerConfig) -> ExitCode {
    match server::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpc_tonic: {e}");
            ExitCode::FAILURE
        }
    }
}

fn client_main(args: LoadArgs) -> ExitCode {
    let Command::ClosedLoop(cfg) = args.command() else {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--probe and --accept-storm are the raw echo's (loadgen)",
            )
            .exit()
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
    match Cli::parse() {
        Cli::Server { addr, workers } => server_main(RpcServerConfig { addr, workers }),
        Cli::Client(args) => client_main(args),
    }
}
