//! Load generator for `echo_server`, running on corewire's shards.
//!
//! ```text
//! cargo run --release --example echo_client -- --addr 127.0.0.1:7000 \
//!     [--conns 16] [--depth 8] [--size 64] (--count N | --duration-ms MS) [--shards N] [--pin]
//! ```
//!
//! Every reply is checked byte for byte against its request; any difference is an error
//! (exit 1). Prints messages, QPS and latency percentiles.

#[path = "echo_support/mod.rs"]
mod echo_support;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use corewire::Runtime;

use echo_support::args::at_least_one;
use echo_support::load::{run_load, LoadReport, LoadSpec, StopAfter};

struct ClientConfig {
    spec: LoadSpec,
    shards: usize,
    pin: bool,
}

#[derive(Parser)]
#[command(
    name = "echo_client",
    about = "Load generator for echo_server: every reply is checked against its request"
)]
struct Cli {
    #[arg(long, value_name = "IP:PORT")]
    addr: SocketAddr,
    /// Connections.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = at_least_one)]
    conns: usize,
    /// Requests in flight per connection.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = at_least_one)]
    depth: usize,
    /// Message bytes (frames carry a u32 length).
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    size: u32,
    /// Stop after this many messages.
    #[arg(long, value_name = "N", conflicts_with = "duration_ms")]
    count: Option<u64>,
    /// Stop after this long (default: 5 s).
    #[arg(long, value_name = "MS")]
    duration_ms: Option<u64>,
    /// Client shards.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one)]
    shards: usize,
    /// Pin the client shards.
    #[arg(long)]
    pin: bool,
}

fn config(cli: Cli) -> ClientConfig {
    let stop = match (cli.count, cli.duration_ms) {
        (Some(n), _) => StopAfter::Messages(n),
        (None, Some(ms)) => StopAfter::Duration(Duration::from_millis(ms)),
        (None, None) => StopAfter::Duration(Duration::from_secs(5)),
    };
    ClientConfig {
        spec: LoadSpec {
            addr: cli.addr,
            conns: cli.conns,
            depth: cli.depth,
            size: cli.size as usize,
            stop,
        },
        shards: cli.shards,
        pin: cli.pin,
    }
}

fn main() -> ExitCode {
    echo_support::logging::init();
    let config = config(Cli::parse());
    let rt = match Runtime::builder()
        .shards(config.shards)
        .pin(config.pin)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("echo_client: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = run_load(&rt, &config.spec);
    rt.shutdown();
    match result {
        Ok(report) => {
            println!("{}", summary(&config.spec, &report));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("echo_client: {e}");
            ExitCode::FAILURE
        }
    }
}

fn summary(spec: &LoadSpec, r: &LoadReport) -> String {
    format!(
        "conns={} depth={} size={} messages={} elapsed_ms={} qps={:.0} payload_mib_s={:.1} \
         p50_us={:.1} p99_us={:.1} p999_us={:.1} max_us={:.1} verified=yes",
        spec.conns,
        spec.depth,
        spec.size,
        r.messages,
        r.elapsed.as_millis(),
        r.qps(),
        r.payload_bytes as f64 / (1 << 20) as f64 / r.elapsed.as_secs_f64().max(1e-9),
        micros(r.latency(0.5)),
        micros(r.latency(0.99)),
        micros(r.latency(0.999)),
        r.latency_ns.max() as f64 / 1e3,
    )
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use corewire::runtime::accept::Accepted;
    use corewire::TcpEndpoint;
    use echo_support::connection::{serve_echo, EchoLimits};
    use echo_support::load::LoadError;

    fn parse(s: &str) -> Result<ClientConfig, clap::Error> {
        Cli::try_parse_from(std::iter::once("echo_client").chain(s.split_whitespace())).map(config)
    }

    #[test]
    fn cli() {
        <Cli as clap::CommandFactory>::command().debug_assert();
        let c = parse("--addr 127.0.0.1:1 --conns 3 --depth 2 --size 9 --count 100").unwrap();
        assert_eq!((c.spec.conns, c.spec.depth, c.spec.size), (3, 2, 9));
        assert!(matches!(c.spec.stop, StopAfter::Messages(100)));
        assert!(parse("--addr 127.0.0.1:1 --count 1 --duration-ms 5").is_err());
        assert!(parse("--addr 127.0.0.1:1 --depth 0").is_err());
        assert!(parse("--conns 1").is_err());
    }

    fn rt(shards: usize) -> Runtime {
        Runtime::builder()
            .shards(shards)
            .pin(false)
            .build()
            .unwrap()
    }

    fn spec(addr: std::net::SocketAddr, size: usize, stop: StopAfter) -> LoadSpec {
        LoadSpec {
            addr,
            conns: 3,
            depth: 5,
            size,
            stop,
        }
    }

    #[test]
    fn load_against_the_echo_handler_counts_every_reply() {
        let server_rt = rt(2);
        let server = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
            .serve(&server_rt, |a| serve_echo(a, EchoLimits::default()))
            .unwrap();
        let client_rt = rt(2);
        for (size, count) in [(0, 100), (100, 1000), (300_000, 20)] {
            let report = run_load(
                &client_rt,
                &spec(server.local_addr(), size, StopAfter::Messages(count)),
            )
            .unwrap();
            assert_eq!(report.messages, count, "size {size}");
            assert_eq!(report.latency_ns.len(), count);
        }
        let timed = run_load(
            &client_rt,
            &spec(
                server.local_addr(),
                10,
                StopAfter::Duration(Duration::from_millis(50)),
            ),
        )
        .unwrap();
        assert!(timed.messages > 0);
    }

    /// Reads everything, answers with `reply(frame_index, payload)` (or stops answering and
    /// closes once it returns `None`).
    async fn fake_echo(a: Accepted, reply: fn(u64, Bytes) -> Option<Bytes>) {
        let mut reader = echo_support::frame_reader::FrameReader::new(1 << 20);
        let mut buf = BytesMut::new();
        let mut index = 0;
        loop {
            let (res, b) = a.stream.recv(buf, 4096).await;
            buf = b;
            match res {
                Ok(0) | Err(_) => return,
                Ok(n) => reader.received(n),
            }
            while let Some(payload) = reader.next(&mut buf).unwrap() {
                let Some(out) = reply(index, payload) else {
                    return;
                };
                let mut batch = echo_support::frame_batch::FrameBatch::new();
                batch.push(out);
                if a.stream.send_all_vectored(batch.take()).await.is_err() {
                    return;
                }
                index += 1;
            }
        }
    }

    fn load_against(reply: fn(u64, Bytes) -> Option<Bytes>) -> Result<u64, LoadError> {
        let server_rt = rt(1);
        let server = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
            .serve(&server_rt, move |a| fake_echo(a, reply))
            .unwrap();
        let client_rt = rt(1);
        run_load(
            &client_rt,
            &spec(server.local_addr(), 64, StopAfter::Messages(300)),
        )
        .map(|r| r.messages)
    }

    #[test]
    fn a_single_wrong_byte_is_caught() {
        let got = load_against(|i, p| {
            if i == 57 {
                let mut v = p.to_vec();
                v[63] ^= 1;
                Some(v.into())
            } else {
                Some(p)
            }
        });
        assert!(
            matches!(got, Err(LoadError::Mismatch { message: 57, .. })),
            "{:?}",
            got.map_err(|e| e.to_string())
        );
    }

    #[test]
    fn missing_replies_are_caught() {
        let got = load_against(|i, p| (i < 40).then_some(p));
        assert!(
            matches!(got, Err(LoadError::ClosedEarly { .. })),
            "{:?}",
            got.map_err(|e| e.to_string())
        );
    }
}
