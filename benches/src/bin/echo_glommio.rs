//! Raw echo server on glommio: `echo_glommio --addr 127.0.0.1:PORT [--shards N] [--no-pin]`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use corewire_bench::servers::glommio_echo::{self, GlommioEchoConfig};

#[derive(Parser)]
#[command(
    name = "echo_glommio",
    about = "Raw echo server on glommio",
    args_override_self = true
)]
struct Flags {
    #[arg(long, value_name = "HOST:PORT")]
    addr: SocketAddr,
    /// Executors, one per thread.
    #[arg(long, value_name = "N", default_value_t = 2)]
    shards: usize,
    /// Leave the executors unpinned.
    #[arg(long)]
    no_pin: bool,
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    let cfg = GlommioEchoConfig {
        addr: flags.addr,
        shards: flags.shards,
        pin: !flags.no_pin,
    };
    match glommio_echo::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_glommio: {e}");
            ExitCode::FAILURE
        }
    }
}
