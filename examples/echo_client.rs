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

use std::process::ExitCode;
use std::time::Duration;

use corewire::Runtime;

use echo_support::args::{invalid, ArgError, Flags};
use echo_support::load::{run_load, LoadReport, LoadSpec, StopAfter};

struct ClientConfig {
    spec: LoadSpec,
    shards: usize,
    pin: bool,
}

fn parse(mut flags: Flags) -> Result<ClientConfig, ArgError> {
    let addr = flags.required("addr")?;
    let conns: usize = flags.optional("conns")?.unwrap_or(16);
    let depth: usize = flags.optional("depth")?.unwrap_or(8);
    let size: usize = flags.optional("size")?.unwrap_or(64);
    let count: Option<u64> = flags.optional("count")?;
    let duration: Option<u64> = flags.optional("duration-ms")?;
    let shards: usize = flags.optional("shards")?.unwrap_or(1);
    let pin = flags.switch("pin");
    flags.finish()?;
    for (name, value) in [("conns", conns), ("depth", depth), ("shards", shards)] {
        if value == 0 {
            return Err(invalid(name, "0", "must be at least 1"));
        }
    }
    if size > u32::MAX as usize {
        return Err(invalid(
            "size",
            &size.to_string(),
            "frames carry a u32 length",
        ));
    }
    let stop = match (count, duration) {
        (Some(n), None) => StopAfter::Messages(n),
        (None, Some(ms)) => StopAfter::Duration(Duration::from_millis(ms)),
        (None, None) => StopAfter::Duration(Duration::from_secs(5)),
        (Some(_), Some(_)) => {
            return Err(ArgError::Conflict(
                "give --count or --duration-ms, not both".into(),
            ))
        }
    };
    Ok(ClientConfig {
        spec: LoadSpec {
            addr,
            conns,
            depth,
            size,
            stop,
        },
        shards,
        pin,
    })
}

fn main() -> ExitCode {
    echo_support::logging::init();
    let config = match Flags::from_env().and_then(parse) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("echo_client: {e}");
            eprintln!(
                "usage: echo_client --addr IP:PORT [--conns N] [--depth N] [--size BYTES] \
                 (--count N | --duration-ms MS) [--shards N] [--pin]"
            );
            return ExitCode::from(2);
        }
    };
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

    fn flags(s: &str) -> Flags {
        Flags::parse(s.split_whitespace().map(String::from)).unwrap()
    }

    #[test]
    fn cli() {
        let c = parse(flags(
            "--addr 127.0.0.1:1 --conns 3 --depth 2 --size 9 --count 100",
        ))
        .unwrap();
        assert_eq!((c.spec.conns, c.spec.depth, c.spec.size), (3, 2, 9));
        assert!(matches!(c.spec.stop, StopAfter::Messages(100)));
        assert!(parse(flags("--addr 127.0.0.1:1 --count 1 --duration-ms 5")).is_err());
        assert!(parse(flags("--addr 127.0.0.1:1 --depth 0")).is_err());
        assert!(parse(flags("--conns 1")).is_err());
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
