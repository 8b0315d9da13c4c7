//! Length-prefixed echo server on corewire's shards.
//!
//! ```text
//! cargo run --release --example echo_server -- --addr 127.0.0.1:7000 --shards 2 \
//!     [--accept reuseport|handoff] [--placement least|rr|fixed:N] \
//!     [--budget-msgs N|unlimited] [--budget-bytes N] [--max-msg BYTES] [--spin-us N] [--spin-fixed]
//!     [--no-pin] [--recv-buffers COUNTxSIZE] [--registered-fds SLOTS] [--decode]
//! ```
//!
//! Each receive's whole frames go back in one send, as they arrived; `--decode` hands every
//! frame up on its own and gathers the replies instead, as a server that must look at each
//! message does (see `echo_support::connection`).
//!
//! `--recv-buffers` sizes each shard's receive-buffer ring (default 256x4096);
//! `--registered-fds` gives each shard a registered file table of that many slots (default 0:
//! none), so connections' receives and sends name a slot instead of a descriptor.
//!
//! Frames are a u32 little-endian length and that many bytes; each one comes back as is.
//! On SIGINT/SIGTERM it prints per-shard counters and exits 0.

#[path = "echo_support/mod.rs"]
mod echo_support;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use corewire::runtime::accept::{AcceptMode, Placement};
use corewire::runtime::net::RecvBuffers;
use corewire::runtime::ShardStatsSnapshot;
use corewire::{Budget, Runtime};
use corewire::{ListenerHandle, TcpEndpoint};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use echo_support::args::at_least_one;
use echo_support::connection::{serve_echo, serve_echo_decoded, EchoLimits};

#[derive(Debug)]
struct ServerConfig {
    addr: SocketAddr,
    shards: usize,
    mode: AcceptMode,
    budget: Budget,
    limits: EchoLimits,
    decode: bool,
    spin: Option<Duration>,
    spin_fixed: bool,
    pin: bool,
    recv_buffers: RecvBuffers,
    registered_fds: u32,
}

#[derive(Parser)]
#[command(
    name = "echo_server",
    about = "Length-prefixed echo server on corewire's shards"
)]
struct Cli {
    #[arg(long, value_name = "IP:PORT")]
    addr: SocketAddr,
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    shards: usize,
    /// How connections reach shards (a --placement alone implies handoff; default reuseport).
    #[arg(long, value_parser = ["reuseport", "handoff"])]
    accept: Option<String>,
    /// Which shard a handed-off connection goes to.
    #[arg(long, value_name = "least|rr|fixed:N")]
    placement: Option<String>,
    /// Messages a connection handles per round (default: the runtime's budget).
    #[arg(long, value_name = "N|unlimited", value_parser = parse_budget_msgs)]
    budget_msgs: Option<Messages>,
    /// Bytes a connection handles per round.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    budget_bytes: Option<usize>,
    /// Largest message accepted (frames carry a u32 length).
    #[arg(long, value_name = "BYTES")]
    max_msg: Option<u32>,
    /// How long an idle shard polls before sleeping.
    #[arg(long, value_name = "N")]
    spin_us: Option<u64>,
    /// Spin the full --spin-us bound in every idle period (default: the adaptive window).
    #[arg(long)]
    spin_fixed: bool,
    /// Leave the shards unpinned.
    #[arg(long)]
    no_pin: bool,
    /// Each shard's receive-buffer ring (default 256x4096).
    #[arg(long, value_name = "COUNTxSIZE", value_parser = parse_recv_buffers)]
    recv_buffers: Option<RecvBuffers>,
    /// A registered file table of this many slots per shard, so connections name a slot
    /// instead of a descriptor (default 0: none).
    #[arg(long, value_name = "SLOTS", default_value_t = 0)]
    registered_fds: u32,
    /// Hand every frame up on its own and gather the replies, instead of sending each
    /// receive's whole frames back as they came.
    #[arg(long)]
    decode: bool,
}

/// `--budget-msgs`: a count, or no limit.
#[derive(Debug, Clone, Copy)]
enum Messages {
    Unlimited,
    Count(u32),
}

fn config(cli: Cli) -> Result<ServerConfig, clap::Error> {
    let error = |kind, message: String| Cli::command().error(kind, message);
    let placement = cli
        .placement
        .map(|p| parse_placement(&p, cli.shards))
        .transpose()
        .map_err(|why| error(ErrorKind::ValueValidation, why))?;
    let mode = match (cli.accept.as_deref(), placement) {
        (Some("reuseport"), Some(_)) => {
            return Err(error(
                ErrorKind::ArgumentConflict,
                "--placement needs --accept handoff (reuseport leaves placement to the kernel)"
                    .into(),
            ))
        }
        (None | Some("reuseport"), None) => AcceptMode::ReusePort,
        // A placement alone implies handoff.
        (_, placement) => AcceptMode::handoff(placement.unwrap_or_default()),
    };
    let budget = match (cli.budget_msgs, cli.budget_bytes) {
        (None, None) => Budget::default(),
        (msgs, bytes) => Budget::new(
            match msgs {
                Some(Messages::Count(n)) => Some(n),
                None | Some(Messages::Unlimited) => None,
            },
            bytes,
        ),
    };
    let limits = EchoLimits {
        max_msg: cli
            .max_msg
            .map_or(EchoLimits::default().max_msg, |n| n as usize),
    };
    Ok(ServerConfig {
        addr: cli.addr,
        shards: cli.shards,
        mode,
        budget,
        limits,
        decode: cli.decode,
        spin: cli.spin_us.map(Duration::from_micros),
        spin_fixed: cli.spin_fixed,
        pin: !cli.no_pin,
        recv_buffers: cli.recv_buffers.unwrap_or_default(),
        registered_fds: cli.registered_fds,
    })
}

/// `COUNTxSIZE`, e.g. `1024x4096` (the runtime checks the count is a power of two).
fn parse_recv_buffers(text: &str) -> Result<RecvBuffers, String> {
    let bad = || "expected COUNTxSIZE, e.g. 1024x4096".to_owned();
    let (count, size) = text.split_once('x').ok_or_else(bad)?;
    Ok(RecvBuffers::new(
        count.parse().map_err(|_| bad())?,
        size.parse().map_err(|_| bad())?,
    ))
}

fn parse_placement(text: &str, shards: usize) -> Result<Placement, String> {
    match text {
        "least" => Ok(Placement::LeastConnections),
        "rr" => Ok(Placement::RoundRobin),
        _ => {
            let shard = text
                .strip_prefix("fixed:")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| format!("--placement {text:?}: expected least, rr or fixed:N"))?;
            if shard >= shards {
                return Err(format!("--placement {text:?}: only {shards} shards"));
            }
            Ok(Placement::Fixed(shard))
        }
    }
}

fn parse_budget_msgs(text: &str) -> Result<Messages, String> {
    match text {
        "unlimited" => Ok(Messages::Unlimited),
        n => match n.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Messages::Count(n)),
            _ => Err("expected a count > 0 or unlimited".into()),
        },
    }
}

fn main() -> ExitCode {
    echo_support::logging::init();
    let config = match config(Cli::parse()) {
        Ok(config) => config,
        Err(e) => e.exit(),
    };
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(config: ServerConfig) -> std::io::Result<()> {
    // Registered before the shards start, so no signal can arrive unhandled.
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let mut builder = Runtime::builder()
        .shards(config.shards)
        .pin(config.pin)
        .recv_buffers(config.recv_buffers)
        .registered_fds(config.registered_fds)
        .spin_adaptive(!config.spin_fixed);
    if let Some(spin) = config.spin {
        builder = builder.spin_before_park(spin);
    }
    let rt = builder.build()?;
    let limits = config.limits;
    let decode = config.decode;
    let server = TcpEndpoint::bind(config.addr)
        .mode(config.mode.clone())
        .budget(config.budget)
        .serve(&rt, move |accepted| async move {
            if decode {
                serve_echo_decoded(accepted, limits).await
            } else {
                serve_echo(accepted, limits).await
            }
        })?;
    println!(
        "echo_server listening on {} backend={} shards={} accept={:?} budget={:?} max_msg={} \
         decode={}",
        server.local_addr(),
        rt.backend(),
        config.shards,
        config.mode,
        config.budget,
        limits.max_msg,
        decode
    );

    let signal = signals.forever().next();
    tracing::info!(?signal, "stopping");
    print!("{}", stats_report(&server, &rt.stats()));
    server.stop();
    rt.shutdown();
    Ok(())
}

/// The summary lines, then every counter of every shard.
fn stats_report(server: &ListenerHandle, stats: &[ShardStatsSnapshot]) -> String {
    let placed = server.placed_connections();
    let mut out = String::new();
    for (i, s) in stats.iter().enumerate() {
        out.push_str(&format!(
            "stats shard={i} accepted={} open={} budget_exhausted={} handoffs_in={} placed={}\n",
            s.accepted, s.open_connections, s.budget_exhausted, s.handoffs_in, placed[i]
        ));
    }
    for (i, s) in stats.iter().enumerate() {
        out.push_str(&format!("shard={i} {s}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    //! The real handler on a one-shard runtime, against blocking clients.

    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn parse(s: &str) -> Result<ServerConfig, clap::Error> {
        config(Cli::try_parse_from(
            std::iter::once("echo_server").chain(s.split_whitespace()),
        )?)
    }

    #[test]
    fn cli_builds_the_server_config() {
        Cli::command().debug_assert();
        let c = parse(
            "--addr 127.0.0.1:0 --shards 2 --placement fixed:1 --budget-msgs 4 --max-msg 1024",
        )
        .unwrap();
        assert!(matches!(
            c.mode,
            AcceptMode::Handoff {
                placement: Placement::Fixed(1),
                ..
            }
        ));
        assert_eq!(c.budget, Budget::messages(4));
        assert_eq!(c.limits.max_msg, 1024);
        assert_eq!(c.recv_buffers, RecvBuffers::default());
        assert_eq!(c.registered_fds, 0);
        assert!(!c.decode);
        assert!(
            parse("--addr 127.0.0.1:0 --shards 1 --decode")
                .unwrap()
                .decode
        );

        let c =
            parse("--addr 127.0.0.1:0 --shards 1 --recv-buffers 256x16384 --registered-fds 4096")
                .unwrap();
        assert_eq!(c.registered_fds, 4096);
        assert_eq!(c.recv_buffers, RecvBuffers::new(256, 16384));

        let c = parse("--addr 127.0.0.1:0 --shards 1 --budget-msgs unlimited").unwrap();
        assert!(c.budget.is_unlimited());
        assert!(matches!(c.mode, AcceptMode::ReusePort));

        for bad in [
            "--addr 127.0.0.1:0 --shards 2 --placement fixed:2",
            "--addr 127.0.0.1:0 --shards 2 --accept reuseport --placement rr",
            "--addr 127.0.0.1:0 --shards 2 --accept sideways",
            "--addr 127.0.0.1:0 --shards 2 --budget-msgs 0",
            "--addr 127.0.0.1:0 --shards 2 --colour blue",
            "--addr 127.0.0.1:0 --shards 1 --recv-buffers 1024",
            "--addr 127.0.0.1:0 --shards 1 --recv-buffers ax4096",
            "--shards 2",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// Both styles of the handler: each receive's whole frames sent back as they came, or
    /// (`decode`) every frame handed up and the replies gathered.
    const STYLES: [bool; 2] = [false, true];

    fn start(max_msg: usize, decode: bool) -> (Runtime, ListenerHandle) {
        let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
        let limits = EchoLimits { max_msg };
        let endpoint = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap());
        let server = if decode {
            endpoint.serve(&rt, move |a| serve_echo_decoded(a, limits))
        } else {
            endpoint.serve(&rt, move |a| serve_echo(a, limits))
        };
        (rt, server.unwrap())
    }

    fn connect(server: &ListenerHandle) -> TcpStream {
        let s = TcpStream::connect(server.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(payload);
        f
    }

    /// Read until the server closes (a reset counts: it may close with our bytes unread).
    fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    #[test]
    fn pipelined_frames_of_all_sizes_come_back() {
        for decode in STYLES {
            pipelined_frames_come_back(decode);
        }
    }

    fn pipelined_frames_come_back(decode: bool) {
        let (rt, server) = start(1 << 20, decode);
        let mut s = connect(&server);
        let payloads: Vec<Vec<u8>> = [0usize, 1, 4096, 4097, 70_000, 1 << 20]
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        let wire: Vec<u8> = payloads.iter().flat_map(|p| frame(p)).collect();
        let writer = {
            let mut s = s.try_clone().unwrap();
            std::thread::spawn(move || {
                s.write_all(&wire).unwrap();
                s.shutdown(std::net::Shutdown::Write).unwrap();
            })
        };
        let got = read_to_close(&mut s);
        writer.join().unwrap();
        let expected: Vec<u8> = payloads.iter().flat_map(|p| frame(p)).collect();
        assert!(got == expected, "echo stream differs (decode {decode})");
        assert_eq!(rt.stats()[0].protocol_errors, 0);
    }

    #[test]
    fn oversize_and_mid_frame_close_are_protocol_errors() {
        for decode in STYLES {
            protocol_errors_close(decode);
        }
    }

    fn protocol_errors_close(decode: bool) {
        let (rt, server) = start(100, decode);
        let mut good = connect(&server);

        let mut bad = connect(&server);
        bad.write_all(&101u32.to_le_bytes()).unwrap();
        assert!(read_to_close(&mut bad).is_empty());

        let mut bad = connect(&server);
        bad.write_all(&frame(&[1; 50])[..20]).unwrap();
        bad.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(read_to_close(&mut bad).is_empty());

        // Whole frames before the partial one are echoed; the close inside it is an error.
        let mut bad = connect(&server);
        let mut wire = frame(b"whole");
        wire.extend_from_slice(&frame(&[1; 50])[..2]);
        bad.write_all(&wire).unwrap();
        bad.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(read_to_close(&mut bad), frame(b"whole"));

        assert_eq!(rt.stats()[0].protocol_errors, 3, "decode {decode}");
        good.write_all(&frame(b"still fine")).unwrap();
        let mut reply = vec![0u8; 14];
        good.read_exact(&mut reply).unwrap();
        assert_eq!(reply, frame(b"still fine"));
    }

    #[test]
    fn report_has_the_summary_lines_first() {
        let (rt, server) = start(100, false);
        let report = stats_report(&server, &rt.stats());
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "stats shard=0 accepted=0 open=0 budget_exhausted=0 handoffs_in=0 placed=0"
        );
        assert!(lines[1].starts_with("shard=0 loop_iterations="));
    }
}
