//! Replica chains (Redis's PSYNC2 sub-replicas): a corewire-kv node B that replicates a
//! master A serves replicas C of its own with A's stream, byte for byte and with A's
//! replication id and offsets. redis-server -> corewire-kv -> redis-server and
//! corewire-kv -> corewire-kv (2 or 4 shards) -> corewire-kv: C's full sync from B while
//! A is written (the snapshot and the stream agree), the stream reaching the chain's end,
//! C's link to B cut and restored (a partial resync), B promoted (C continues partially
//! with B's new id), B resynchronizing fully from another master (C follows it fully), and
//! a sub-replica that stops reading (dropped at its output limit). Contents are compared
//! type-aware (`rdb_util::contents`).

mod common;
mod rdb_util;
mod repl_util;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, request, Reply, Resp, Server, TempDir};
use rdb_util::{workload, Redis};
use repl_util::{assert_converges, info, info_field, ok, wait_link_up, write_stream};

fn stat(conn: &mut Resp, field: &str) -> i64 {
    info_field(conn, "stats", field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO stats"))
}

fn replication(conn: &mut Resp, field: &str) -> String {
    info_field(conn, "replication", field)
        .unwrap_or_else(|| panic!("no {field} in:\n{}", info(conn, "replication")))
}

/// Waits until `conn` reports `count` replicas online.
fn wait_replicas(conn: &mut Resp, count: usize) {
    let online = eventually(Duration::from_secs(30), || {
        replication(conn, "connected_slaves") == count.to_string()
            && (0..count).all(|i| {
                info_field(conn, "replication", &format!("slave{i}"))
                    .is_some_and(|line| line.contains("state=online"))
            })
    });
    assert!(online, "{}", info(conn, "replication"));
}

/// Waits until `replica`'s applied offset reaches its master's (the stream passed fully).
fn wait_caught_up(master: &mut Resp, replica: &mut Resp) {
    let caught = eventually(Duration::from_secs(30), || {
        let want = replication(master, "master_repl_offset");
        replication(replica, "master_repl_offset") == want
    });
    assert!(
        caught,
        "master:\n{}\nreplica:\n{}",
        info(master, "replication"),
        info(replica, "replication")
    );
}

/// INCRs on A from another connection until stopped: a full sync of C while A's stream
/// runs through B must neither lose nor double any.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Writer {
    fn start(port: u16) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut conn = Resp::connect(port);
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                ok(&mut conn, &["INCR", &format!("busy:{}", n % 16)]);
                ok(&mut conn, &["RPUSH", "busy:list", &n.to_string()]);
                n += 1;
            }
            n
        });
        Writer {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let written = self.thread.take().unwrap().join().unwrap();
        assert!(written > 0, "the writer wrote nothing");
        written
    }
}

/// A (redis-server) -> B (corewire-kv, `shards`) -> C (redis-server).
/// B drops C's link (C is B's only replica, and has full-synced once): A's next writes reach
/// C through a partial resync from B's backlog.
fn cut_c_and_resume_partially(
    a_conn: &mut Resp,
    b_conn: &mut Resp,
    c_conn: &mut Resp,
    round: usize,
) {
    assert_eq!(
        b_conn.call(&["CLIENT", "KILL", "TYPE", "replica"]),
        Reply::Int(1)
    );
    write_stream(a_conn, round);
    wait_replicas(b_conn, 1);
    assert_converges(a_conn, c_conn);
    assert_eq!(stat(b_conn, "sync_full"), 1, "{}", info(b_conn, "stats"));
    assert_eq!(stat(b_conn, "sync_partial_ok"), 1);
}

#[test]
fn redis_to_corewire_to_redis() {
    let dir_a = TempDir::new("chain-a");
    let a = Redis::start(dir_a.path(), &[]);
    let mut a_conn = a.connect();
    workload(&mut a_conn);
    let b = Server::start(&["--shards", "4"]);
    let mut b_conn = b.connect();
    ok(
        &mut b_conn,
        &["REPLICAOF", "127.0.0.1", &a.port.to_string()],
    );
    wait_link_up(&mut b_conn);
    assert_converges(&mut a_conn, &mut b_conn);

    // C's full sync from B while A is being written.
    let writer = Writer::start(a.port);
    let dir_c = TempDir::new("chain-c");
    let c = Redis::start(
        dir_c.path(),
        &["--replicaof", "127.0.0.1", &b.port.to_string()],
    );
    let mut c_conn = c.connect();
    wait_link_up(&mut c_conn);
    std::thread::sleep(Duration::from_millis(200));
    writer.stop();
    wait_replicas(&mut b_conn, 1);
    assert_converges(&mut a_conn, &mut c_conn);
    assert_eq!(stat(&mut b_conn, "sync_full"), 1);

    // B shows both its link and its replica; the ids and offsets are A's.
    assert_eq!(replication(&mut b_conn, "role"), "slave");
    assert_eq!(replication(&mut b_conn, "master_link_status"), "up");
    assert_eq!(
        replication(&mut b_conn, "master_replid"),
        replication(&mut a_conn, "master_replid")
    );
    assert_eq!(
        replication(&mut c_conn, "master_replid"),
        replication(&mut a_conn, "master_replid")
    );
    let Reply::Array(Some(role)) = b_conn.call(&["ROLE"]) else {
        panic!("ROLE");
    };
    assert_eq!(role[0], Reply::bulk("slave"));
    assert_eq!(role[3], Reply::bulk("connected"));

    // The stream reaches the chain's end, with A's offsets.
    for round in 0..3 {
        write_stream(&mut a_conn, round);
    }
    assert_converges(&mut a_conn, &mut c_conn);
    wait_caught_up(&mut a_conn, &mut b_conn);
    wait_caught_up(&mut a_conn, &mut c_conn);

    // C's link to B cut: C continues from B's backlog.
    cut_c_and_resume_partially(&mut a_conn, &mut b_conn, &mut c_conn, 3);

    // B promoted: C continues partially with B's new history.
    wait_caught_up(&mut a_conn, &mut b_conn);
    let old_id = replication(&mut b_conn, "master_replid");
    ok(&mut b_conn, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(replication(&mut b_conn, "role"), "master");
    assert_eq!(replication(&mut b_conn, "master_replid2"), old_id);
    write_stream(&mut b_conn, 4);
    wait_replicas(&mut b_conn, 1);
    assert_converges(&mut b_conn, &mut c_conn);
    assert_eq!(
        stat(&mut b_conn, "sync_full"),
        1,
        "{}",
        info(&mut b_conn, "stats")
    );
    assert_eq!(stat(&mut b_conn, "sync_partial_ok"), 2);
    assert_eq!(
        replication(&mut c_conn, "master_replid"),
        replication(&mut b_conn, "master_replid")
    );
    wait_caught_up(&mut b_conn, &mut c_conn);
}

/// A (corewire-kv, 4 shards) -> B (corewire-kv, `b_shards`) -> C (corewire-kv, 2 shards).
fn corewire_chain(b_shards: &str) {
    let a = Server::start(&["--shards", "4"]);
    let mut a_conn = a.connect();
    workload(&mut a_conn);
    // The chain as such: B on the single stream from the start (with A's shard count it
    // would take shard links, and go back to the single stream once C asks).
    let b = Server::start(&["--shards", b_shards, "--repl-shard-links", "no"]);
    let mut b_conn = b.connect();
    ok(
        &mut b_conn,
        &["REPLICAOF", "127.0.0.1", &a.port.to_string()],
    );
    wait_link_up(&mut b_conn);
    assert_converges(&mut a_conn, &mut b_conn);

    let writer = Writer::start(a.port);
    // C too: once B is promoted, C would take shard links from it (a full sync) rather
    // than continue the single stream.
    let c = Server::start(&["--shards", "2", "--repl-shard-links", "no"]);
    let mut c_conn = c.connect();
    ok(
        &mut c_conn,
        &["REPLICAOF", "127.0.0.1", &b.port.to_string()],
    );
    wait_link_up(&mut c_conn);
    std::thread::sleep(Duration::from_millis(200));
    writer.stop();
    wait_replicas(&mut b_conn, 1);
    assert_converges(&mut a_conn, &mut c_conn);
    assert_eq!(stat(&mut b_conn, "sync_full"), 1);
    assert_eq!(
        replication(&mut c_conn, "master_replid"),
        replication(&mut a_conn, "master_replid")
    );
    // A replica serves no WAIT.
    let Reply::Error(refused) = b_conn.call(&["WAIT", "1", "0"]) else {
        panic!("WAIT on a replica");
    };
    assert!(refused.starts_with("ERR WAIT cannot be used with replica instances"));

    for round in 0..2 {
        write_stream(&mut a_conn, round);
    }
    assert_converges(&mut a_conn, &mut c_conn);
    wait_caught_up(&mut a_conn, &mut c_conn);

    // C's link cut and restored: partial.
    cut_c_and_resume_partially(&mut a_conn, &mut b_conn, &mut c_conn, 2);

    // B's own link cut: B continues partially from A, C is not disturbed.
    assert_eq!(
        a_conn.call(&["CLIENT", "KILL", "TYPE", "replica"]),
        Reply::Int(1)
    );
    write_stream(&mut a_conn, 3);
    wait_link_up(&mut b_conn);
    assert_converges(&mut a_conn, &mut c_conn);
    assert_eq!(stat(&mut a_conn, "sync_full"), 1);
    assert_eq!(stat(&mut b_conn, "sync_full"), 1);
    wait_caught_up(&mut a_conn, &mut c_conn);

    // B promoted: C continues partially with B's new id.
    ok(&mut b_conn, &["REPLICAOF", "NO", "ONE"]);
    write_stream(&mut b_conn, 4);
    wait_replicas(&mut b_conn, 1);
    assert_converges(&mut b_conn, &mut c_conn);
    assert_eq!(
        stat(&mut b_conn, "sync_full"),
        1,
        "{}",
        info(&mut b_conn, "stats")
    );
    assert_eq!(stat(&mut b_conn, "sync_partial_ok"), 2);
    wait_caught_up(&mut b_conn, &mut c_conn);

    // B follows another master (another history): it resynchronizes fully, and C with it.
    let other = Server::start(&["--shards", "1"]);
    let mut other_conn = other.connect();
    ok(&mut other_conn, &["SET", "other", "history"]);
    write_stream(&mut other_conn, 9);
    ok(
        &mut b_conn,
        &["REPLICAOF", "127.0.0.1", &other.port.to_string()],
    );
    wait_link_up(&mut b_conn);
    assert_converges(&mut other_conn, &mut b_conn);
    // C loads B's new snapshot (answering LOADING meanwhile), then follows it.
    let other_id = replication(&mut other_conn, "master_replid");
    let resynced = eventually(Duration::from_secs(30), || {
        replication(&mut c_conn, "master_replid") == other_id
            && replication(&mut c_conn, "master_link_status") == "up"
    });
    assert!(resynced, "{}", info(&mut c_conn, "replication"));
    assert_converges(&mut other_conn, &mut c_conn);
    wait_replicas(&mut b_conn, 1);
    assert_eq!(
        stat(&mut b_conn, "sync_full"),
        2,
        "{}",
        info(&mut b_conn, "stats")
    );
    assert_eq!(
        replication(&mut c_conn, "master_replid"),
        replication(&mut other_conn, "master_replid")
    );
}

#[test]
fn corewire_chain_two_shards_in_the_middle() {
    corewire_chain("2");
}

#[test]
fn corewire_chain_four_shards_in_the_middle() {
    corewire_chain("4");
}

/// A sub-replica that never reads is dropped at B's `client-output-buffer-limit replica`.
#[test]
fn a_stalled_sub_replica_is_dropped() {
    let a = Server::start(&["--shards", "2"]);
    let mut a_conn = a.connect();
    // On the single stream: a node on shard links answers a sub-replica -NOMASTERLINK
    // until its single stream is up, and this one never asks again.
    let b = Server::start(&["--shards", "2", "--repl-shard-links", "no"]);
    let mut b_conn = b.connect();
    ok(
        &mut b_conn,
        &["REPLICAOF", "127.0.0.1", &a.port.to_string()],
    );
    wait_link_up(&mut b_conn);
    ok(
        &mut b_conn,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 4mb 0 0",
        ],
    );
    let mut stalled = std::net::TcpStream::connect(("127.0.0.1", b.port)).unwrap();
    use std::io::Write;
    stalled
        .write_all(&request(&["REPLCONF", "capa", "eof", "capa", "psync2"]))
        .unwrap();
    stalled.write_all(&request(&["PSYNC", "?", "-1"])).unwrap();
    let linked = eventually(Duration::from_secs(10), || {
        replication(&mut b_conn, "connected_slaves") == "1"
    });
    assert!(linked, "{}", info(&mut b_conn, "replication"));
    let value = "x".repeat(1 << 20);
    let dropped = eventually(Duration::from_secs(60), || {
        ok(&mut a_conn, &["SET", "big", &value]);
        replication(&mut b_conn, "connected_slaves") == "0"
    });
    assert!(dropped, "{}", info(&mut b_conn, "replication"));
    // B's own link carries on.
    ok(&mut a_conn, &["SET", "after", "1"]);
    assert!(eventually(Duration::from_secs(10), || {
        b_conn.call(&["GET", "after"]) == Reply::bulk("1")
    }));
}

/// A replica whose own link is down refuses a sub-replica's sync (Redis's wording).
#[test]
fn no_sync_without_a_master_link() {
    let b = Server::start(&["--shards", "1"]);
    let mut b_conn = b.connect();
    // Nothing listens there.
    let port = rdb_util::free_port().to_string();
    ok(&mut b_conn, &["REPLICAOF", "127.0.0.1", &port]);
    let mut sub = b.connect();
    sub.send(&request(&["PSYNC", "?", "-1"])).unwrap();
    assert_eq!(
        sub.read().unwrap(),
        Reply::Error("NOMASTERLINK Can't SYNC while not connected with my master".into())
    );
}
