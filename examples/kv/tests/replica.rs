//! corewire-kv as a replica of redis-server 7.0 (PSYNC2): the full sync (a snapshot saved
//! to disk first and the diskless form), the command stream (transactions, scripts' effects,
//! expiries, deletions), WAIT counting our acknowledgements, a partial resync after the link
//! is cut, READONLY, the master's expiries, and REPLICAOF NO ONE keeping every acknowledged
//! write. Each compares the two servers' whole contents with ordinary commands.

mod common;
mod rdb_util;
mod repl_util;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, Reply, Resp, Server, TempDir};
use rdb_util::{contents, workload, KeyContent, Redis};

const WAIT: Duration = Duration::from_secs(30);

fn info_field(conn: &mut Resp, section: &str, field: &str) -> Option<String> {
    let Reply::Bulk(Some(text)) = conn.call(&["INFO", section]) else {
        panic!("INFO {section}");
    };
    let text = String::from_utf8(text).unwrap();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
}

fn wait_link_up(replica: &mut Resp) {
    let up = eventually(WAIT, || {
        info_field(replica, "replication", "master_link_status").as_deref() == Some("up")
    });
    let info = replica.call(&["INFO", "replication"]);
    assert!(up, "the link never came up: {info:?}");
}

/// Waits until the replica holds what the master holds.
fn wait_same(master: &mut Resp, replica: &mut Resp) -> BTreeMap<Vec<u8>, KeyContent> {
    let want = contents(master);
    let mut got = BTreeMap::new();
    let same = eventually(WAIT, || {
        got = contents(replica);
        got == want
    });
    if !same {
        let missing: Vec<_> = want
            .iter()
            .filter(|(k, v)| got.get(*k) != Some(v))
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        let extra: Vec<_> = got
            .keys()
            .filter(|k| !want.contains_key(*k))
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        panic!("the replica differs: wrong or missing {missing:?}, extra {extra:?}");
    }
    want
}

fn ok(conn: &mut Resp, args: &[&str]) {
    let reply = conn.call(args);
    assert!(!matches!(reply, Reply::Error(_)), "{args:?}: {reply:?}");
}

fn int(conn: &mut Resp, args: &[&str]) -> i64 {
    match conn.call(args) {
        Reply::Int(n) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn stat(conn: &mut Resp, field: &str) -> i64 {
    info_field(conn, "stats", field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO stats"))
}

/// Writes of every kind, as a master's stream carries them: plain writes, a transaction
/// over keys of several shards, a script (replicated as its effects), expiries, deletions.
fn write_stream(master: &mut Resp, round: usize) {
    for i in 0..50 {
        ok(master, &["SET", &format!("w{round}:{i}"), &format!("v{i}")]);
        ok(master, &["INCR", &format!("counter{}", i % 7)]);
        ok(
            master,
            &["LPUSH", &format!("list{}", i % 5), &i.to_string()],
        );
    }
    ok(master, &["HSET", "h:small", "new", &round.to_string()]);
    ok(master, &["SADD", "set:text", &format!("m{round}")]);
    ok(master, &["ZINCRBY", "z:small", "2", "a"]);
    ok(master, &["EXPIRE", &format!("w{round}:1"), "5000"]);
    ok(
        master,
        // Mid-way between two of `ttl_bucket`'s 10-minute steps (9,000,000 ms is one): a
        // PTTL read in the millisecond of the write must not land in another bucket.
        &["SET", &format!("px{round}"), "x", "PX", "9300000"],
    );
    ok(
        master,
        &["DEL", "s:text", &format!("w{round}:2"), "l:small"],
    );
    ok(master, &["MULTI"]);
    for key in ["ta", "tb", "tc", "td"] {
        assert_eq!(master.call(&["INCR", key]), Reply::Simple("QUEUED".into()));
    }
    assert_eq!(
        master.call(&["LPUSH", "tlist", "x"]),
        Reply::Simple("QUEUED".into())
    );
    let Reply::Array(Some(results)) = master.call(&["EXEC"]) else {
        panic!("EXEC");
    };
    assert_eq!(results.len(), 5);
    ok(
        master,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], ARGV[1]); redis.call('incr', KEYS[2]); \
             return redis.call('rpush', KEYS[3], ARGV[1])",
            "3",
            "script:a",
            "script:b",
            "script:c",
            &format!("r{round}"),
        ],
    );
    ok(
        master,
        &["MSET", "ma", "1", "mb", "2", "mc", "3", "md", "4"],
    );
}

/// Starts redis-server as the master with its keys, and corewire-kv (`shards`) replicating
/// it; returns both once the link is up.
fn replica_of_redis(
    dir: &TempDir,
    shards: usize,
    redis_args: &[&str],
) -> (Redis, Server, Resp, Resp) {
    let redis = Redis::start(dir.path(), redis_args);
    let mut master = redis.connect();
    workload(&mut master);
    let replica = Server::start(&["--shards", &shards.to_string()]);
    let mut conn = replica.connect();
    let port = redis.port.to_string();
    assert_eq!(conn.call(&["REPLICAOF", "127.0.0.1", &port]), Reply::ok());
    assert_eq!(
        conn.call(&["REPLICAOF", "127.0.0.1", &port]),
        Reply::Simple("OK Already connected to specified master".into())
    );
    wait_link_up(&mut conn);
    (redis, replica, master, conn)
}

fn replicate_from_redis(shards: usize, redis_args: &[&str]) {
    let dir = TempDir::new("replica");
    let (redis, _replica, mut master, mut replica) = replica_of_redis(&dir, shards, redis_args);
    let first = wait_same(&mut master, &mut replica);
    assert!(first.len() > 10, "the workload wrote keys: {}", first.len());

    // ROLE and INFO as a replica.
    let Reply::Array(Some(role)) = replica.call(&["ROLE"]) else {
        panic!("ROLE");
    };
    assert_eq!(role[0], Reply::bulk("slave"));
    assert_eq!(role[2], Reply::Int(i64::from(redis.port)));
    assert_eq!(role[3], Reply::bulk("connected"));
    assert_eq!(
        info_field(&mut replica, "replication", "role").as_deref(),
        Some("slave")
    );
    assert_eq!(
        info_field(&mut replica, "replication", "slave_read_only").as_deref(),
        Some("1")
    );

    // Clients cannot write; reads are served.
    assert_eq!(
        replica.call(&["SET", "k", "v"]),
        Reply::Error("READONLY You can't write against a read only replica.".into())
    );
    assert_eq!(
        replica.call(&["GET", "s:int8"]),
        Reply::bulk("12"),
        "reads are served"
    );

    // The stream, and WAIT counting this replica's acknowledgements.
    write_stream(&mut master, 1);
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    wait_same(&mut master, &mut replica);
    let offset = |conn: &mut Resp, field: &str| -> u64 {
        info_field(conn, "replication", field)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {field}"))
    };
    let master_offset = offset(&mut master, "master_repl_offset");
    // The master's pings may add to it meanwhile.
    let caught_up = eventually(WAIT, || {
        offset(&mut replica, "slave_repl_offset") >= master_offset
    });
    assert!(caught_up, "slave_repl_offset never reached {master_offset}");

    // The link is cut: a partial resync continues it (no second full sync).
    let full = stat(&mut master, "sync_full");
    let partial = stat(&mut master, "sync_partial_ok");
    assert_eq!(int(&mut master, &["CLIENT", "KILL", "TYPE", "replica"]), 1);
    write_stream(&mut master, 2);
    let resynced = eventually(WAIT, || stat(&mut master, "sync_partial_ok") == partial + 1);
    assert!(resynced, "no partial resync");
    wait_link_up(&mut replica);
    assert_eq!(stat(&mut master, "sync_full"), full, "a second full sync");
    write_stream(&mut master, 3);
    wait_same(&mut master, &mut replica);

    // Promotion keeps every write the master acknowledged with WAIT.
    write_stream(&mut master, 4);
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    let acknowledged = contents(&mut master);
    assert_eq!(replica.call(&["REPLICAOF", "NO", "ONE"]), Reply::ok());
    assert_eq!(contents(&mut replica), acknowledged);
    let Reply::Array(Some(role)) = replica.call(&["ROLE"]) else {
        panic!("ROLE");
    };
    assert_eq!(role[0], Reply::bulk("master"));
    assert_eq!(replica.call(&["SET", "k", "v"]), Reply::ok());
    // Its own history goes on from the master's (replicas of the old master can continue).
    let old_id = info_field(&mut master, "replication", "master_replid");
    let shifted = eventually(WAIT, || {
        info_field(&mut replica, "replication", "master_replid2") == old_id
    });
    assert!(shifted, "master_replid2 is not the old master's {old_id:?}");
}

#[test]
fn replica_of_redis_one_shard_diskless() {
    replicate_from_redis(
        1,
        &[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
}

#[test]
fn replica_of_redis_four_shards_disk_snapshot() {
    replicate_from_redis(4, &["--repl-diskless-sync", "no"]);
}

/// `--replicaof` and `--masterauth` at start, against a master with requirepass.
#[test]
fn configured_replica_authenticates() {
    let dir = TempDir::new("replica-auth");
    let redis = Redis::start(dir.path(), &[]);
    let mut master = redis.connect();
    // Set after start: the start-up check pings without a password.
    ok(&mut master, &["CONFIG", "SET", "requirepass", "secret"]);
    ok(&mut master, &["AUTH", "secret"]);
    ok(&mut master, &["SET", "a", "1"]);
    let port = redis.port.to_string();
    let replica = Server::start(&[
        "--shards",
        "2",
        "--replicaof",
        "127.0.0.1",
        &port,
        "--masterauth",
        "secret",
    ]);
    let mut conn = replica.connect();
    wait_link_up(&mut conn);
    ok(&mut master, &["SET", "b", "2"]);
    let both = eventually(WAIT, || {
        conn.call(&["MGET", "a", "b"])
            == Reply::Array(Some(vec![Reply::bulk("1"), Reply::bulk("2")]))
    });
    assert!(both, "{:?}", conn.call(&["MGET", "a", "b"]));
}

/// A replica's keys expire when its master says so: an expired key reads as missing but
/// stays until the master's DEL arrives.
#[test]
fn keys_expire_by_the_masters_del() {
    let dir = TempDir::new("replica-expiry");
    let (_redis, _replica, mut master, mut replica) =
        replica_of_redis(&dir, 2, &["--enable-debug-command", "yes"]);
    ok(&mut master, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    ok(&mut master, &["FLUSHALL"]);
    ok(&mut master, &["SET", "short", "v", "PX", "300"]);
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(replica.call(&["GET", "short"]), Reply::nil());
    let keys = |replica: &mut Resp| info_field(replica, "keyspace", "db0");
    assert!(
        keys(&mut replica).is_some_and(|db| db.starts_with("keys=1,")),
        "the replica deleted it itself: {:?}",
        keys(&mut replica)
    );
    // The master meets it expired, deletes it, and sends the DEL.
    assert_eq!(master.call(&["GET", "short"]), Reply::nil());
    let gone = eventually(WAIT, || keys(&mut replica).is_none());
    assert!(gone, "{:?}", keys(&mut replica));
}

/// corewire-kv (2 shards) as the replica of corewire-kv (4 shards): the snapshot, the
/// stream (with WAIT counting the replica), a partial resync after a cut, and promotion.
#[test]
fn replica_of_corewire() {
    let master_server = Server::start(&["--shards", "4"]);
    let mut master = master_server.connect();
    workload(&mut master);
    let replica_server = Server::start(&["--shards", "2"]);
    let mut replica = replica_server.connect();
    let port = master_server.port.to_string();
    assert_eq!(
        replica.call(&["REPLICAOF", "127.0.0.1", &port]),
        Reply::ok()
    );
    wait_link_up(&mut replica);
    wait_same(&mut master, &mut replica);
    write_stream(&mut master, 1);
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    wait_same(&mut master, &mut replica);
    assert_eq!(int(&mut master, &["CLIENT", "KILL", "TYPE", "replica"]), 1);
    write_stream(&mut master, 2);
    wait_link_up(&mut replica);
    wait_same(&mut master, &mut replica);
    assert_eq!(int(&mut master, &["WAIT", "1", "10000"]), 1);
    let acknowledged = contents(&mut master);
    assert_eq!(replica.call(&["REPLICAOF", "NO", "ONE"]), Reply::ok());
    assert_eq!(contents(&mut replica), acknowledged);
}

/// `repl-transport rdma` where RDMA cannot be had (this host has no device; one that has
/// cannot reach loopback over it): the link stays down with the reason in INFO and the
/// log, counted and retried, and never falls back to TCP; `CONFIG SET repl-transport tcp`
/// brings it up at the next retry. (Over RDMA itself: `tests/rdma_repl.rs`, in the VM.)
#[test]
fn forced_rdma_transport_fails_clearly_without_tcp_fallback() {
    let master_server = Server::start(&["--shards", "1"]);
    let mut master = master_server.connect();
    ok(&mut master, &["SET", "k", "v"]);
    let port = master_server.port.to_string();
    let replica_server = Server::start(&[
        "--shards",
        "1",
        "--repl-transport",
        "rdma",
        "--replicaof",
        "127.0.0.1",
        &port,
    ]);
    let mut replica = replica_server.connect();
    assert_eq!(
        replica.call(&["CONFIG", "GET", "repl-transport"]),
        Reply::Array(Some(vec![
            Reply::bulk("repl-transport"),
            Reply::bulk("rdma")
        ]))
    );
    let failures = |replica: &mut Resp| -> u64 {
        info_field(replica, "replication", "master_link_failures")
            .and_then(|n| n.parse().ok())
            .expect("master_link_failures")
    };
    // Retried about once a second, failing each time.
    let retried = eventually(WAIT, || failures(&mut replica) >= 2);
    assert!(retried, "{:?}", replica.call(&["INFO", "replication"]));
    let field = |replica: &mut Resp, name: &str| info_field(replica, "replication", name);
    assert_eq!(
        field(&mut replica, "master_link_status").as_deref(),
        Some("down")
    );
    assert_eq!(
        field(&mut replica, "master_link_transport").as_deref(),
        Some("rdma")
    );
    let why = field(&mut replica, "master_link_last_error").expect("master_link_last_error");
    assert!(why.contains("RDMA"), "{why}");
    let log = replica_server.stderr();
    assert!(
        log.contains("the link with the MASTER is down") && log.contains("RDMA"),
        "{log}"
    );
    // No TCP link was made meanwhile.
    assert_eq!(stat(&mut master, "sync_full"), 0);
    assert_eq!(
        info_field(&mut master, "replication", "connected_slaves").as_deref(),
        Some("0")
    );
    assert!(matches!(
        replica.call(&["CONFIG", "SET", "repl-transport", "udp"]),
        Reply::Error(_)
    ));
    ok(&mut replica, &["CONFIG", "SET", "repl-transport", "tcp"]);
    wait_link_up(&mut replica);
    assert_eq!(
        field(&mut replica, "master_link_transport").as_deref(),
        Some("tcp")
    );
    assert_eq!(replica.call(&["GET", "k"]), Reply::bulk("v"));
}

/// Function libraries from redis-server: its RDB's FUNCTION2 records replace ours (a
/// library only the replica had is gone), then its FUNCTION commands stream verbatim
/// (FUNCTION RESTORE with Redis's payload included); read-only functions run here.
#[test]
fn functions_replicate_from_redis() {
    use repl_util::{assert_same_libraries, function_commands, LIB1};
    let dir = TempDir::new("replica");
    let redis = Redis::start(
        dir.path(),
        &[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    let mut master = redis.connect();
    assert_eq!(
        master.call(&["FUNCTION", "LOAD", LIB1]),
        Reply::bulk("lib1")
    );
    ok(&mut master, &["SET", "fk", "hello"]);
    let replica = Server::start(&["--shards", "2"]);
    let mut conn = replica.connect();
    let stale = "#!lua name=stale\nredis.register_function('s', function() return 1 end)";
    assert_eq!(
        conn.call(&["FUNCTION", "LOAD", stale]),
        Reply::bulk("stale")
    );
    let port = redis.port.to_string();
    assert_eq!(conn.call(&["REPLICAOF", "127.0.0.1", &port]), Reply::ok());
    wait_link_up(&mut conn);
    assert_same_libraries(&mut master, &mut conn, 1);
    assert_eq!(
        conn.call(&["FCALL_RO", "get1", "1", "fk"]),
        Reply::bulk("hello")
    );
    assert_eq!(
        conn.call(&["FCALL", "get1", "1", "fk"]),
        Reply::bulk("hello")
    );
    assert_eq!(
        conn.call(&["FCALL", "set1", "1", "fk", "x"]),
        Reply::Error("READONLY You can't write against a read only replica.".into())
    );
    // A script without flags runs; its write fails.
    let legacy = conn.call(&["EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "fk"]);
    assert!(
        matches!(&legacy, Reply::Error(e) if e.starts_with("READONLY You can't write against a read only replica.")),
        "{legacy:?}"
    );
    assert_eq!(
        conn.call(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "fk"]),
        Reply::bulk("hello")
    );
    function_commands(&mut master, &mut conn, |m| {
        assert_eq!(int(m, &["WAIT", "1", "10000"]), 1);
    });
}

/// Peak and current resident memory of process `pid`, in MiB.
fn memory_mib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            / 1024
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// A snapshot much larger than the replica's buffers (64 MiB, uncompressed, in 1 MiB
/// values) is spooled to a temporary file in `dir` and loaded piece by piece: the replica's
/// peak memory grows by about the data it keeps, not by the snapshot on top of it, and the
/// temporary file is gone afterwards.
#[test]
fn a_large_snapshot_loads_in_bounded_memory() {
    const KEYS: usize = 64;
    let dir = TempDir::new("replica");
    let redis = Redis::start(dir.path(), &["--rdbcompression", "no"]);
    let mut master = redis.connect();
    for i in 0..KEYS {
        let value = format!("{i:08}").repeat(1 << 17);
        ok(&mut master, &["SET", &format!("big:{i}"), &value]);
    }
    let spool = TempDir::new("spool");
    let replica = Server::start(&["--shards", "2", "--dir", spool.path().to_str().unwrap()]);
    let mut conn = replica.connect();
    let (_, before) = memory_mib(replica.pid());
    let port = redis.port.to_string();
    assert_eq!(conn.call(&["REPLICAOF", "127.0.0.1", &port]), Reply::ok());
    // A debug build on a busy machine loads slowly.
    let up = eventually(Duration::from_secs(120), || {
        info_field(&mut conn, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert!(up, "the link never came up:\n{}", replica.stderr());
    assert_eq!(int(&mut conn, &["DBSIZE"]), KEYS as i64);
    assert_eq!(
        conn.call(&["STRLEN", "big:7"]),
        Reply::Int(1 << 20),
        "the values arrived whole"
    );
    let (peak, now) = memory_mib(replica.pid());
    // MiB: one per key.
    let data = KEYS as u64;
    // Holding the snapshot in memory would have cost `data` more at the peak.
    assert!(
        peak < before + data + data / 2,
        "peak {peak} MiB, {before} MiB before the sync, {now} MiB after, {data} MiB of data"
    );
    let left: Vec<_> = std::fs::read_dir(spool.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// `bind-source-addr`: the replica connects to its master from that address, so the master
/// lists it there (Redis's `networking` test, with a redis-server master).
#[test]
fn bind_source_addr_is_the_address_the_master_sees() {
    let dir = TempDir::new("replica-source");
    let redis = Redis::start(dir.path(), &[]);
    let mut master = redis.connect();
    // Redis's protected mode counts only 127.0.0.1 as local.
    ok(&mut master, &["CONFIG", "SET", "protected-mode", "no"]);
    let replica = Server::start(&["--shards", "2"]);
    let mut conn = replica.connect();
    ok(
        &mut conn,
        &["CONFIG", "SET", "bind-source-addr", "127.0.0.2"],
    );
    ok(
        &mut conn,
        &["REPLICAOF", "127.0.0.1", &redis.port.to_string()],
    );
    wait_link_up(&mut conn);
    let slave0 = info_field(&mut master, "replication", "slave0").unwrap_or_default();
    assert!(slave0.starts_with("ip=127.0.0.2,"), "{slave0}");
}
