//! Idle RESP connections hold no receive buffer: with multishot receive into the shard's
//! buffer ring, every ring buffer is back while many connections wait for their clients.
//! (Under `COREWIRE_IO_URING=plain` each waiting connection has a single-shot receive with a
//! buffer of its own instead; the test checks that this is what happens. On the epoll
//! backend each waiting connection is a waiter on its socket's readiness, with no buffer: a
//! receive takes the shard's scratch buffer only when data is there.)

mod common;

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
            // A pipelined pair of requests, so each connection received something.
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
