//! Raw echo server on tokio: `echo_tokio --addr 127.0.0.1:PORT [--workers N] [--accept reuseport|handoff]
//! [--current-thread] [--rpc]`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use corewire_bench::servers::accept_mode::AcceptMode;
use corewire_bench::servers::tokio_echo::{self, TokioEchoConfig};

#[derive(Parser)]
#[command(
    name = "echo_tokio",
    about = "Raw echo server on tokio",
    args_override_self = true
)]
struct Flags {
    #[arg(long, value_name = "HOST:PORT")]
    addr: SocketAddr,
    /// Worker threads.
    #[arg(long, value_name = "N", default_value_t = 2)]
    workers: usize,
    /// One listener per worker (reuseport) or one that hands connections over.
    #[arg(long, value_name = "reuseport|handoff", default_value = "reuseport")]
    accept: AcceptMode,
    /// One current-thread runtime (the per-core peer) instead of worker threads.
    #[arg(long)]
    current_thread: bool,
    /// Serve corewire's RPC framing (the bench's Echo service) instead of raw echo frames.
    #[arg(long)]
    rpc: bool,
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    let cfg = TokioEchoConfig {
        addr: flags.addr,
        workers: flags.workers,
        accept: flags.accept,
        current_thread: flags.current_thread,
        rpc: flags.rpc,
    };
    match tokio_echo::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}
