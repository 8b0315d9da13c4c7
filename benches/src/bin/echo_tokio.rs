//! Raw echo server on tokio: `echo_tokio --addr 127.0.0.1:PORT [--workers N] [--accept reuseport|handoff]
//! [--current-thread]`.

use std::process::ExitCode;

use corewire_bench::args::{Args, ArgsError};
use corewire_bench::servers::accept_mode::AcceptMode;
use corewire_bench::servers::tokio_echo::{self, TokioEchoConfig};

const USAGE: &str = "echo_tokio --addr HOST:PORT [--workers N (2)] [--accept reuseport|handoff (reuseport)] [--current-thread]";

fn config() -> Result<TokioEchoConfig, ArgsError> {
    let mut args = Args::from_env(&["current-thread"])?;
    let cfg = TokioEchoConfig {
        addr: args.require("addr")?,
        workers: args.get("workers", 2)?,
        accept: args.get("accept", AcceptMode::Reuseport)?,
        current_thread: args.switch("current-thread"),
    };
    args.finish()?;
    Ok(cfg)
}

fn main() -> ExitCode {
    let cfg = match config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("echo_tokio: {e}\nusage: {USAGE}");
            return ExitCode::from(2);
        }
    };
    match tokio_echo::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}
