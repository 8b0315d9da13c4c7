//! The `loadgen` command line (also the clients of `rpc_tonic` and `rpc_corewire`).

use std::net::SocketAddr;
use std::time::Duration;

use super::accept_storm::AcceptStormConfig;
use super::closed_loop::{ClosedLoopConfig, ProbeConfig, RunShape};

/// The load's flags: the closed loop by default, the fairness probe with `--probe`, the
/// accept storm with `--accept-storm N`; a flag of another mode is refused.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// The server's address.
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: SocketAddr,
    /// Client threads.
    #[arg(long, value_name = "T", default_value_t = 1)]
    pub threads: usize,
    /// Measured window, in milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 5000,
        conflicts_with = "accept_storm"
    )]
    pub duration_ms: u64,
    /// Warm-up before the measured window, in milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 1000,
        conflicts_with = "accept_storm"
    )]
    pub warmup_ms: u64,
    /// The server's process id: its CPU time (and syscalls) are reported.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Count the server's io_uring enters and syscalls with perf stat.
    #[arg(long)]
    pub server_syscalls: bool,
    /// Message size in bytes.
    #[arg(long, value_name = "S", default_value_t = 64, value_parser = message_size)]
    pub size: usize,
    /// Connections (closed loop).
    #[arg(long, value_name = "C", default_value_t = 1, conflicts_with_all = ["probe", "accept_storm"])]
    pub conns: usize,
    /// Requests in flight per connection (closed loop).
    #[arg(long, value_name = "D", default_value_t = 1, conflicts_with_all = ["probe", "accept_storm"])]
    pub depth: usize,
    /// Fairness: hot connections plus one probe connection at depth 1.
    #[arg(long, conflicts_with = "accept_storm")]
    pub probe: bool,
    /// Fairness: hot connections.
    #[arg(long, value_name = "N", default_value_t = 8, requires = "probe")]
    pub hot_conns: usize,
    /// Fairness: requests in flight per hot connection.
    #[arg(long, value_name = "D", default_value_t = 32, requires = "probe")]
    pub hot_depth: usize,
    /// Fairness: the probe's message size.
    #[arg(long, value_name = "S", default_value_t = 64, requires = "probe")]
    pub probe_size: usize,
    /// Fairness: the probe's own listener (default: --addr).
    #[arg(long, value_name = "HOST:PORT", requires = "probe")]
    pub probe_addr: Option<SocketAddr>,
    /// Accept storm: N connect, echo, close cycles.
    #[arg(long, value_name = "N")]
    pub accept_storm: Option<u64>,
}

/// `--size`: at most a frame's payload.
fn message_size(text: &str) -> Result<usize, String> {
    let size: usize = text.parse().map_err(|e| format!("{e}"))?;
    if size > crate::frame::MAX_PAYLOAD {
        return Err("over the 16 MiB frame limit".into());
    }
    Ok(size)
}

/// `loadgen`'s command line; it prints one JSON line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "loadgen",
    about = "Raw-echo load generator: prints one JSON line",
    args_override_self = true
)]
pub struct Cli {
    #[command(flatten)]
    pub load: LoadArgs,
}

/// What to run.
#[derive(Debug, Clone)]
pub enum Command {
    ClosedLoop(ClosedLoopConfig),
    Probe(ProbeConfig),
    AcceptStorm(AcceptStormConfig),
}

impl LoadArgs {
    /// The run the flags ask for (`--server-syscalls` is set for the whole process).
    pub fn command(&self) -> Command {
        super::harness::count_server_syscalls(self.server_syscalls);
        let threads = self.threads.max(1);
        let shape = RunShape {
            addr: self.addr,
            threads,
            warmup: Duration::from_millis(self.warmup_ms),
            duration: Duration::from_millis(self.duration_ms.max(1)),
            server_pid: self.server_pid,
        };
        if let Some(cycles) = self.accept_storm {
            Command::AcceptStorm(AcceptStormConfig {
                addr: self.addr,
                cycles,
                threads,
                size: self.size,
                server_pid: self.server_pid,
            })
        } else if self.probe {
            Command::Probe(ProbeConfig {
                shape,
                hot_conns: self.hot_conns,
                hot_depth: self.hot_depth,
                size: self.size,
                probe_size: self.probe_size,
                probe_addr: self.probe_addr,
            })
        } else {
            Command::ClosedLoop(ClosedLoopConfig {
                shape,
                conns: self.conns,
                depth: self.depth,
                size: self.size,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse_words(words: &[&str]) -> Result<Command, clap::Error> {
        let cli = Cli::try_parse_from(std::iter::once("loadgen").chain(words.iter().copied()))?;
        Ok(cli.load.command())
    }

    #[test]
    fn the_parser_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
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
        for words in [
            &[
                "--addr",
                "127.0.0.1:1",
                "--accept-storm",
                "1",
                "--depth",
                "4",
            ][..],
            &["--addr", "127.0.0.1:1", "--hot-conns", "4"],
            &["--addr", "127.0.0.1:1", "--probe", "--conns", "4"],
            &["--addr", "127.0.0.1:1", "--size", "20000000"],
            &["--conns", "1"],
            &["--addr", "127.0.0.1:1", "--connz", "1"],
        ] {
            assert!(parse_words(words).is_err(), "{words:?}");
        }
    }
}
