//! The `loadgen` command line.

use std::net::SocketAddr;
use std::time::Duration;

use super::accept_storm::AcceptStormConfig;
use super::closed_loop::{ClosedLoopConfig, ProbeConfig, RunShape};
use crate::args::{Args, ArgsError};

/// Usage text.
pub const USAGE: &str = "\
loadgen --addr HOST:PORT [--threads T] [--duration-ms MS] [--warmup-ms MS] [--server-pid PID]
        [--server-syscalls] (count the server's io_uring enters and syscalls with perf stat)
        (closed loop)   [--conns C] [--depth D] [--size S]
        (fairness)      --probe [--hot-conns 8] [--hot-depth 32] [--size S] [--probe-size 64]
                        [--probe-addr HOST:PORT (the probe's own listener; default --addr)]
        (accept storm)  --accept-storm N [--size S]
Prints one JSON line. Defaults: threads 1, duration 5000, warmup 1000, conns 1, depth 1, size 64.";

/// What to run.
#[derive(Debug, Clone)]
pub enum Command {
    ClosedLoop(ClosedLoopConfig),
    Probe(ProbeConfig),
    AcceptStorm(AcceptStormConfig),
}

/// Parses loadgen's flags.
pub fn parse(mut args: Args) -> Result<Command, ArgsError> {
    let addr: SocketAddr = args.require("addr")?;
    let threads = args.get("threads", 1usize)?.max(1);
    let server_pid = args.opt("server-pid")?;
    super::harness::count_server_syscalls(args.switch("server-syscalls"));
    let size = args.get("size", 64usize)?;
    if size > crate::frame::MAX_PAYLOAD {
        return Err(ArgsError::Invalid {
            flag: "size".into(),
            value: size.to_string(),
            reason: "over the 16 MiB frame limit".into(),
        });
    }
    let shape = |args: &mut Args| -> Result<RunShape, ArgsError> {
        Ok(RunShape {
            addr,
            threads,
            warmup: Duration::from_millis(args.get("warmup-ms", 1000)?),
            duration: Duration::from_millis(args.get::<u64>("duration-ms", 5000)?.max(1)),
            server_pid,
        })
    };
    let command = if let Some(cycles) = args.opt("accept-storm")? {
        Command::AcceptStorm(AcceptStormConfig {
            addr,
            cycles,
            threads,
            size,
            server_pid,
        })
    } else if args.switch("probe") {
        Command::Probe(ProbeConfig {
            shape: shape(&mut args)?,
            hot_conns: args.get("hot-conns", 8)?,
            hot_depth: args.get("hot-depth", 32)?,
            size,
            probe_size: args.get("probe-size", 64)?,
            probe_addr: args.opt("probe-addr")?,
        })
    } else {
        Command::ClosedLoop(ClosedLoopConfig {
            shape: shape(&mut args)?,
            conns: args.get("conns", 1)?,
            depth: args.get("depth", 1)?,
            size,
        })
    };
    args.finish()?;
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(words: &[&str]) -> Result<Command, ArgsError> {
        parse(Args::parse(words.iter().copied(), &["probe"]).unwrap())
    }

    #[test]
    fn selects_modes() {
        let c = parse_words(&["--addr", "127.0.0.1:1", "--conns", "64", "--depth", "4"]).unwrap();
        assert!(matches!(
            c,
            Command::ClosedLoop(ClosedLoopConfig {
                conns: 64,
                depth: 4,
                size: 64,
                ..
            })
        ));
        let c = parse_words(&["--addr", "127.0.0.1:1", "--probe", "--hot-conns", "2"]).unwrap();
        assert!(matches!(
            c,
            Command::Probe(ProbeConfig {
                hot_conns: 2,
                hot_depth: 32,
                ..
            })
        ));
        let c = parse_words(&[
            "--addr",
            "127.0.0.1:1",
            "--accept-storm",
            "100",
            "--threads",
            "2",
        ])
        .unwrap();
        assert!(matches!(
            c,
            Command::AcceptStorm(AcceptStormConfig {
                cycles: 100,
                threads: 2,
                ..
            })
        ));
    }

    #[test]
    fn rejects_flags_of_another_mode_and_oversized_messages() {
        assert!(parse_words(&[
            "--addr",
            "127.0.0.1:1",
            "--accept-storm",
            "1",
            "--depth",
            "4"
        ])
        .is_err());
        assert!(parse_words(&["--addr", "127.0.0.1:1", "--size", "20000000"]).is_err());
        assert!(parse_words(&["--conns", "1"]).is_err());
    }
}
