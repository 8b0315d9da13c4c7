//! Memory under load: a pipelined burst is admitted at the pace its replies are taken (the
//! connection's buffered input and output stay within their bounds however far ahead the
//! client writes), and FLUSHALL gives the keyspace's memory back (INFO's `used_memory`, the
//! allocator's count, returns near the empty server's; RSS follows, with transparent huge
//! pages off as Redis's `disable-thp` has them); UNLINK frees a large value after its reply,
//! counted as Redis counts lazy frees.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, request, Reply, Resp, Server, IO_TIMEOUT};

fn info_field(conn: &mut Resp, section: &str, field: &str) -> u64 {
    let Reply::Bulk(Some(text)) = conn.call(&["INFO", section]) else {
        panic!("INFO {section} is not a bulk string");
    };
    let text = String::from_utf8(text).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// `field=` of the CLIENT LIST line whose `name=` is `name`.
fn client_field(list: &str, name: &str, field: &str) -> Option<u64> {
    let line = list
        .lines()
        .find(|line| line.split(' ').any(|kv| kv == format!("name={name}")))?;
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))?
        .parse()
        .ok()
}

const VALUE_LEN: usize = 1000;
const BURST: usize = 50_000;
const OUTPUT_BOUND: usize = 64 << 10;

/// 50,000 pipelined GETs of a 1000-byte value: 50 MB of replies, against a 64 KiB output
/// bound, read slowly at first. Every reply arrives, in order, and the connection's
/// buffers (CLIENT LIST's `qbuf`, `omem`, `tot-mem`) stay near the bounds throughout.
#[test]
fn a_pipelined_burst_is_admitted_at_the_pace_it_is_answered() {
    let bound = OUTPUT_BOUND.to_string();
    let server = Server::start(&[
        "--shards",
        "1",
        "--max-pending-output",
        &bound,
        "--max-backlog",
        "64",
    ]);
    let value = "v".repeat(VALUE_LEN);
    let mut control = server.connect();
    assert_eq!(control.call(&["SET", "big", &value]), Reply::ok());

    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = stream;
    writer
        .write_all(&request(&["CLIENT", "SETNAME", "burst"]))
        .unwrap();
    let mut ok = [0u8; 5];
    reader.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");

    let done = Arc::new(AtomicBool::new(false));
    let write_thread = std::thread::spawn(move || {
        let get = request(&["GET", "big"]);
        let batch: Vec<u8> = get.iter().copied().cycle().take(get.len() * 1000).collect();
        for _ in 0..BURST / 1000 {
            writer.write_all(&batch).unwrap();
        }
    });
    let read_done = done.clone();
    let read_thread = std::thread::spawn(move || {
        let expected = format!("${VALUE_LEN}\r\n{}\r\n", "v".repeat(VALUE_LEN)).into_bytes();
        let total = expected.len() * BURST;
        let mut got = 0usize;
        let mut buf = vec![0u8; 64 << 10];
        let mut reads = 0;
        while got < total {
            // Slow at first: the replies back up to the bound on the server.
            if reads < 200 {
                std::thread::sleep(Duration::from_millis(2));
            }
            reads += 1;
            let n = reader.read(&mut buf).unwrap();
            assert!(n > 0, "closed after {got} of {total} bytes");
            for (i, byte) in buf[..n].iter().enumerate() {
                let at = (got + i) % expected.len();
                assert_eq!(*byte, expected[at], "reply byte {} differs", got + i);
            }
            got += n;
        }
        read_done.store(true, Ordering::Relaxed);
        got
    });

    let mut samples = 0;
    let mut most = (0, 0, 0);
    while !done.load(Ordering::Relaxed) {
        let Reply::Bulk(Some(list)) = control.call(&["CLIENT", "LIST"]) else {
            panic!("CLIENT LIST is a bulk string");
        };
        let list = String::from_utf8(list).unwrap();
        if let (Some(qbuf), Some(omem), Some(tot)) = (
            client_field(&list, "burst", "qbuf"),
            client_field(&list, "burst", "omem"),
            client_field(&list, "burst", "tot-mem"),
        ) {
            samples += 1;
            most = (most.0.max(qbuf), most.1.max(omem), most.2.max(tot));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    write_thread.join().unwrap();
    let got = read_thread.join().unwrap();
    assert_eq!(got, (VALUE_LEN + 9) * BURST);
    assert!(samples >= 3, "only {samples} samples during the burst");
    let (qbuf, omem, tot) = most;
    // Output: the bound plus the one reply that crosses it. Input: what one receive takes
    // (a ring buffer, or a single-shot receive's buffer) beyond an unparsed request.
    assert!(
        omem <= (OUTPUT_BOUND + VALUE_LEN + 16) as u64,
        "omem {omem}"
    );
    assert!(qbuf <= 256 << 10, "qbuf {qbuf}");
    assert!(tot <= 1 << 20, "tot-mem {tot}");
    // And it is still a working connection.
    assert_eq!(control.call(&["DBSIZE"]), Reply::Int(1));
}

/// The process's anonymous resident memory (`RssAnon`, KiB): the heap and the runtime's
/// buffers, not the code pages a load happens to touch.
fn rss_anon_kib(server: &Server) -> u64 {
    status_field(server, "RssAnon")
        .split_whitespace()
        .next()
        .and_then(|kib| kib.parse().ok())
        .expect("RssAnon in /proc/PID/status")
}

fn status_field(server: &Server, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    own_status_field(&status, field)
}

fn own_status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/PID/status (Linux 5.0 or later has it)"))
        .trim()
        .to_owned()
}

/// Loads 200,000 keys through a pipeline, then FLUSHALL: `used_memory` (the allocator's
/// count) goes back to within a megabyte of the empty server's, and the anonymous RSS gives
/// back at least three quarters of what the load took. (Not all of it: a client this fast
/// leaves some of the allocator's pages holding a few live objects each, 2 to 7 MB here in a
/// debug build; `examples/kv/bench/memory.sh`'s `redis-cli --pipe` load ends within 10 % of
/// the empty server's RSS, see BENCHMARKS.md.)
#[test]
fn flushall_gives_the_memory_back() {
    let server = Server::start(&["--shards", "1"]);
    let mut conn = server.connect();
    let baseline = info_field(&mut conn, "memory", "used_memory");
    let rss_before = rss_anon_kib(&server);

    const KEYS: usize = 200_000;
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = stream;
    let write_thread = std::thread::spawn(move || {
        let value = "x".repeat(100);
        let mut batch = Vec::new();
        for i in 0..KEYS {
            batch.extend_from_slice(&request(&["SET", &format!("key:{i:012}"), &value]));
            if batch.len() > 256 << 10 {
                writer.write_all(&batch).unwrap();
                batch.clear();
            }
        }
        writer.write_all(&batch).unwrap();
    });
    let mut replies = vec![0u8; KEYS * 5];
    reader.read_exact(&mut replies).unwrap();
    write_thread.join().unwrap();
    assert!(replies.chunks(5).all(|reply| reply == b"+OK\r\n"));

    let loaded = info_field(&mut conn, "memory", "used_memory");
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(KEYS as i64));
    // At least the values' bytes: the count sees the data.
    assert!(
        loaded > baseline + (KEYS * 100) as u64,
        "used_memory {loaded}, empty {baseline}"
    );
    let rss_loaded = rss_anon_kib(&server);

    assert_eq!(conn.call(&["FLUSHALL"]), Reply::ok());
    let flushed = info_field(&mut conn, "memory", "used_memory");
    assert!(
        flushed < baseline + (1 << 20),
        "used_memory {flushed} after FLUSHALL, {baseline} empty, {loaded} loaded"
    );
    // The pages go back too (at once, or at the shard's next purge a second later).
    let mut rss = rss_loaded;
    let bound = rss_before + (rss_loaded - rss_before) / 4;
    let returned = eventually(Duration::from_secs(10), || {
        rss = rss_anon_kib(&server);
        rss <= bound
    });
    assert!(
        returned,
        "anonymous RSS {rss} KiB after FLUSHALL (bound {bound}): {rss_before} empty, \
         {rss_loaded} loaded"
    );
}

/// `disable-thp yes`, Redis's default: the server runs without transparent huge pages
/// (`THP_enabled: 0`), so its heap is in 4 KiB pages; `--disable-thp no` leaves the
/// process as it was started (as this test runs).
#[test]
fn transparent_huge_pages_are_off_unless_asked_for() {
    let server = Server::start(&["--shards", "1"]);
    assert_eq!(status_field(&server, "THP_enabled"), "0");
    let mine = std::fs::read_to_string("/proc/self/status").unwrap();
    let server = Server::start(&["--shards", "1", "--disable-thp", "no"]);
    assert_eq!(
        status_field(&server, "THP_enabled"),
        own_status_field(&mine, "THP_enabled")
    );
}

/// As Redis's lazy free decides (`lazyfree.c`): UNLINK of a value costing more than 64
/// allocations (here a stream of 200 nodes) frees it after the reply, counted once in
/// `lazyfreed_objects` when done; a small one (one node, a destroyed group) is freed at once
/// and not counted. CONFIG RESETSTAT starts the count again. Four shards: the count is the
/// server's.
#[test]
fn unlink_frees_large_values_lazily_as_redis_counts_them() {
    let server = Server::start(&["--shards", "4"]);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["CONFIG", "RESETSTAT"]), Reply::ok());
    assert_eq!(
        conn.call(&["CONFIG", "SET", "stream-node-max-entries", "5"]),
        Reply::ok()
    );
    for i in 0..1000 {
        let field = if i % 10 == 0 { "bar" } else { "foo" };
        let reply = conn.call(&["XADD", "stream", "*", field, &i.to_string()]);
        assert!(matches!(reply, Reply::Bulk(Some(_))), "{reply:?}");
    }
    assert_eq!(
        conn.call(&["XGROUP", "CREATE", "stream", "mygroup", "0"]),
        Reply::ok()
    );
    conn.call(&[
        "XREADGROUP",
        "GROUP",
        "mygroup",
        "Alice",
        "COUNT",
        "2",
        "STREAMS",
        "stream",
        ">",
    ]);
    assert_eq!(conn.call(&["UNLINK", "stream"]), Reply::Int(1));
    let freed = eventually(Duration::from_secs(5), || {
        info_field(&mut conn, "memory", "lazyfree_pending_objects") == 0
    });
    assert!(freed, "the stream is still waiting to be freed");
    assert_eq!(info_field(&mut conn, "memory", "lazyfreed_objects"), 1);

    assert_eq!(conn.call(&["CONFIG", "RESETSTAT"]), Reply::ok());
    assert_eq!(info_field(&mut conn, "memory", "lazyfreed_objects"), 0);
    assert!(matches!(
        conn.call(&["XADD", "s", "*", "a", "b"]),
        Reply::Bulk(Some(_))
    ));
    assert_eq!(
        conn.call(&["XGROUP", "CREATE", "s", "bla", "$"]),
        Reply::ok()
    );
    assert_eq!(conn.call(&["XGROUP", "DESTROY", "s", "bla"]), Reply::Int(1));
    assert_eq!(conn.call(&["UNLINK", "s"]), Reply::Int(1));
    assert_eq!(
        info_field(&mut conn, "memory", "lazyfree_pending_objects"),
        0
    );
    assert_eq!(info_field(&mut conn, "memory", "lazyfreed_objects"), 0);
}
