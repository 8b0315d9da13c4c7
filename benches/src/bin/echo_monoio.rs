//! Raw echo server on monoio (io_uring driver, one thread per core):
//! `echo_monoio --addr 127.0.0.1:PORT [--threads N]`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use corewire_bench::servers::monoio_echo;

#[derive(Parser)]
#[command(
    name = "echo_monoio",
    about = "Raw echo server on monoio (io_uring, one thread per core)",
    args_override_self = true
)]
struct Flags {
    #[arg(long, value_name = "HOST:PORT")]
    addr: SocketAddr,
    /// Threads, each a runtime with its own SO_REUSEPORT listener.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    match monoio_echo::run(flags.addr, flags.threads) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_monoio: {e}");
            ExitCode::FAILURE
        }
    }
}
