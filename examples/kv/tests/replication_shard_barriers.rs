//! Writes over several shards (MULTI/EXEC, a script, LMOVE and SMOVE) reach a corewire
//! replica on shard links whole: each involved shard's stream holds at the write's barrier
//! until every part arrived, and every link starts from one cut of the master, so a reader
//! on the replica never sees part of one. Checked while the writes run continuously:
//! through the initial full sync (the writer starts before REPLICAOF), a cut link's partial
//! resync, and a link that cannot resume (its shard's backlog overrun), which re-cuts
//! every link of the replica.

mod common;
mod rdb_util;
mod repl_util;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, Reply, Resp, Server};
use corewire_kv::routing::shard_of;
use repl_util::{assert_converges, info, info_field, ok, wait_link_up};

const A: &str = "{bar-a}n";
const B: &str = "{bar-b}n";
const C: &str = "{bar-a}s";
const D: &str = "{bar-b}s";
const L1: &str = "{bar-a}l";
const L2: &str = "{bar-b}l";
const S1: &str = "{bar-a}set";
const S2: &str = "{bar-b}set";
const ITEMS: usize = 8;

fn stat(conn: &mut Resp, field: &str) -> i64 {
    info_field(conn, "stats", field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in:\n{}", info(conn, "stats")))
}

/// The pairs start equal, the lists and sets hold their items on the first key.
fn set_up(master: &mut Resp) {
    assert_ne!(shard_of(A.as_bytes(), 4), shard_of(B.as_bytes(), 4));
    let items: Vec<String> = (0..ITEMS).map(|i| i.to_string()).collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    ok(master, &["MULTI"]);
    for key in [A, B, C, D] {
        ok(master, &["SET", key, "0"]);
    }
    ok(master, &[&["RPUSH", L1][..], &items].concat());
    ok(master, &[&["SADD", S1][..], &items].concat());
    let Reply::Array(Some(_)) = master.call(&["EXEC"]) else {
        panic!("EXEC");
    };
}

/// Writes over two shards until `stop`: the count of rounds.
fn writer(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut conn = Resp::connect(port);
        let mut in_first = [true; ITEMS];
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            ok(&mut conn, &["MULTI"]);
            ok(&mut conn, &["INCR", A]);
            ok(&mut conn, &["INCR", B]);
            let exec = conn.call(&["EXEC"]);
            assert_eq!(
                exec,
                Reply::Array(Some(vec![Reply::Int(n as i64), Reply::Int(n as i64)]))
            );
            let script = "redis.call('SET', KEYS[1], ARGV[1]) \
                          redis.call('SET', KEYS[2], ARGV[1]) return 1";
            let v = n.to_string();
            assert_eq!(conn.call(&["EVAL", script, "2", C, D, &v]), Reply::Int(1));
            let (from, to) = if n.is_multiple_of(2) {
                (L1, L2)
            } else {
                (L2, L1)
            };
            conn.call(&["LMOVE", from, to, "RIGHT", "LEFT"]);
            let item = (n as usize) % ITEMS;
            let (from, to) = if in_first[item] { (S1, S2) } else { (S2, S1) };
            assert_eq!(
                conn.call(&["SMOVE", from, to, &item.to_string()]),
                Reply::Int(1)
            );
            in_first[item] = !in_first[item];
        }
        n
    })
}

/// What one read on the replica found.
enum Read {
    /// The replica refused (loading, or the link down): nothing to check.
    Refused,
    /// Whole writes only; whether the counters moved past `after`.
    Whole(i64),
}

/// Reads every pair in one MULTI/EXEC on the replica and checks none is half written.
fn read(replica: &mut Resp) -> Read {
    let calls: [&[&str]; 9] = [
        &["MULTI"],
        &["GET", A],
        &["GET", B],
        &["GET", C],
        &["GET", D],
        &["LLEN", L1],
        &["LLEN", L2],
        &["SCARD", S1],
        &["SCARD", S2],
    ];
    for args in calls {
        if let Reply::Error(_) = replica.call(args) {
            // Inside a refused MULTI: close it.
            let _ = replica.call(&["DISCARD"]);
            return Read::Refused;
        }
    }
    let values = match replica.call(&["EXEC"]) {
        Reply::Array(Some(values)) => values,
        _ => return Read::Refused,
    };
    let number = |reply: &Reply| match reply {
        Reply::Bulk(Some(v)) => String::from_utf8_lossy(v).parse::<i64>().unwrap(),
        Reply::Bulk(None) => 0,
        Reply::Int(n) => *n,
        Reply::Error(e) if e.starts_with("LOADING") => -1,
        other => panic!("{other:?}"),
    };
    let n: Vec<i64> = values.iter().map(number).collect();
    if n.contains(&-1) {
        return Read::Refused;
    }
    // A replica with nothing yet (before its first sync) has none of the keys.
    if n.iter().all(|&v| v == 0) {
        return Read::Refused;
    }
    assert_eq!(n[0], n[1], "half a MULTI/EXEC: {values:?}");
    assert_eq!(n[2], n[3], "half a script: {values:?}");
    assert_eq!(n[4] + n[5], ITEMS as i64, "half an LMOVE: {values:?}");
    assert_eq!(n[6] + n[7], ITEMS as i64, "half an SMOVE: {values:?}");
    Read::Whole(n[0])
}

/// Reads until `done` (checked between reads) and at least `reads` whole reads saw the
/// counters move; the number of whole reads.
fn poll(replica: &mut Resp, reads: usize, mut done: impl FnMut() -> bool) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut whole, mut last, mut moved) = (0, -1, 0);
    loop {
        if let Read::Whole(n) = read(replica) {
            whole += 1;
            if n != last {
                moved += 1;
                last = n;
            }
        }
        if moved >= reads && done() {
            return whole;
        }
        assert!(
            Instant::now() < deadline,
            "{whole} whole reads, {moved} moves:\n{}",
            info(replica, "replication")
        );
    }
}

/// The master's replica connections (flag S) by id.
fn link_ids(master: &mut Resp) -> Vec<String> {
    let Reply::Bulk(Some(list)) = master.call(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST");
    };
    let list = String::from_utf8(list).unwrap();
    (list.lines())
        .filter(|line| line.contains(" flags=S "))
        .filter_map(|line| Some(line.strip_prefix("id=")?.split(' ').next()?.to_owned()))
        .collect()
}

#[test]
fn writes_over_shards_are_never_seen_half_on_shard_links() {
    let m = Server::start(&["--shards", "4"]);
    let mut master = m.connect();
    set_up(&mut master);
    let stop = Arc::new(AtomicBool::new(false));
    let writing = writer(m.port, stop.clone());
    // 1. The initial full sync, with the writes running.
    let r = Server::start(&["--shards", "4"]);
    let mut replica = r.connect();
    let mut checker = r.connect();
    ok(
        &mut replica,
        &["REPLICAOF", "127.0.0.1", &m.port.to_string()],
    );
    let synced = poll(&mut replica, 50, || {
        info_field(&mut checker, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_eq!(
        info_field(&mut checker, "replication", "slave_shard_links").as_deref(),
        Some("4"),
        "not on shard links"
    );
    assert_eq!(stat(&mut master, "sync_full"), 4);
    // 2. One link cut: it resumes partially (each shard's backlog holds far more than the
    // writer streams while the link reconnects).
    ok(&mut master, &["CONFIG", "SET", "repl-backlog-size", "64mb"]);
    std::thread::sleep(Duration::from_millis(300));
    let ids = link_ids(&mut master);
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert_eq!(
        master.call(&["CLIENT", "KILL", "ID", &ids[1]]),
        Reply::Int(1)
    );
    let resumed = poll(&mut replica, 50, || {
        stat(&mut master, "sync_partial_ok") >= 1 && link_ids(&mut master).len() == 4
    });
    assert_eq!(
        stat(&mut master, "sync_full"),
        4,
        "a cut link synced in full"
    );
    // 3. One link cut past its shard's backlog: every link syncs in full again, from one
    // cut.
    ok(&mut master, &["CONFIG", "SET", "repl-backlog-size", "16kb"]);
    let ids = link_ids(&mut master);
    assert_eq!(
        master.call(&["CLIENT", "KILL", "ID", &ids[2]]),
        Reply::Int(1)
    );
    // Past every shard's backlog (whichever shard the cut link is), while it is down.
    let value = "x".repeat(256 << 10);
    for shard in 0..4 {
        let key = (0..)
            .map(|n| format!("filler:{n}"))
            .find(|k| shard_of(k.as_bytes(), 4) == shard)
            .unwrap();
        ok(&mut master, &["SET", &key, &value]);
    }
    let recut = poll(&mut replica, 50, || stat(&mut master, "sync_full") >= 8);
    stop.store(true, Ordering::Relaxed);
    let written = writing.join().unwrap();
    assert!(written > 0);
    assert!(synced > 0 && resumed > 0 && recut > 0);
    wait_link_up(&mut replica);
    let settled = eventually(Duration::from_secs(20), || {
        info_field(&mut master, "replication", "connected_slaves").is_some()
    });
    assert!(settled);
    assert_converges(&mut master, &mut replica);
}
