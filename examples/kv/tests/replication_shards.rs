//! corewire-kv replicating corewire-kv with several shards on both sides: the per-shard
//! streams' negotiation (`repl::shards`) and what every outcome of it must keep. Two
//! corewire nodes with the same shards replicate over shard links: a 4-shard replica of a
//! 4-shard master with keys of every type and a write stream, cut links resumed partially,
//! WAIT 1 after writes on every shard, and a transaction, a script and LMOVE over two
//! shards seen whole on the replica (barriers: `repl::barrier`). A redis-server replica
//! and a replica with another shard count keep the single stream, where the master joins
//! a transaction's parts into one MULTI/EXEC (`server/repl_master/group.rs`).
//!
//! The master's side of per-shard links (`server/repl_master/shard_link.rs`) is driven by
//! hand too ([`shard_link_util`]): each shard's own full sync (all of a replica's links
//! from one cut) and stream, a cut link resumed from its shard's backlog, one past it
//! re-cutting every link, and a link that stops reading dropped. A corewire replica
//! follows over its own shard links (`server/replica/shard_links.rs`, [`linked`]):
//! content equal, one cut link resumed partially alone, WAIT, FLUSHALL per shard, a
//! promotion keeping what WAIT acknowledged, a sub-replica turning the links back into
//! the single stream, a shard-count mismatch.

mod common;
mod rdb_util;
mod repl_util;
mod shard_link_util;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, Reply, Resp, Server, TempDir};
use corewire_kv::repl::shards::KEY_MAP;
use corewire_kv::routing::shard_of;
use rdb_util::{workload, Redis};
use repl_util::{assert_converges, info, info_field, ok, wait_link_up, write_stream};

fn offer(conn: &mut Resp, shards: &str, key_map: &str) -> Reply {
    conn.call(&["REPLCONF", "shard-streams", shards, "key-map", key_map])
}

fn single(why: &str) -> Reply {
    Reply::Simple(format!("SINGLE-STREAM {why}"))
}

fn stat(conn: &mut Resp, field: &str) -> i64 {
    info_field(conn, "stats", field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in:\n{}", info(conn, "stats")))
}

fn int(conn: &mut Resp, args: &[&str]) -> i64 {
    match conn.call(args) {
        Reply::Int(n) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// A 4-shard replica of a 4-shard master, synced.
fn four_by_four() -> (Server, Resp, Server, Resp) {
    let master_server = Server::start(&["--shards", "4"]);
    let mut master = master_server.connect();
    workload(&mut master);
    let replica_server = Server::start(&["--shards", "4"]);
    let mut replica = replica_server.connect();
    ok(
        &mut replica,
        &["REPLICAOF", "127.0.0.1", &master_server.port.to_string()],
    );
    wait_link_up(&mut replica);
    assert_converges(&mut master, &mut replica);
    (master_server, master, replica_server, replica)
}

/// What each master answers an offer, and why: only the same shard count and key map get
/// per-shard streams; redis-server refuses the option (the replica then keeps the single
/// stream).
#[test]
fn the_master_answers_an_offer_of_per_shard_streams() {
    let four = Server::start(&["--shards", "4"]);
    let mut conn = four.connect();
    assert_eq!(
        offer(&mut conn, "4", KEY_MAP),
        Reply::Simple("SHARD-STREAMS 4".into())
    );
    assert_eq!(
        offer(&mut conn, "2", KEY_MAP),
        single("shard-count 4 (offered 2)")
    );
    assert_eq!(offer(&mut conn, "4", "jump-hash"), single("key-map"));
    let one = Server::start(&["--shards", "1"]);
    assert_eq!(offer(&mut one.connect(), "4", KEY_MAP), single("one-shard"));
    // A node that follows a master passes its master's single stream on.
    let follower = Server::start(&["--shards", "4"]);
    let mut follower_conn = follower.connect();
    ok(
        &mut follower_conn,
        &["REPLICAOF", "127.0.0.1", &four.port.to_string()],
    );
    assert_eq!(
        offer(&mut follower_conn, "4", KEY_MAP),
        single("follows-a-master")
    );
    let dir = TempDir::new("shard-streams");
    let redis = Redis::start(dir.path(), &[]);
    match offer(&mut redis.connect(), "4", KEY_MAP) {
        Reply::Error(e) => assert!(e.contains("Unrecognized REPLCONF option"), "{e}"),
        other => panic!("redis-server accepted the offer: {other:?}"),
    }
}

/// Keys of every type, a write stream, WAIT 1 after writes on every shard, and cut links
/// resumed partially (no second full sync).
#[test]
fn four_shards_replicate_four_shards() {
    let (_m, mut master, _r, mut replica) = four_by_four();
    for round in 0..2 {
        write_stream(&mut master, round);
    }
    assert_converges(&mut master, &mut replica);
    // One key on each shard, then WAIT: the replica counts once it has all of them.
    let keys: Vec<String> = (0..4)
        .map(|shard| {
            (0..)
                .map(|n| format!("wait:{n}"))
                .find(|key| shard_of(key.as_bytes(), 4) == shard)
                .unwrap()
        })
        .collect();
    for key in &keys {
        ok(&mut master, &["SET", key, "acknowledged"]);
    }
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    for key in &keys {
        assert_eq!(replica.call(&["GET", key]), Reply::bulk("acknowledged"));
    }
    // One connection per shard link.
    assert_eq!(int(&mut master, &["CLIENT", "KILL", "TYPE", "replica"]), 4);
    write_stream(&mut master, 2);
    wait_link_up(&mut replica);
    assert_converges(&mut master, &mut replica);
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    assert_eq!(stat(&mut master, "sync_full"), 4);
    let resumed = eventually(Duration::from_secs(10), || {
        stat(&mut master, "sync_partial_ok") == 4
    });
    assert!(resumed, "{}", info(&mut master, "stats"));
}
/// A MULTI/EXEC over two shards of the master is seen whole on a 4-shard corewire replica:
/// a reader's own transaction there never finds one key written and the other not.
#[test]
fn a_transaction_over_two_shards_is_atomic_on_the_replica() {
    let (m, mut master, _r, mut replica) = four_by_four();
    transactions_are_seen_whole(m.port, &mut master, &mut replica);
}

/// A multi-key command (LMOVE) and a script over two shards are seen whole on the replica
/// too (they hold the shards and write in steps: the steps reach replicas as one
/// MULTI/EXEC).
#[test]
fn multikey_commands_and_scripts_over_two_shards_are_atomic_on_the_replica() {
    let (m, mut master, _r, mut replica) = four_by_four();
    programs_are_seen_whole(m.port, &mut master, &mut replica);
}

/// The same with a redis-server replica of the 4-shard master.
#[test]
fn a_transaction_over_two_shards_is_atomic_on_a_redis_replica() {
    let m = Server::start(&["--shards", "4"]);
    let mut master = m.connect();
    let dir = TempDir::new("shard-streams-redis");
    let redis = Redis::start(
        dir.path(),
        &["--replicaof", "127.0.0.1", &m.port.to_string()],
    );
    let mut replica = redis.connect();
    wait_link_up(&mut replica);
    transactions_are_seen_whole(m.port, &mut master, &mut replica);
}

/// INCRs two keys on different shards in MULTI/EXEC on the master (from a thread) while
/// reading both in MULTI/EXEC on the replica: the two values are always equal.
fn transactions_are_seen_whole(port: u16, master: &mut Resp, replica: &mut Resp) {
    let (a, b) = ("{tx-a}n", "{tx-b}n");
    assert_ne!(shard_of(a.as_bytes(), 4), shard_of(b.as_bytes(), 4));
    ok(master, &["MULTI"]);
    ok(master, &["SET", a, "0"]);
    ok(master, &["SET", b, "0"]);
    ok(master, &["EXEC"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut conn = Resp::connect(port);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                ok(&mut conn, &["MULTI"]);
                ok(&mut conn, &["INCR", a]);
                ok(&mut conn, &["INCR", b]);
                let exec = conn.call(&["EXEC"]);
                assert_eq!(
                    exec,
                    Reply::Array(Some(vec![Reply::Int(n as i64), Reply::Int(n as i64)]))
                );
            }
            n
        })
    };
    let mut reads = 0;
    let mut advanced = false;
    let seen = eventually(Duration::from_secs(20), || {
        ok(replica, &["MULTI"]);
        ok(replica, &["GET", a]);
        ok(replica, &["GET", b]);
        let Reply::Array(Some(values)) = replica.call(&["EXEC"]) else {
            panic!("EXEC on the replica");
        };
        assert_eq!(values[0], values[1], "read {reads}: half a transaction");
        reads += 1;
        advanced |= values[0] != Reply::bulk("0");
        advanced && reads >= 200
    });
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(seen, "{reads} reads, the replica's values never moved");
    assert!(written > 0);
    assert_converges(master, replica);
}

/// Full syncs (of a corewire and of a redis-server replica) while MULTI/EXECs over two
/// shards run: each shard's snapshot begins at its own moment, so a transaction may be half
/// in the snapshot; the stream must bring exactly the other half (nothing lost, nothing
/// applied twice).
#[test]
fn a_full_sync_amid_transactions_over_shards_loses_and_doubles_nothing() {
    let m = Server::start(&["--shards", "4"]);
    let mut master = m.connect();
    workload(&mut master);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, port) = (stop.clone(), m.port);
        std::thread::spawn(move || {
            let mut conn = Resp::connect(port);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                ok(&mut conn, &["MULTI"]);
                ok(&mut conn, &["INCR", "{sync-a}n"]);
                ok(&mut conn, &["RPUSH", "{sync-b}l", &n.to_string()]);
                ok(&mut conn, &["EXEC"]);
            }
            n
        })
    };
    let corewire = Server::start(&["--shards", "4"]);
    let mut corewire_conn = corewire.connect();
    let port = m.port.to_string();
    ok(&mut corewire_conn, &["REPLICAOF", "127.0.0.1", &port]);
    let dir = TempDir::new("shard-streams-sync");
    let redis = Redis::start(dir.path(), &["--replicaof", "127.0.0.1", &port]);
    let mut redis_conn = redis.connect();
    wait_link_up(&mut corewire_conn);
    wait_link_up(&mut redis_conn);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0);
    assert_converges(&mut master, &mut corewire_conn);
    assert_converges(&mut master, &mut redis_conn);
}

/// Multi-key commands over two shards (LMOVE between lists on different shards) and a
/// script writing two keys on different shards, from a thread, while reading them in
/// MULTI/EXEC on the replica: the two keys are always equal and the lists always hold
/// all their items together.
fn programs_are_seen_whole(port: u16, master: &mut Resp, replica: &mut Resp) {
    let (a, b) = ("{prog-a}n", "{prog-b}n");
    let (l1, l2) = ("{prog-a}l", "{prog-b}l");
    assert_ne!(shard_of(a.as_bytes(), 4), shard_of(b.as_bytes(), 4));
    ok(master, &["MULTI"]);
    ok(master, &["SET", a, "0"]);
    ok(master, &["SET", b, "0"]);
    ok(
        master,
        &["RPUSH", l1, "1", "2", "3", "4", "5", "6", "7", "8"],
    );
    ok(master, &["EXEC"]);
    // The lists' eight items are what every read counts: the replica must have them first.
    assert_eq!(int(master, &["WAIT", "1", "10000"]), 1);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut conn = Resp::connect(port);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let v = n.to_string();
                let script = "redis.call('SET', KEYS[1], ARGV[1]) \
                              redis.call('SET', KEYS[2], ARGV[1]) return 1";
                ok(&mut conn, &["EVAL", script, "2", a, b, &v]);
                let (from, to) = if n.is_multiple_of(2) {
                    (l1, l2)
                } else {
                    (l2, l1)
                };
                ok(&mut conn, &["LMOVE", from, to, "RIGHT", "LEFT"]);
            }
            n
        })
    };
    let mut reads = 0;
    let mut advanced = false;
    let seen = eventually(Duration::from_secs(20), || {
        ok(replica, &["MULTI"]);
        for args in [["GET", a], ["GET", b], ["LLEN", l1], ["LLEN", l2]] {
            ok(replica, &args);
        }
        let Reply::Array(Some(values)) = replica.call(&["EXEC"]) else {
            panic!("EXEC on the replica");
        };
        assert_eq!(values[0], values[1], "read {reads}: half a script");
        let (Reply::Int(n1), Reply::Int(n2)) = (&values[2], &values[3]) else {
            panic!("LLEN: {values:?}");
        };
        assert_eq!(n1 + n2, 8, "read {reads}: half an LMOVE");
        reads += 1;
        advanced |= values[0] != Reply::bulk("0");
        advanced && reads >= 200
    });
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(seen, "{reads} reads, the replica's values never moved");
    assert!(written > 0);
    assert_converges(master, replica);
}

/// A link request for a shard the node has is accepted (`+SHARD-LINK`, checked by the
/// links below); one for a shard it lacks is refused.
#[test]
fn a_shard_link_for_a_shard_the_node_lacks_is_refused() {
    let m = Server::start(&["--shards", "4"]);
    let mut conn = m.connect();
    match conn.call(&[
        "REPLCONF",
        "shard-streams",
        "4",
        "key-map",
        KEY_MAP,
        "shard",
        "4",
    ]) {
        Reply::Error(e) => assert!(e.contains("no shard 4"), "{e}"),
        other => panic!("shard 4 of 4: {other:?}"),
    }
}

/// Each master shard's link: a full sync of exactly that shard's keys (keys of every
/// type), then that shard's writes and no other's; together the four links hold the
/// master's every key.
#[test]
fn each_shard_link_syncs_its_part_then_streams_its_writes() {
    use shard_link_util::{key_on, master, Began, Link};
    let (m, mut conn) = master();
    workload(&mut conn);
    let mut all = std::collections::BTreeSet::new();
    let mut links = Vec::new();
    for (shard, (link, began)) in Link::open_all(m.port).into_iter().enumerate() {
        let Began::Full(keys) = began else {
            panic!("PSYNC ? -1 continued");
        };
        for key in &keys {
            assert_eq!(
                shard_of(key, 4),
                shard,
                "{:?}",
                String::from_utf8_lossy(key)
            );
        }
        assert!(!keys.is_empty(), "shard {shard} synced no key");
        all.extend(keys);
        links.push(link);
    }
    let Reply::Array(Some(master_keys)) = conn.call(&["KEYS", "*"]) else {
        panic!("KEYS");
    };
    let master_keys: std::collections::BTreeSet<Vec<u8>> = (master_keys.into_iter())
        .map(|k| match k {
            Reply::Bulk(Some(k)) => k,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(all, master_keys);
    // Every type of write, then 10 SETs per shard: each link has exactly its own.
    write_stream(&mut conn, 0);
    for n in 0..10 {
        for shard in 0..4 {
            ok(&mut conn, &["SET", &key_on(shard, n), "v"]);
        }
    }
    for link in &mut links {
        let sets = link.sets_through(&key_on(link.shard, 9));
        let ours: Vec<Vec<u8>> = (0..10)
            .map(|n| key_on(link.shard, n).into_bytes())
            .collect();
        let tail = &sets[sets.len() - 10..];
        assert_eq!(tail, &ours[..], "shard {}", link.shard);
    }
    // Every key `write_stream` left on the master was written in its shard's stream.
    let Reply::Array(Some(left)) = conn.call(&["KEYS", "w:*"]) else {
        panic!("KEYS");
    };
    assert!(left.len() > 10);
    for key in left {
        let Reply::Bulk(Some(key)) = key else {
            panic!("KEYS: {key:?}");
        };
        let shard = shard_of(&key, 4);
        assert!(
            links[shard].written.contains(&key),
            "{:?} is not in shard {shard}'s stream",
            String::from_utf8_lossy(&key)
        );
    }
}

/// A cut shard link resumes from its own backlog (`+CONTINUE`, the writes it missed, once
/// each) while the other shards' links stream on; an offset outside the backlog gets a
/// full sync of that shard.
#[test]
fn a_cut_shard_link_resumes_partially() {
    use shard_link_util::{key_on, master, Began, Link};
    let (m, mut conn) = master();
    workload(&mut conn);
    let mut links: Vec<Link> = Link::open_all(m.port).into_iter().map(|l| l.0).collect();
    for n in 0..5 {
        for shard in 0..4 {
            ok(&mut conn, &["SET", &key_on(shard, n), "before"]);
        }
    }
    for link in &mut links {
        link.sets_until(5);
    }
    let cut = links.remove(1);
    let (replid, offset) = (cut.replid.clone(), cut.offset);
    drop(cut);
    for n in 5..15 {
        for shard in 0..4 {
            ok(&mut conn, &["SET", &key_on(shard, n), "while cut"]);
        }
    }
    for link in &mut links {
        let sets = link.sets_until(10);
        assert_eq!(sets.len(), 10, "shard {}: only the new writes", link.shard);
    }
    let (mut resumed, began) = Link::open(m.port, 1, &replid, offset as i64 + 1);
    assert!(matches!(began, Began::Continue), "not resumed partially");
    let sets = resumed.sets_until(10);
    let missed: Vec<Vec<u8>> = (5..15).map(|n| key_on(1, n).into_bytes()).collect();
    assert_eq!(sets, missed, "the missed writes, once each, in order");
    ok(&mut conn, &["SET", &key_on(1, 15), "after"]);
    assert_eq!(resumed.sets_until(1), vec![key_on(1, 15).into_bytes()]);
    // Far outside shard 1's backlog: a full sync of shard 1, which re-cuts every link of
    // the replica (the streaming ones are dropped, and sync in full when they come back,
    // even where their shard's backlog could continue them).
    let mut far = Link::start(m.port, 1, &replid, offset as i64 + (1 << 30));
    let mut others = Vec::new();
    for mut link in links {
        assert!(
            link.closed_by_master(),
            "shard {}'s link was kept",
            link.shard
        );
        let (replid, offset) = (link.replid.clone(), link.offset as i64 + 1);
        others.push(Link::start(m.port, link.shard, &replid, offset));
    }
    assert!(matches!(far.began(), Began::Full(_)));
    for link in &mut others {
        assert!(
            matches!(link.began(), Began::Full(_)),
            "shard {}",
            link.shard
        );
    }
}

/// A shard link that stops reading holds at most `client-output-buffer-limit replica`:
/// past it the master drops it (and that shard's link can sync again).
#[test]
fn a_shard_link_that_stops_reading_is_dropped() {
    use shard_link_util::{key_on, master, Began, Link};
    let (m, mut conn) = master();
    ok(
        &mut conn,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 256kb 0 0",
        ],
    );
    let mut links: Vec<Link> = Link::open_all(m.port).into_iter().map(|l| l.0).collect();
    let mut reading = links.pop().unwrap();
    let mut stalled = links.pop().unwrap();
    let value = "x".repeat(64 << 10);
    for n in 0..200 {
        ok(&mut conn, &["SET", &key_on(2, n), &value]);
    }
    assert!(stalled.closed_by_master(), "the stalled link was kept");
    ok(&mut conn, &["SET", &key_on(3, 0), "v"]);
    assert_eq!(reading.sets_until(1), vec![key_on(3, 0).into_bytes()]);
    // Its next link syncs in full, with the replica's other links (re-cut).
    drop((links, reading));
    let mut again: Vec<(Link, Began)> = Link::open_all(m.port);
    let (_, began) = again.remove(2);
    assert!(matches!(began, Began::Full(keys) if keys.len() == 200));
}

/// WAIT counts a replica on shard links once every one of its links acknowledged the offset
/// its shard had when the WAIT arrived; min-replicas-to-write counts it only while it has a
/// link on every shard.
#[test]
fn wait_counts_a_replica_once_every_shard_link_acknowledged() {
    use shard_link_util::{key_on, master, Link};
    let (m, mut conn) = master();
    let mut links: Vec<Link> = Link::open_all(m.port).into_iter().map(|l| l.0).collect();
    for shard in 0..4 {
        ok(&mut conn, &["SET", &key_on(shard, 0), "v"]);
    }
    // Three links acknowledge their shard's write; the fourth reads it, unacknowledged.
    for link in &mut links[..3] {
        link.sets_until(1);
    }
    links[3].sets_unacknowledged(1);
    assert_eq!(int(&mut conn, &["WAIT", "1", "300"]), 0);
    // The master asked every link to acknowledge (GETACK): the replica answers on all.
    conn.send(&common::request(&["WAIT", "1", "10000"]))
        .unwrap();
    for link in &mut links {
        link.catch_up();
    }
    assert_eq!(conn.read().unwrap(), Reply::Int(1));
    // One replica (four links), good while every link is there.
    ok(&mut conn, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    ok(&mut conn, &["SET", &key_on(0, 1), "accepted"]);
    drop(links.remove(2));
    let refused = common::eventually(
        Duration::from_secs(10),
        || matches!(conn.call(&["SET", "x", "y"]), Reply::Error(e) if e.starts_with("NOREPLICAS")),
    );
    assert!(
        refused,
        "a replica missing a shard link still counted as good"
    );
}

/// A replica with `replica_shards` shards of a 4-shard master (over shard links with 4),
/// synced.
fn linked(replica_shards: &str) -> (Server, Resp, Server, Resp) {
    use shard_link_util::master;
    let (m, mut master) = master();
    workload(&mut master);
    let r = Server::start(&["--shards", replica_shards]);
    let mut replica = r.connect();
    ok(
        &mut replica,
        &["REPLICAOF", "127.0.0.1", &m.port.to_string()],
    );
    wait_link_up(&mut replica);
    assert_converges(&mut master, &mut replica);
    (m, master, r, replica)
}

/// The replica's per-shard applied offsets (INFO `slave_shard_repl_offsets`), if on
/// shard links.
fn shard_offsets(replica: &mut Resp) -> Option<Vec<u64>> {
    let field = info_field(replica, "replication", "slave_shard_repl_offsets")?;
    Some(field.split(':').map(|n| n.parse().unwrap()).collect())
}

/// Keys of every type, then a write stream over every shard, reach a 4-shard replica over
/// its four shard links; WAIT 1 counts it once every link has its shard's writes; INFO
/// shows the links up and the node's offset as the sum of theirs.
#[test]
fn a_replica_follows_its_master_over_shard_links() {
    use shard_link_util::key_on;
    let (_m, mut master, _r, mut replica) = linked("4");
    let offsets = shard_offsets(&mut replica).expect("not on shard links");
    assert_eq!(offsets.len(), 4);
    assert_eq!(
        info_field(&mut replica, "replication", "slave_shard_links").as_deref(),
        Some("4")
    );
    assert_eq!(stat(&mut master, "sync_full"), 4);
    for round in 0..2 {
        write_stream(&mut master, round);
    }
    for shard in 0..4 {
        ok(&mut master, &["SET", &key_on(shard, 0), "acknowledged"]);
    }
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    for shard in 0..4 {
        assert_eq!(
            replica.call(&["GET", &key_on(shard, 0)]),
            Reply::bulk("acknowledged")
        );
    }
    assert_converges(&mut master, &mut replica);
    // Every shard streamed something; the node's offset is their sum.
    let settled = eventually(Duration::from_secs(10), || {
        let offsets = shard_offsets(&mut replica).unwrap();
        let total: u64 = info_field(&mut replica, "replication", "slave_repl_offset")
            .unwrap()
            .parse()
            .unwrap();
        let node: u64 = info_field(&mut replica, "replication", "master_repl_offset")
            .unwrap()
            .parse()
            .unwrap();
        offsets.iter().all(|&o| o > 0) && offsets.iter().sum::<u64>() == total && node == total
    });
    assert!(settled, "{}", info(&mut replica, "replication"));
    // The master shows the replica as one line, its offset what its links acknowledged.
    assert_eq!(
        info_field(&mut master, "replication", "connected_slaves").as_deref(),
        Some("1")
    );
    let line = info_field(&mut master, "replication", "slave0").unwrap();
    assert!(line.contains(",state=online,"), "{line}");
    let acked: u64 = (line.split(',').find_map(|f| f.strip_prefix("offset=")))
        .and_then(|o| o.parse().ok())
        .unwrap();
    assert!(acked > 0, "{line}");
    // A FLUSHALL reaches every shard's stream: each shard empties itself.
    ok(&mut master, &["FLUSHALL"]);
    ok(&mut master, &["SET", &key_on(2, 1), "after"]);
    assert_converges(&mut master, &mut replica);
    assert_eq!(int(&mut replica, &["DBSIZE"]), 1);
}

/// A shard link cut on the master resumes partially from its shard's backlog: no second
/// full sync, the other links untouched, and the writes made meanwhile arrive.
#[test]
fn a_cut_shard_link_resumes_its_shard_only() {
    use shard_link_util::key_on;
    let (_m, mut master, _r, mut replica) = linked("4");
    assert_eq!(stat(&mut master, "sync_full"), 4);
    let Reply::Bulk(Some(list)) = master.call(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST");
    };
    let list = String::from_utf8(list).unwrap();
    let links: Vec<&str> = (list.lines())
        .filter(|line| line.contains(" flags=S "))
        .filter_map(|line| line.strip_prefix("id=")?.split(' ').next())
        .collect();
    assert_eq!(links.len(), 4, "{list}");
    assert_eq!(int(&mut master, &["CLIENT", "KILL", "ID", links[1]]), 1);
    for n in 0..10 {
        for shard in 0..4 {
            ok(&mut master, &["SET", &key_on(shard, n), "while cut"]);
        }
    }
    wait_link_up(&mut replica);
    assert_converges(&mut master, &mut replica);
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    assert_eq!(
        stat(&mut master, "sync_full"),
        4,
        "a cut link synced in full"
    );
    assert_eq!(stat(&mut master, "sync_partial_ok"), 1);
}

/// REPLICAOF NO ONE on a replica on shard links keeps every write WAIT acknowledged, and
/// the new master takes writes and streams them to a replica of its own.
#[test]
fn a_promoted_shard_link_replica_keeps_what_wait_acknowledged() {
    use shard_link_util::key_on;
    let (_m, mut master, r, mut replica) = linked("4");
    for n in 0..20 {
        for shard in 0..4 {
            ok(&mut master, &["SET", &key_on(shard, n), "kept"]);
        }
    }
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    let applied: u64 = shard_offsets(&mut replica).unwrap().iter().sum();
    ok(&mut replica, &["REPLICAOF", "NO", "ONE"]);
    // The new history starts where the shards' streams were: their sum.
    let offset: u64 = info_field(&mut replica, "replication", "master_repl_offset")
        .unwrap()
        .parse()
        .unwrap();
    assert!(offset >= applied, "{offset} < {applied}");
    for n in 0..20 {
        for shard in 0..4 {
            assert_eq!(
                replica.call(&["GET", &key_on(shard, n)]),
                Reply::bulk("kept")
            );
        }
    }
    ok(&mut replica, &["SET", "promoted", "yes"]);
    let second = Server::start(&["--shards", "4"]);
    let mut second_conn = second.connect();
    ok(
        &mut second_conn,
        &["REPLICAOF", "127.0.0.1", &r.port.to_string()],
    );
    wait_link_up(&mut second_conn);
    assert_converges(&mut replica, &mut second_conn);
}

/// A replica with another shard count than its master's keeps the single stream (and the
/// same data).
#[test]
fn a_shard_count_mismatch_keeps_the_single_stream() {
    let (_m, mut master, _r, mut replica) = linked("2");
    assert_eq!(shard_offsets(&mut replica), None);
    write_stream(&mut master, 0);
    assert_converges(&mut master, &mut replica);
    assert_eq!(stat(&mut master, "sync_full"), 1);
}

/// A sub-replica of a replica on shard links: shard links cannot be passed on, so the
/// replica goes back to the single stream and the chain follows the master.
#[test]
fn a_sub_replica_makes_a_shard_link_replica_take_the_single_stream() {
    let (_m, mut master, r, mut replica) = linked("4");
    assert!(shard_offsets(&mut replica).is_some());
    let sub = Server::start(&["--shards", "4"]);
    let mut sub_conn = sub.connect();
    ok(
        &mut sub_conn,
        &["REPLICAOF", "127.0.0.1", &r.port.to_string()],
    );
    wait_link_up(&mut sub_conn);
    assert_eq!(shard_offsets(&mut replica), None);
    write_stream(&mut master, 0);
    assert_converges(&mut master, &mut replica);
    assert_converges(&mut master, &mut sub_conn);
    // One full sync for the four links, one for the single stream.
    assert_eq!(stat(&mut master, "sync_full"), 5);
}

/// A FLUSHALL inside a transaction reaches each shard's stream inside that shard's part:
/// each replica shard empties itself there, and nothing written after it is lost.
#[test]
fn a_flushall_in_a_transaction_flushes_each_shard_at_its_place() {
    use shard_link_util::key_on;
    let (_m, mut master, _r, mut replica) = linked("4");
    ok(&mut master, &["MULTI"]);
    for shard in 0..4 {
        master.call(&["SET", &key_on(shard, 0), "before"]);
    }
    master.call(&["FLUSHALL"]);
    for shard in 0..2 {
        master.call(&["SET", &key_on(shard, 1), "after"]);
    }
    let Reply::Array(Some(_)) = master.call(&["EXEC"]) else {
        panic!("EXEC");
    };
    for shard in 0..4 {
        ok(&mut master, &["SET", &key_on(shard, 2), "later"]);
    }
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    assert_converges(&mut master, &mut replica);
    assert_eq!(int(&mut replica, &["DBSIZE"]), 6);
}

/// A replica on shard links told to follow another master: the links stop and the new
/// master's data replaces the old (over shard links again).
#[test]
fn a_shard_link_replica_switches_to_another_master() {
    use shard_link_util::{key_on, master};
    let (_m, _master, _r, mut replica) = linked("4");
    let (other, mut other_conn) = master();
    for shard in 0..4 {
        ok(&mut other_conn, &["SET", &key_on(shard, 7), "other"]);
    }
    ok(
        &mut replica,
        &["REPLICAOF", "127.0.0.1", &other.port.to_string()],
    );
    let switched = eventually(Duration::from_secs(30), || {
        info_field(&mut replica, "replication", "master_port") == Some(other.port.to_string())
            && info_field(&mut replica, "replication", "master_link_status").as_deref()
                == Some("up")
    });
    assert!(switched, "{}", info(&mut replica, "replication"));
    assert_converges(&mut other_conn, &mut replica);
    assert_eq!(shard_offsets(&mut replica).map(|o| o.len()), Some(4));
    assert_eq!(int(&mut replica, &["DBSIZE"]), 4);
}
