//! Replication's master side against redis-server 7.0 as the replica (`--replicaof` our
//! port): the full sync (an RDB over the socket, point in time, every shard), the write
//! stream after it, WAIT, ROLE and INFO, a partial resynchronization after the link is cut,
//! a replica that stops reading (dropped at its output limit, the master's memory bounded),
//! and min-replicas-to-write. At 1 and 4 shards.

mod common;
mod rdb_util;
mod repl_util;

use std::io::Write;
use std::time::Duration;

use common::{eventually, request, Reply, Server, TempDir};
use rdb_util::{workload, Redis};
use repl_util::{
    assert_converges, assert_same_libraries, function_commands, info, info_field, ok, wait_link_up,
    write_stream, LIB1,
};

fn start_master(shards: &str) -> Server {
    Server::start(&["--shards", shards])
}

fn start_replica(dir: &TempDir, master: &Server) -> Redis {
    let port = master.port.to_string();
    Redis::start(dir.path(), &["--replicaof", "127.0.0.1", &port])
}

fn sync_then_stream(shards: &str) {
    let master = start_master(shards);
    let mut m = master.connect();
    workload(&mut m);
    let dir = TempDir::new("replica");
    let replica = start_replica(&dir, &master);
    let mut r = replica.connect();
    wait_link_up(&mut r);
    // What the RDB carried.
    assert_converges(&mut m, &mut r);
    for round in 0..3 {
        write_stream(&mut m, round);
    }
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);

    // ROLE: master, its offset, and the replica with what it acknowledged.
    let Reply::Array(Some(role)) = m.call(&["ROLE"]) else {
        panic!("ROLE");
    };
    assert_eq!(role[0], Reply::bulk("master"));
    let Reply::Int(offset) = role[1] else {
        panic!("ROLE offset: {:?}", role[1]);
    };
    assert!(offset > 0);
    let Reply::Array(Some(replicas)) = &role[2] else {
        panic!("ROLE replicas: {:?}", role[2]);
    };
    assert_eq!(replicas.len(), 1);
    let Reply::Array(Some(fields)) = &replicas[0] else {
        panic!("ROLE replica");
    };
    assert_eq!(fields[0], Reply::bulk("127.0.0.1"));
    assert_eq!(fields[1], Reply::bulk(&replica.port.to_string()));

    // INFO replication, as redis-server shows a master's.
    let text = info(&mut m, "replication");
    assert!(text.contains("role:master\r\n"), "{text}");
    assert!(text.contains("connected_slaves:1\r\n"), "{text}");
    let slave0 = format!("slave0:ip=127.0.0.1,port={},state=online,", replica.port);
    assert!(text.contains(&slave0), "{text}");
    assert!(text.contains("repl_backlog_active:1\r\n"), "{text}");
    let master_replid = info_field(&mut m, "replication", "master_replid").unwrap();
    assert_eq!(master_replid.len(), 40);
    // The replica follows our history and has processed everything WAIT asked for.
    assert_eq!(
        info_field(&mut r, "replication", "master_replid").as_deref(),
        Some(master_replid.as_str())
    );
    let offset_now: u64 = info_field(&mut m, "replication", "master_repl_offset")
        .unwrap()
        .parse()
        .unwrap();
    let acked = eventually(Duration::from_secs(10), || {
        info_field(&mut r, "replication", "slave_repl_offset")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|o| o >= offset as u64)
    });
    assert!(acked && offset_now >= offset as u64);
    assert_eq!(
        info_field(&mut m, "stats", "sync_full").as_deref(),
        Some("1")
    );

    // CLIENT LIST shows the link as a replica (`S`).
    let Reply::Bulk(Some(list)) = m.call(&["CLIENT", "LIST", "TYPE", "replica"]) else {
        panic!("CLIENT LIST");
    };
    let list = String::from_utf8(list).unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains(" flags=S "), "{list}");

    // The link is cut: the replica comes back with a partial resynchronization.
    assert_eq!(
        m.call(&["CLIENT", "KILL", "TYPE", "replica"]),
        Reply::Int(1)
    );
    for round in 10..12 {
        write_stream(&mut m, round);
    }
    wait_link_up(&mut r);
    let partial = eventually(Duration::from_secs(20), || {
        info_field(&mut m, "stats", "sync_partial_ok").as_deref() == Some("1")
    });
    assert!(partial, "{}", info(&mut m, "stats"));
    assert_eq!(
        info_field(&mut m, "stats", "sync_full").as_deref(),
        Some("1")
    );
    write_stream(&mut m, 20);
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);

    // FLUSHALL (every shard runs a part) then writes on every shard: the replica flushes
    // once, before them.
    ok(&mut m, &["FLUSHALL"]);
    write_stream(&mut m, 30);
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
    assert_eq!(m.call(&["DBSIZE"]), r.call(&["DBSIZE"]));
}

/// With the AOF on, what the log records is what the replica gets (the same sink feeds
/// both), transactions included.
#[test]
fn redis_replica_follows_with_the_aof_on() {
    let aof = TempDir::new("aof");
    let master = Server::start(&["--shards", "2", "--aof", aof.arg(), "--fsync", "always"]);
    let mut m = master.connect();
    workload(&mut m);
    let dir = TempDir::new("replica");
    let replica = start_replica(&dir, &master);
    let mut r = replica.connect();
    wait_link_up(&mut r);
    for round in 0..2 {
        write_stream(&mut m, round);
    }
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
}

#[test]
fn redis_replica_syncs_and_follows_one_shard() {
    sync_then_stream("1");
}

#[test]
fn redis_replica_syncs_and_follows_four_shards() {
    sync_then_stream("4");
}

/// Writes made while the RDB is being produced reach the replica exactly once: in the RDB
/// (written before the point in time) or in the stream (after it).
#[test]
fn writes_during_the_sync_are_not_lost_or_doubled() {
    // A slow walk (one key per step, 10 ms between rounds) so writes land while it runs.
    let master = Server::start_with_env(
        &["--shards", "4"],
        &[
            ("COREWIRE_KV_TEST_RDB_STEP_DELAY_MS", "10"),
            ("COREWIRE_KV_TEST_RDB_STEP_KEYS", "1"),
        ],
    );
    let mut m = master.connect();
    for i in 0..1200 {
        ok(
            &mut m,
            &["RPUSH", &format!("list{}", i % 400), &i.to_string()],
        );
    }
    let dir = TempDir::new("replica");
    let replica = start_replica(&dir, &master);
    let mut r = replica.connect();
    // Appends until the replica is up (before, during and after its sync): a doubled or
    // lost one shows in the lists and the counter.
    let mut increments = 0;
    let mut i = 1200;
    loop {
        ok(
            &mut m,
            &["RPUSH", &format!("list{}", i % 400), &i.to_string()],
        );
        ok(&mut m, &["INCR", "counter"]);
        increments += 1;
        i += 1;
        if i % 100 == 0
            && repl_util::info_field(&mut r, "replication", "master_link_status").as_deref()
                == Some("up")
        {
            break;
        }
        assert!(i < 200_000, "the replica never came up");
    }
    assert_eq!(m.call(&["WAIT", "1", "10000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
    assert_eq!(
        r.call(&["GET", "counter"]),
        Reply::bulk(&increments.to_string())
    );
}

/// A second replica syncs while the first follows and writes keep coming: its cut is in
/// the middle of every shard's stream (the first sync began them), and both end equal.
#[test]
fn a_second_full_sync_cuts_the_running_stream() {
    let master = Server::start_with_env(
        &["--shards", "4"],
        &[
            ("COREWIRE_KV_TEST_RDB_STEP_DELAY_MS", "10"),
            ("COREWIRE_KV_TEST_RDB_STEP_KEYS", "1"),
        ],
    );
    let mut m = master.connect();
    for i in 0..400 {
        ok(
            &mut m,
            &["RPUSH", &format!("list{}", i % 200), &i.to_string()],
        );
    }
    let dir1 = TempDir::new("replica1");
    let first = start_replica(&dir1, &master);
    let mut r1 = first.connect();
    wait_link_up(&mut r1);
    let dir2 = TempDir::new("replica2");
    let second = start_replica(&dir2, &master);
    let mut r2 = second.connect();
    let mut increments = 0;
    let mut i = 400;
    loop {
        ok(
            &mut m,
            &["RPUSH", &format!("list{}", i % 200), &i.to_string()],
        );
        ok(&mut m, &["INCR", "counter"]);
        increments += 1;
        i += 1;
        if i % 100 == 0
            && info_field(&mut r2, "replication", "master_link_status").as_deref() == Some("up")
        {
            break;
        }
        assert!(i < 200_000, "the second replica never came up");
    }
    assert_eq!(m.call(&["WAIT", "2", "10000"]), Reply::Int(2));
    assert_converges(&mut m, &mut r1);
    assert_converges(&mut m, &mut r2);
    for r in [&mut r1, &mut r2] {
        assert_eq!(
            r.call(&["GET", "counter"]),
            Reply::bulk(&increments.to_string())
        );
    }
    assert_eq!(
        info_field(&mut m, "stats", "sync_full").as_deref(),
        Some("2")
    );
}

#[test]
fn wait_without_replicas() {
    let master = start_master("2");
    let mut m = master.connect();
    ok(&mut m, &["SET", "k", "v"]);
    assert_eq!(m.call(&["WAIT", "0", "0"]), Reply::Int(0));
    let started = std::time::Instant::now();
    assert_eq!(m.call(&["WAIT", "1", "200"]), Reply::Int(0));
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        m.call(&["WAIT", "1", "-1"]),
        Reply::Error("ERR timeout is negative".into())
    );
    let Reply::Array(Some(role)) = m.call(&["ROLE"]) else {
        panic!("ROLE");
    };
    assert_eq!(
        role,
        vec![
            Reply::bulk("master"),
            Reply::Int(0),
            Reply::Array(Some(vec![]))
        ]
    );
}

#[test]
fn min_replicas_to_write_refuses_writes() {
    let master = start_master("2");
    let mut m = master.connect();
    ok(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    let refused = eventually(Duration::from_secs(5), || {
        m.call(&["SET", "k", "v"])
            == Reply::Error("NOREPLICAS Not enough good replicas to write.".into())
    });
    assert!(refused);
    // Reads still work (an early SET may have passed before the setting was read).
    assert_eq!(m.call(&["GET", "never-written"]), Reply::nil());
    let text = info(&mut m, "replication");
    assert!(text.contains("min_slaves_good_slaves:0\r\n"), "{text}");

    // A replica that acknowledges makes it good.
    let dir = TempDir::new("replica");
    let replica = start_replica(&dir, &master);
    let mut r = replica.connect();
    wait_link_up(&mut r);
    let accepted = eventually(Duration::from_secs(10), || {
        m.call(&["SET", "k", "v"]) == Reply::ok()
    });
    assert!(accepted, "{}", info(&mut m, "replication"));
    ok(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "0"]);
}

/// A replica that never reads: its stream piles up to `client-output-buffer-limit
/// replica`, then the master drops it; the master's memory stays bounded meanwhile.
#[test]
fn a_replica_that_stops_reading_is_dropped() {
    for shards in ["1", "4"] {
        let master = start_master(shards);
        let mut m = master.connect();
        ok(
            &mut m,
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "replica 4mb 0 0",
            ],
        );
        let mut stalled = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
        stalled
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        // The handshake, then never a read until the end.
        stalled
            .write_all(&request(&["REPLCONF", "capa", "eof", "capa", "psync2"]))
            .unwrap();
        stalled.write_all(&request(&["PSYNC", "?", "-1"])).unwrap();
        let linked = eventually(Duration::from_secs(10), || {
            info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("1")
        });
        assert!(linked, "{}", info(&mut m, "replication"));
        let baseline = master.rss_mib();
        // 200 MiB of stream, over and over the same few keys.
        let value = "x".repeat(1 << 20);
        let mut dropped = false;
        for i in 0..200 {
            ok(&mut m, &["SET", &format!("big{}", i % 4), &value]);
            if i % 20 == 19
                && info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("0")
            {
                dropped = true;
                break;
            }
        }
        let dropped = dropped
            || eventually(Duration::from_secs(10), || {
                info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("0")
            });
        assert!(dropped, "{}", info(&mut m, "replication"));
        let grown = master.rss_mib().saturating_sub(baseline);
        assert!(
            grown < 96,
            "the master grew {grown} MiB for a stalled replica"
        );
        // Its connection was closed: what it had not read, then the end.
        let mut unread = Vec::new();
        match std::io::Read::read_to_end(&mut stalled, &mut unread) {
            Ok(_) => assert!(unread.starts_with(b"+OK\r\n+FULLRESYNC ")),
            Err(e) => assert_eq!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset,
                "the stalled replica's connection stayed open"
            ),
        }
    }
}

#[test]
fn replication_commands_are_in_the_table() {
    let master = start_master("1");
    let mut m = master.connect();
    for name in ["psync", "sync", "replconf", "wait", "role"] {
        let Reply::Array(Some(entries)) = m.call(&["COMMAND", "INFO", name]) else {
            panic!("COMMAND INFO {name}");
        };
        assert!(
            matches!(&entries[0], Reply::Array(Some(fields)) if fields[0] == Reply::bulk(name)),
            "COMMAND INFO {name}: {entries:?}"
        );
    }
}

/// SYNC (and PSYNC without `capa eof`): the RDB as one length-prefixed bulk, then the
/// stream; `repl-backlog-size` shows in INFO.
#[test]
fn sync_sends_a_length_prefixed_rdb_then_the_stream() {
    use std::io::Read;
    let master = start_master("2");
    let mut m = master.connect();
    for i in 0..50 {
        ok(&mut m, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    ok(&mut m, &["CONFIG", "SET", "repl-backlog-size", "65536"]);
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    raw.write_all(&request(&["SYNC"])).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    // `$<len>\r\n`, then `len` bytes of RDB.
    let (len, body_start) = loop {
        let n = raw.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the RDB");
        got.extend_from_slice(&chunk[..n]);
        if let Some(end) = got.windows(2).position(|w| w == b"\r\n") {
            assert_eq!(got[0], b'$', "{:?}", String::from_utf8_lossy(&got));
            let len: usize = std::str::from_utf8(&got[1..end]).unwrap().parse().unwrap();
            break (len, end + 2);
        }
    };
    while got.len() < body_start + len {
        let n = raw.read(&mut chunk).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&chunk[..n]);
    }
    let rdb = &got[body_start..body_start + len];
    assert!(rdb.starts_with(b"REDIS0010"));
    assert_eq!(rdb[len - 9], 0xff, "the RDB ends with EOF and its checksum");
    // A write after the sync comes down the stream.
    ok(&mut m, &["SET", "after", "sync"]);
    let wanted = b"$5\r\nafter\r\n$4\r\nsync\r\n";
    let streamed = eventually(Duration::from_secs(10), || {
        if let Ok(n) = raw.read(&mut chunk) {
            got.extend_from_slice(&chunk[..n]);
        }
        got.windows(wanted.len()).any(|w| w == wanted)
    });
    assert!(
        streamed,
        "{:?}",
        String::from_utf8_lossy(&got[body_start + len..])
    );
    // The hub reads the setting on its next tick.
    let resized = eventually(Duration::from_secs(5), || {
        info(&mut m, "replication").contains("repl_backlog_size:65536\r\n")
    });
    assert!(resized, "{}", info(&mut m, "replication"));
}

/// A PSYNC the backlog cannot serve (another history, or an offset it no longer holds)
/// gets a full resynchronization in the diskless form.
#[test]
fn psync_outside_the_backlog_resyncs_fully() {
    use std::io::Read;
    let master = start_master("1");
    let mut m = master.connect();
    ok(&mut m, &["SET", "k", "v"]);
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    raw.write_all(&request(&["REPLCONF", "capa", "eof", "capa", "psync2"]))
        .unwrap();
    raw.write_all(&request(&["PSYNC", &"f".repeat(40), "1000"]))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let complete = eventually(Duration::from_secs(10), || {
        if let Ok(n) = raw.read(&mut chunk) {
            got.extend_from_slice(&chunk[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        text.contains("$EOF:") && got.len() > 200
    });
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(complete, "{text:?}");
    assert!(text.starts_with("+OK\r\n+FULLRESYNC "), "{text:?}");
    let line_end = text.find("\r\n$EOF:").unwrap();
    let fields: Vec<&str> = text[5..line_end].split(' ').collect();
    assert_eq!(fields[0], "+FULLRESYNC");
    assert_eq!(fields[1].len(), 40);
    let mark_at = line_end + 7;
    let mark = &got[mark_at..mark_at + 40];
    assert!(got[mark_at + 42..].starts_with(b"REDIS0010"));
    // The RDB is followed by the same 40 characters.
    assert!(got.windows(40).skip(mark_at + 42).any(|w| w == mark));
    assert_eq!(
        info_field(&mut m, "stats", "sync_partial_err").as_deref(),
        Some("1")
    );
}

/// Function libraries reach a redis-server replica: the full sync's RDB carries them
/// (FUNCTION2 records), then every FUNCTION command's result streams as FUNCTION RESTORE
/// in Redis's payload; the replica runs read-only functions and refuses writing ones.
#[test]
fn functions_replicate_to_a_redis_replica() {
    let master = start_master("2");
    let mut m = master.connect();
    assert_eq!(m.call(&["FUNCTION", "LOAD", LIB1]), Reply::bulk("lib1"));
    ok(&mut m, &["SET", "fk", "hello"]);
    let dir = TempDir::new("replica");
    let replica = start_replica(&dir, &master);
    let mut r = replica.connect();
    wait_link_up(&mut r);
    assert_same_libraries(&mut m, &mut r, 1);
    assert_converges(&mut m, &mut r);
    assert_eq!(
        r.call(&["FCALL_RO", "get1", "1", "fk"]),
        Reply::bulk("hello")
    );
    assert_eq!(
        r.call(&["FCALL", "set1", "1", "fk", "x"]),
        Reply::Error("READONLY You can't write against a read only replica.".into())
    );
    // A function's writes stream as their effects.
    assert_eq!(m.call(&["FCALL", "set1", "1", "fk", "world"]), Reply::ok());
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_eq!(r.call(&["GET", "fk"]), Reply::bulk("world"));
    function_commands(&mut m, &mut r, |m| {
        assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    });
    // Loaded from connections the shards share out (each change goes through shard 0).
    for i in 0..4 {
        let mut conn = master.connect();
        let code = format!(
            "#!lua name=extra{i}\nredis.register_function('e{i}', function() return {i} end)"
        );
        assert_eq!(
            conn.call(&["FUNCTION", "LOAD", &code]),
            Reply::bulk(&format!("extra{i}"))
        );
    }
    assert_same_libraries(&mut m, &mut r, 5);
}
