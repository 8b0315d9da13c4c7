//! The greeter served in-process for the interop tests: gRPC and corewire's TCP framing on a
//! two-shard runtime, plus the Prometheus endpoint.

#![allow(dead_code)] // each test binary uses part of it

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use corewire::runtime::metrics::MetricsServer;
use corewire::{ListenerHandle, Runtime, TcpEndpoint};

pub struct Greeter {
    pub grpc: SocketAddr,
    pub native: SocketAddr,
    pub metrics: SocketAddr,
    // Dropped in this order: listeners and exporter, then the runtime.
    _listeners: Vec<ListenerHandle>,
    _exporter: MetricsServer,
    pub rt: Runtime,
}

pub fn start() -> Greeter {
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    let server = corewire_greeter::server();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let grpc = server.serve_grpc(&rt, TcpEndpoint::bind(any)).unwrap();
    let native = server.serve(&rt, TcpEndpoint::bind(any)).unwrap();
    let exporter = MetricsServer::serve(&rt, 0, any).unwrap();
    Greeter {
        grpc: grpc.local_addr(),
        native: native.local_addr(),
        metrics: exporter.local_addr(),
        _listeners: vec![grpc, native],
        _exporter: exporter,
        rt,
    }
}

/// The Prometheus text the greeter exports now.
pub fn scrape(metrics: SocketAddr) -> String {
    let mut s = TcpStream::connect(metrics).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Calls of `method` that ended with gRPC code `code` (a name: `CANCELLED`), over all shards.
pub fn count(text: &str, method: &str, code: &str) -> u64 {
    let (family, code_label) = if code == "ALL" {
        ("corewire_rpc_requests_total{", String::new())
    } else {
        ("corewire_rpc_errors_total{", format!(",code=\"{code}\""))
    };
    text.lines()
        .filter(|l| l.starts_with(family))
        .filter(|l| l.contains(&format!("method=\"{method}\"")))
        .filter(|l| code_label.is_empty() || l.contains(&code_label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Wait (up to 5 s) until `method` has at least `n` calls ended with `code`.
pub fn wait_for_count(metrics: SocketAddr, method: &str, code: &str, n: u64) -> u64 {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let got = count(&scrape(metrics), method, code);
        if got >= n || Instant::now() > until {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
