//! Idle RESP connections hold no receive buffer: with multishot receive into the shard's
//! buffer ring, every ring buffer is back while many connections wait for their clients.
//! (Under `COREWIRE_IO_URING=plain` each waiting connection has a single-shot receive with a
//! buffer of its own instead; the test checks that this is what happens. On the epoll
//! backend each waiting connection is a waiter on its socket's readiness, with no buffer: a
//! receive takes the shard's scratch buffer only when data is there.)

mod common;
#[path = "../../../tests/tls_common/mod.rs"]
mod tls_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{eventually, Server, IO_TIMEOUT};
use corewire::runtime::net::RecvBuffers;

/// Buffers in the server's receive ring (it runs with the runtime's default).
fn ring() -> u64 {
    u64::from(RecvBuffers::default().count)
}

const CONNS: usize = 50;

fn scrape(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: kv\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn value(text: &str, metric: &str) -> u64 {
    let prefix = format!("{metric}{{shard=\"0\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{prefix} missing from:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn idle_connections_hold_no_ring_buffers() {
    let server = Server::start(&["--shards", "1", "--metrics", "127.0.0.1:0"]);
    let metrics = server.metrics_port.expect("metrics= in the ready line");
    let conns: Vec<TcpStream> = (0..CONNS)
        .map(|i| {
            let mut c = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            exchange(&mut c, i);
            c
        })
        .collect();
    // The gauges are refreshed each loop iteration: scrape until they show every connection
    // (or the limit passes; the assertions below then say what they show).
    let epoll = |text: &str| text.contains("corewire_backend_info{backend=\"epoll\"} 1");
    let settled = |text: &str| {
        if epoll(text) {
            value(text, "corewire_ops_in_flight") >= CONNS as u64
        } else if value(text, "corewire_recv_multishot_arms_total") > 0 {
            value(text, "corewire_recv_buffers_free") >= ring() - 1
                && value(text, "corewire_recv_multishot_arms_total") >= CONNS as u64
        } else {
            value(text, "corewire_recv_single_shot_total") >= CONNS as u64
        }
    };
    let mut text = scrape(metrics);
    eventually(Duration::from_secs(10), || {
        text = scrape(metrics);
        settled(&text)
    });
    let arms = value(&text, "corewire_recv_multishot_arms_total");
    let free = value(&text, "corewire_recv_buffers_free");
    let single = value(&text, "corewire_recv_single_shot_total");
    if epoll(&text) {
        assert_eq!(
            arms + single + free,
            0,
            "epoll has no ring and no receive ops"
        );
        let waiting = value(&text, "corewire_ops_in_flight");
        assert!(
            waiting >= CONNS as u64,
            "{waiting} receives wait for {CONNS} idle connections"
        );
    } else if arms > 0 {
        // The default ring. The metrics connection's own request is in flight, its chunk
        // maybe not yet dropped.
        assert!(
            free >= ring() - 1,
            "idle connections hold ring buffers: {free} of {} free",
            ring()
        );
        assert_eq!(single, 0, "the ring ran dry");
        assert!(
            arms >= CONNS as u64,
            "{arms} multishot receives for {CONNS} connections"
        );
    } else {
        assert_eq!(free, 0, "no ring, no free buffers");
        assert!(single >= CONNS as u64, "{single} single-shot receives");
    }
    drop(conns);
}

/// Idle TLS connections: they hold no ring buffer either (the TLS stream reads through the
/// same multishot receive), and what each costs beyond a plaintext one — rustls's state and
/// its 4 KiB read buffer — is measured as the server's resident memory growth with N idle
/// connections, on a fresh TLS server and a fresh plaintext one (printed for BENCHMARKS.md;
/// bounded generously here, since RSS moves in pages).
#[test]
fn idle_tls_connections_hold_no_ring_buffers_and_little_memory() {
    use corewire::runtime::tls::rustls::pki_types::ServerName;
    use corewire::runtime::tls::rustls::{ClientConnection, StreamOwned};
    use std::sync::Arc;

    const N: usize = 400;
    let dir = common::TempDir::new("idle-tls");
    let ca = tls_common::TestCa::new("idle CA");
    let (cert, key) = ca
        .leaf(&["localhost"], tls_common::Usage::Server)
        .write(dir.path(), "server");
    let tls_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let common_args = [
        "--shards",
        "1",
        "--metrics",
        "127.0.0.1:0",
        "--maxclients",
        "2000",
    ];
    let tls_args = [
        "--port",
        "0",
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        cert.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
        "--tls-auth-clients",
        "no",
    ];
    let config = Arc::new(tls_common::client_config(&ca, None, &[]));
    let rss_kib = |server: &Server| {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok())
            .unwrap()
    };
    // N idle connections (each after one exchange) to a fresh server: its RSS growth per
    // connection, in bytes, with the connections still open.
    let measure = |tls: bool| -> (i64, Vec<Box<dyn ReadWrite>>, Server) {
        let mut args: Vec<&str> = common_args.to_vec();
        if tls {
            args.extend_from_slice(&tls_args);
        }
        let server = Server::start(&args);
        let before = rss_kib(&server);
        let conns: Vec<Box<dyn ReadWrite>> = (0..N)
            .map(|i| {
                let port = if tls {
                    server.tls_port.unwrap()
                } else {
                    server.port
                };
                let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
                tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
                let mut c: Box<dyn ReadWrite> = if tls {
                    let conn = ClientConnection::new(
                        config.clone(),
                        ServerName::try_from("localhost").unwrap(),
                    )
                    .unwrap();
                    Box::new(StreamOwned::new(conn, tcp))
                } else {
                    Box::new(tcp)
                };
                exchange(&mut *c, i);
                c
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let per_conn = (rss_kib(&server) - before) * 1024 / N as i64;
        (per_conn, conns, server)
    };
    let (plain, plain_conns, plain_server) = measure(false);
    drop(plain_conns);
    drop(plain_server);
    let (tls, conns, server) = measure(true);
    eprintln!(
        "idle connections, {N} each, server RSS growth per connection: plaintext {plain} B, \
         TLS {tls} B (TLS adds {} B: rustls's state, its read buffer, the session)",
        tls - plain
    );
    let text = scrape(server.metrics_port.unwrap());
    let free = value(&text, "corewire_recv_buffers_free");
    if value(&text, "corewire_recv_multishot_arms_total") > 0 {
        assert!(
            free >= ring() - 1,
            "idle TLS connections hold ring buffers: {free} of {} free",
            ring()
        );
    }
    assert!(
        tls - plain < 48 * 1024,
        "an idle TLS connection costs {} bytes more than a plaintext one",
        tls - plain
    );
    drop(conns);
}

/// Heap bytes one idle connection keeps (INFO's `used_memory`: the server allocator's own
/// count, so no page rounding and no allocator slack): after one exchange, a connection
/// waiting for its client keeps its task, its session and its socket's share of the runtime,
/// and none of the buffers the exchange used (input, output, reply slots, the answered calls'
/// room). Was about 2.5 KB before those were released and the session's rarely used state
/// boxed; the RSS figure per connection is in BENCHMARKS.md (idle memory).
#[test]
fn an_idle_connection_keeps_no_buffers() {
    const N: usize = 500;
    /// Bytes per idle connection: measured 1,346 on io_uring and 1,395 on epoll (the task,
    /// the session, the runtime's share, the shard's tables' growth); a field or buffer of a
    /// hundred bytes or more per connection fails it.
    const BOUND: u64 = 1472;
    // Without a buffer ring (`COREWIRE_IO_URING=plain`, kernels before 5.19) a receive waits
    // in the kernel with its own 16 KiB buffer (the runtime's fallback chunk): that buffer is
    // the price of such a ring, held by every connection waiting for data. The ring and
    // epoll hold none.
    let plain_ring = std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain")
        && std::env::var("COREWIRE_BACKEND").as_deref() != Ok("epoll");
    let bound = BOUND + if plain_ring { 16 * 1024 } else { 0 };
    let server = Server::start(&["--shards", "1", "--maxclients", "2000"]);
    let mut probe = common::Resp::connect(server.port);
    let field = |probe: &mut common::Resp, name: &str| {
        let common::Reply::Bulk(Some(text)) = probe.call(&["INFO", "memory"]) else {
            panic!("INFO memory is not a bulk string");
        };
        let text = String::from_utf8(text).unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} in INFO memory"))
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let used = |probe: &mut common::Resp| field(probe, "used_memory");
    let before = used(&mut probe);
    let clients_before = field(&mut probe, "mem_clients_normal");
    let conns: Vec<TcpStream> = (0..N)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            // One key for all: the store does not grow with the connections.
            exchange(&mut c, 0);
            c
        })
        .collect();
    // A connection lets its buffers go once its reply's send has completed: soon after its
    // client read it.
    let mut per_conn = u64::MAX;
    eventually(Duration::from_secs(10), || {
        per_conn = used(&mut probe).saturating_sub(before) / N as u64;
        per_conn <= bound
    });
    eprintln!("heap per idle connection: {per_conn} bytes ({N} connections)");
    assert!(
        per_conn <= bound,
        "an idle connection keeps {per_conn} heap bytes (bound {bound})"
    );
    // INFO counts most of those bytes as the connections' (`mem_clients_normal`: the task,
    // the session and the state around it), not as data: all but the runtime's share and
    // the tables' growth.
    // (Without multishot receive, the runtime's armed receive holds a 16 KiB buffer per
    // connection, outside that count.)
    let clients = field(&mut probe, "mem_clients_normal").saturating_sub(clients_before) / N as u64;
    eprintln!("mem_clients_normal per idle connection: {clients} bytes");
    let beyond_ring = per_conn.saturating_sub(bound - BOUND);
    assert!(
        clients <= per_conn && clients * 2 >= beyond_ring,
        "mem_clients_normal grew {clients} bytes per idle connection, the heap {per_conn}"
    );
    drop(conns);
}

/// A pipelined pair of requests, so each connection received something.
fn exchange(c: &mut dyn ReadWrite, i: usize) {
    let key = format!("idle:{i}");
    let req = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n",
        key.len()
    );
    c.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got != b"+OK\r\n+PONG\r\n" {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "server closed");
        got.extend_from_slice(&buf[..n]);
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}
