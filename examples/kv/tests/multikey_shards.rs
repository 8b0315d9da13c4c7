//! Multi-key commands whose keys live on different shards (no hash tags): concurrent SMOVE and
//! LMOVE transfers are never seen half done by other clients (a transaction reading every
//! key, SUNION over all of them), and no element is lost or duplicated; BLMOVE and BLPOP wait
//! on keys of several shards and are woken by a push on any of them; a move into a key serves
//! the client blocked on it; the AOF replays cross-shard writes exactly.

mod common;

use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;

use common::{Reply, Server};

const SHARDS: &str = "4";

fn int(reply: &Reply) -> i64 {
    match reply {
        Reply::Int(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn bulks(reply: Reply) -> Vec<String> {
    match reply {
        Reply::Array(Some(items)) => items
            .into_iter()
            .map(|item| match item {
                Reply::Bulk(Some(bytes)) => String::from_utf8(bytes).unwrap(),
                other => panic!("expected a bulk string, got {other:?}"),
            })
            .collect(),
        other => panic!("expected an array, got {other:?}"),
    }
}

/// Plain keys, spread over the shards (checked by [`spread`]).
const SETS: [&str; 4] = ["set:a", "set:b", "set:c", "set:d"];
const LISTS: [&str; 4] = ["list:a", "list:b", "list:c", "list:d"];

/// Asserts that `keys` live on at least three different shards of four.
fn spread(keys: &[&str]) {
    let mut shards: Vec<usize> = keys
        .iter()
        .map(|key| corewire_kv::routing::shard_of(key.as_bytes(), 4))
        .collect();
    shards.sort_unstable();
    shards.dedup();
    assert!(shards.len() >= 3, "{keys:?} on shards {shards:?}");
}

#[test]
fn concurrent_smoves_are_never_seen_half_done() {
    spread(&SETS);
    let server = Server::start(&["--shards", SHARDS]);
    let mut setup = server.connect();
    for i in 0..100 {
        let member = format!("m{i}");
        setup.call(&["SADD", SETS[i % 4], &member]);
    }
    let port = server.port;
    let movers: Vec<_> = (0..3)
        .map(|w| {
            thread::spawn(move || {
                let mut conn = common::Resp::connect(port);
                for i in 0..400usize {
                    let from = SETS[(i + w) % 4];
                    let to = SETS[(i * 3 + w + 1) % 4];
                    let member = format!("m{}", (i * 7 + w) % 100);
                    let moved = int(&conn.call(&["SMOVE", from, to, &member]));
                    assert!(moved == 0 || moved == 1);
                }
            })
        })
        .collect();
    let mut reader = server.connect();
    for _ in 0..200 {
        let union = bulks(reader.call(&["SUNION", SETS[0], SETS[1], SETS[2], SETS[3]]));
        assert_eq!(union.len(), 100, "SUNION saw a member in flight");
        reader.call(&["MULTI"]);
        for set in SETS {
            reader.call(&["SCARD", set]);
        }
        let Reply::Array(Some(cards)) = reader.call(&["EXEC"]) else {
            panic!("EXEC failed");
        };
        let total: i64 = cards.iter().map(int).sum();
        assert_eq!(total, 100, "a transaction saw a member twice or not at all");
    }
    for mover in movers {
        mover.join().unwrap();
    }
    let mut seen = BTreeMap::new();
    for set in SETS {
        for member in bulks(setup.call(&["SMEMBERS", set])) {
            *seen.entry(member).or_insert(0) += 1;
        }
    }
    assert_eq!(seen.len(), 100);
    assert!(seen.values().all(|&n| n == 1), "a member in two sets");
}

#[test]
fn concurrent_lmoves_lose_and_duplicate_nothing() {
    spread(&LISTS);
    let server = Server::start(&["--shards", SHARDS]);
    let mut setup = server.connect();
    for i in 0..200 {
        setup.call(&["RPUSH", LISTS[i % 4], &format!("item{i}")]);
    }
    let port = server.port;
    let movers: Vec<_> = (0..3)
        .map(|w| {
            thread::spawn(move || {
                let mut conn = common::Resp::connect(port);
                for i in 0..400usize {
                    let from = LISTS[(i + w) % 4];
                    let to = LISTS[(i * 5 + w + 1) % 4];
                    if i % 2 == 0 {
                        conn.call(&["LMOVE", from, to, "LEFT", "RIGHT"]);
                    } else {
                        conn.call(&["RPOPLPUSH", from, to]);
                    }
                }
            })
        })
        .collect();
    let mut reader = server.connect();
    for _ in 0..200 {
        reader.call(&["MULTI"]);
        for list in LISTS {
            reader.call(&["LLEN", list]);
        }
        let Reply::Array(Some(lens)) = reader.call(&["EXEC"]) else {
            panic!("EXEC failed");
        };
        assert_eq!(lens.iter().map(int).sum::<i64>(), 200, "an item in flight");
    }
    for mover in movers {
        mover.join().unwrap();
    }
    let mut items: Vec<String> = LISTS
        .iter()
        .flat_map(|list| bulks(setup.call(&["LRANGE", list, "0", "-1"])))
        .collect();
    items.sort();
    let mut expected: Vec<String> = (0..200).map(|i| format!("item{i}")).collect();
    expected.sort();
    assert_eq!(items, expected);
}

#[test]
fn blocking_moves_and_pops_wake_across_shards() {
    spread(&["q:a", "q:b", "q:c", "q:d"]);
    assert_ne!(
        corewire_kv::routing::shard_of(b"src:l", 4),
        corewire_kv::routing::shard_of(b"dst:l", 4)
    );
    let server = Server::start(&["--shards", SHARDS]);
    let port = server.port;
    let blocked = thread::spawn(move || {
        let mut conn = common::Resp::connect(port);
        conn.call(&["BLMOVE", "src:l", "dst:l", "LEFT", "RIGHT", "10"])
    });
    let popper = thread::spawn(move || {
        let mut conn = common::Resp::connect(port);
        conn.call(&["BLPOP", "q:a", "q:b", "q:c", "q:d", "10"])
    });
    thread::sleep(Duration::from_millis(300));
    let mut conn = server.connect();
    assert_eq!(int(&conn.call(&["RPUSH", "src:l", "hello"])), 1);
    assert_eq!(int(&conn.call(&["RPUSH", "q:c", "x"])), 1);
    assert_eq!(blocked.join().unwrap(), Reply::bulk("hello"));
    assert_eq!(
        bulks(popper.join().unwrap()),
        vec!["q:c".to_string(), "x".to_string()]
    );
    assert_eq!(
        bulks(conn.call(&["LRANGE", "dst:l", "0", "-1"])),
        vec!["hello"]
    );
    assert_eq!(int(&conn.call(&["EXISTS", "src:l", "q:c"])), 0);
    // A timeout over several shards answers nil.
    assert_eq!(
        conn.call(&["BLPOP", "q:a", "q:b", "0.2"]),
        Reply::Array(None)
    );
}

#[test]
fn transactions_and_renames_across_shards() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut conn = server.connect();
    conn.call(&["SADD", "mover", "x", "y"]);
    conn.call(&["MULTI"]);
    conn.call(&["SMOVE", "mover", "moved", "x"]);
    conn.call(&["SCARD", "moved"]);
    conn.call(&["RENAME", "moved", "renamed"]);
    assert_eq!(
        conn.call(&["EXEC"]),
        Reply::Array(Some(vec![Reply::Int(1), Reply::Int(1), Reply::ok()]))
    );
    assert_eq!(bulks(conn.call(&["SMEMBERS", "renamed"])), vec!["x"]);
    assert_eq!(conn.call(&["SET", "k1", "v", "PX", "100000"]), Reply::ok());
    assert_eq!(int(&conn.call(&["MSETNX", "k1", "a", "k2", "b"])), 0);
    assert_eq!(int(&conn.call(&["EXISTS", "k2"])), 0);
    assert_eq!(conn.call(&["RENAME", "k1", "k3"]), Reply::ok());
    let ttl = int(&conn.call(&["PTTL", "k3"]));
    assert!(
        ttl > 90_000 && ttl <= 100_000,
        "RENAME keeps the TTL: {ttl}"
    );
    assert_eq!(int(&conn.call(&["COPY", "k3", "k4"])), 1);
    assert_eq!(conn.call(&["GET", "k4"]), Reply::bulk("v"));
}

/// Cross-shard writes are logged on each shard as what they did there: a restart replays
/// the same keyspace.
#[test]
fn cross_shard_writes_replay_after_restart() {
    let dir = common::TempDir::new("multikey-aof");
    let args = ["--shards", SHARDS, "--aof", dir.arg(), "--fsync", "always"];
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    conn.call(&["SADD", SETS[0], "a", "b", "c"]);
    conn.call(&["RPUSH", LISTS[0], "x", "y"]);
    assert_eq!(int(&conn.call(&["SMOVE", SETS[0], SETS[1], "a"])), 1);
    assert_eq!(
        int(&conn.call(&["SUNIONSTORE", SETS[2], SETS[0], SETS[1]])),
        3
    );
    assert_eq!(
        conn.call(&["LMOVE", LISTS[0], LISTS[1], "LEFT", "LEFT"]),
        Reply::bulk("x")
    );
    assert_eq!(conn.call(&["RENAME", LISTS[1], LISTS[2]]), Reply::ok());
    let before: Vec<Vec<String>> = state(&mut conn);
    drop(conn);
    server.stop();
    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(state(&mut conn), before);
    assert_eq!(int(&conn.call(&["EXISTS", LISTS[1]])), 0);
}

fn state(conn: &mut common::Resp) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for set in SETS {
        let mut members = bulks(conn.call(&["SMEMBERS", set]));
        members.sort();
        out.push(members);
    }
    for list in LISTS {
        out.push(bulks(conn.call(&["LRANGE", list, "0", "-1"])));
    }
    out
}

/// A client blocked on a key is served by a cross-shard move into that key.
#[test]
fn a_move_across_shards_serves_a_blocked_client() {
    let server = Server::start(&["--shards", SHARDS]);
    let port = server.port;
    let waiter = thread::spawn(move || {
        let mut conn = common::Resp::connect(port);
        conn.call(&["BLPOP", LISTS[1], "10"])
    });
    thread::sleep(Duration::from_millis(300));
    let mut conn = server.connect();
    conn.call(&["RPUSH", LISTS[0], "moved"]);
    assert_eq!(
        conn.call(&["LMOVE", LISTS[0], LISTS[1], "LEFT", "RIGHT"]),
        Reply::bulk("moved")
    );
    assert_eq!(
        bulks(waiter.join().unwrap()),
        vec![LISTS[1].to_string(), "moved".to_string()]
    );
    assert_eq!(int(&conn.call(&["LLEN", LISTS[1]])), 0);
}
