//! `--metrics ADDR`: the runtime's per-shard counters over HTTP while the store serves.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{Server, IO_TIMEOUT};

fn scrape(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: kv\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn value(text: &str, metric: &str, shard: usize) -> u64 {
    let prefix = format!("{metric}{{shard=\"{shard}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{prefix} missing from:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn metrics_flag_serves_prometheus_text_for_every_shard() {
    let server = Server::start(&["--shards", "2", "--metrics", "127.0.0.1:0"]);
    let port = server.metrics_port.expect("metrics= in the ready line");
    let before = scrape(port);
    assert!(before.starts_with("HTTP/1.1 200 OK"), "{before}");
    let accepted_before: u64 = (0..2)
        .map(|s| value(&before, "corewire_accepted_total", s))
        .sum();
    for i in 0..5 {
        assert_eq!(server.cli(&["set", &format!("k{i}"), "v"]), "OK");
    }
    let after = scrape(port);
    let accepted_after: u64 = (0..2)
        .map(|s| value(&after, "corewire_accepted_total", s))
        .sum();
    assert!(
        accepted_after >= accepted_before + 5,
        "five redis-cli connections counted: {accepted_before} -> {accepted_after}"
    );
    assert!(value(&after, "corewire_tasks_polled_total", 1) > 0);
}

#[test]
fn metrics_is_off_by_default_and_a_bad_address_refuses_to_start() {
    let server = Server::start(&["--shards", "1"]);
    assert_eq!(server.metrics_port, None);
    drop(server);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = match Server::try_start(&["--shards", "1", "--metrics", &addr]) {
        Ok(_) => panic!("started with its metrics address taken"),
        Err(e) => e,
    };
    assert!(err.contains("--metrics"), "{err}");
}
