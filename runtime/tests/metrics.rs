//! The Prometheus exporter, scraped over real HTTP from outside the runtime.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use corewire_runtime::metrics::MetricsServer;
use corewire_runtime::{Runtime, ShardStatsSnapshot};

fn get(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn scrape_shows_every_shard_and_every_counter() {
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    rt.run_on(1, || async {
        for _ in 0..10 {
            corewire_runtime::yield_now().await;
        }
    })
    .unwrap();
    let metrics = MetricsServer::serve(&rt, 1, "127.0.0.1:0".parse().unwrap()).unwrap();
    let text = get(
        metrics.local_addr(),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"));
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(length, body.len());
    for (name, _, _) in ShardStatsSnapshot::FIELDS {
        for shard in 0..2 {
            assert!(
                body.lines().any(|l| l.starts_with("corewire_")
                    && l.contains(name)
                    && l.contains(&format!("{{shard=\"{shard}\"}}"))),
                "{name} of shard {shard} missing"
            );
        }
    }
    let polled: u64 = body
        .lines()
        .find_map(|l| l.strip_prefix("corewire_tasks_polled_total{shard=\"1\"} "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(polled >= 10, "shard 1 polled its task ten times at least");
    metrics.stop();
}

#[test]
fn bad_and_oversized_requests_are_answered_and_closed() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let metrics = MetricsServer::serve(&rt, 0, "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = metrics.local_addr();
    assert!(get(addr, b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(get(addr, b"DELETE /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 20_000));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may close before reading everything; a reset here is fine.
    let _ = s.write_all(&huge);
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(
        out.is_empty() || out.starts_with(b"HTTP/1.1 400"),
        "oversized request: {:?}",
        String::from_utf8_lossy(&out)
    );
    // Still serving.
    assert!(get(addr, b"GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
}

#[test]
fn stop_closes_the_listener_and_a_bad_address_is_an_error() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let metrics = MetricsServer::serve(&rt, 0, "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = metrics.local_addr();
    assert!(
        MetricsServer::serve(&rt, 0, addr).is_err(),
        "address in use"
    );
    assert!(MetricsServer::serve(&rt, 5, "127.0.0.1:0".parse().unwrap()).is_err());
    metrics.stop();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_ok() {
        assert!(std::time::Instant::now() < deadline, "listener still open");
        std::thread::sleep(Duration::from_millis(10));
    }
}
