//! Raw echo server on glommio: `echo_glommio --addr 127.0.0.1:PORT [--shards N] [--no-pin]`.

use std::process::ExitCode;

use corewire_bench::args::{Args, ArgsError};
use corewire_bench::servers::glommio_echo::{self, GlommioEchoConfig};

const USAGE: &str = "echo_glommio --addr HOST:PORT [--shards N (2)] [--no-pin]";

fn config() -> Result<GlommioEchoConfig, ArgsError> {
    let mut args = Args::from_env(&["no-pin"])?;
    let cfg = GlommioEchoConfig {
        addr: args.require("addr")?,
        shards: args.get("shards", 2)?,
        pin: !args.switch("no-pin"),
    };
    args.finish()?;
    Ok(cfg)
}

fn main() -> ExitCode {
    let cfg = match config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("echo_glommio: {e}\nusage: {USAGE}");
            return ExitCode::from(2);
        }
    };
    match glommio_echo::run(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_glommio: {e}");
            ExitCode::FAILURE
        }
    }
}
