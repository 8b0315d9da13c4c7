//! Raw echo server on monoio (io_uring driver, one thread): `echo_monoio --addr 127.0.0.1:PORT`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use corewire_bench::servers::monoio_echo;

#[derive(Parser)]
#[command(
    name = "echo_monoio",
    about = "Raw echo server on monoio (io_uring, one thread)",
    args_override_self = true
)]
struct Flags {
    #[arg(long, value_name = "HOST:PORT")]
    addr: SocketAddr,
}

fn main() -> ExitCode {
    match monoio_echo::run(Flags::parse().addr) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_monoio: {e}");
            ExitCode::FAILURE
        }
    }
}
