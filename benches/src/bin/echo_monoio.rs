//! Raw echo server on monoio (io_uring driver, one thread): `echo_monoio --addr 127.0.0.1:PORT`.

use std::net::SocketAddr;
use std::process::ExitCode;

use corewire_bench::args::{Args, ArgsError};
use corewire_bench::servers::monoio_echo;

const USAGE: &str = "echo_monoio --addr HOST:PORT";

fn config() -> Result<SocketAddr, ArgsError> {
    let mut args = Args::from_env(&[])?;
    let addr = args.require("addr")?;
    args.finish()?;
    Ok(addr)
}

fn main() -> ExitCode {
    let addr = match config() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("echo_monoio: {e}\nusage: {USAGE}");
            return ExitCode::from(2);
        }
    };
    match monoio_echo::run(addr) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_monoio: {e}");
            ExitCode::FAILURE
        }
    }
}
