//! Streams in RDB against redis-server 7.0 itself (`STREAM_LISTPACKS_2`): our SAVE passes
//! redis-check-rdb and loads into redis-server, redis-server's dump loads into corewire-kv,
//! and DUMP payloads move both ways, each with the same XINFO STREAM FULL (entries, deleted
//! entries' metadata, groups, PELs with delivery times and counts, consumers' seen times),
//! XRANGE and XINFO GROUPS on both sides.

mod common;
mod rdb_util;

use std::path::Path;
use std::process::Command;

use common::{require_tool, Reply, Resp, Server, TempDir};
use corewire_kv::rdb;
use rdb_util::Redis;

const KEYS: &[&str] = &["s:small", "s:big", "s:empty", "s:emptied", "s:ttl"];

fn call(conn: &mut Resp, args: &[&str]) -> Reply {
    let reply = conn.call(args);
    assert!(!matches!(reply, Reply::Error(_)), "{args:?}: {reply:?}");
    reply
}

/// Streams of every shape, with fixed IDs so both servers hold the same ones: deleted
/// entries, entries with other fields than their node's first, several nodes (100 entries
/// each by default), exact trimming inside a node, groups with PELs over several nodes,
/// consumers with and without pending entries, empty streams with and without history, a TTL.
fn workload(conn: &mut Resp) {
    call(conn, &["XADD", "s:small", "1-1", "f", "v", "g", "2"]);
    call(conn, &["XADD", "s:small", "1-5", "f", "v2", "g", "3"]);
    call(conn, &["XADD", "s:small", "2-0", "other", "x"]);
    call(conn, &["XADD", "s:small", "3-0", "f", "-12", "g", ""]);
    call(conn, &["XDEL", "s:small", "1-5"]);
    call(conn, &["XGROUP", "CREATE", "s:small", "g1", "0"]);
    call(
        conn,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "s:small",
            ">",
        ],
    );
    call(conn, &["XGROUP", "CREATECONSUMER", "s:small", "g1", "bob"]);
    call(conn, &["XGROUP", "CREATE", "s:small", "g2", "$"]);

    let value = "a value long enough to compress ".repeat(3);
    for i in 1..=1000u64 {
        let id = big_id(i);
        let n = i.to_string();
        if i % 97 == 0 {
            call(conn, &["XADD", "s:big", &id, "odd", &n]);
        } else {
            call(conn, &["XADD", "s:big", &id, "n", &n, "payload", &value]);
        }
    }
    call(conn, &["XTRIM", "s:big", "MAXLEN", "=", "950"]);
    call(
        conn,
        &["XDEL", "s:big", &big_id(200), &big_id(500), &big_id(777)],
    );
    call(conn, &["XGROUP", "CREATE", "s:big", "readers", "0"]);
    call(
        conn,
        &[
            "XREADGROUP",
            "GROUP",
            "readers",
            "r1",
            "COUNT",
            "250",
            "STREAMS",
            "s:big",
            ">",
        ],
    );
    call(
        conn,
        &[
            "XREADGROUP",
            "GROUP",
            "readers",
            "r2",
            "COUNT",
            "30",
            "STREAMS",
            "s:big",
            ">",
        ],
    );
    let acked = [big_id(100), big_id(101), big_id(290)];
    call(
        conn,
        &["XACK", "s:big", "readers", &acked[0], &acked[1], &acked[2]],
    );
    call(
        conn,
        &[
            "XCLAIM",
            "s:big",
            "readers",
            "r3",
            "0",
            &big_id(102),
            "RETRYCOUNT",
            "9",
        ],
    );
    call(
        conn,
        &[
            "XGROUP",
            "CREATE",
            "s:big",
            "late",
            "1500-0",
            "ENTRIESREAD",
            "400",
        ],
    );

    call(conn, &["XGROUP", "CREATE", "s:empty", "g", "$", "MKSTREAM"]);
    call(conn, &["XADD", "s:emptied", "5-5", "f", "v"]);
    call(conn, &["XDEL", "s:emptied", "5-5"]);
    call(conn, &["XADD", "s:ttl", "7-0", "f", "v"]);
    call(conn, &["PEXPIRE", "s:ttl", "3600000"]);
}

/// The ID of the `i`th entry of `s:big`.
fn big_id(i: u64) -> String {
    format!("{}-{}", 1000 + i, i % 7)
}

/// What a stream looks like through the commands: XINFO STREAM FULL (every entry and
/// pending entry), XRANGE, XINFO GROUPS, TYPE and the TTL to within a minute.
fn view(conn: &mut Resp, key: &str) -> Vec<Reply> {
    let ttl_minutes = match call(conn, &["PTTL", key]) {
        Reply::Int(ms) if ms > 0 => (ms + 30_000) / 60_000,
        Reply::Int(ms) => ms,
        other => panic!("PTTL {key}: {other:?}"),
    };
    vec![
        call(conn, &["TYPE", key]),
        strip_rax_nodes(call(conn, &["XINFO", "STREAM", key, "FULL", "COUNT", "0"])),
        call(conn, &["XRANGE", key, "-", "+"]),
        call(conn, &["XINFO", "GROUPS", key]),
        Reply::Int(ttl_minutes),
    ]
}

/// XINFO STREAM FULL without `radix-tree-nodes` (the rax's inner nodes: Redis's memory
/// layout, which corewire-kv's B-tree does not have; `radix-tree-keys`, the listpack
/// nodes, stays).
fn strip_rax_nodes(reply: Reply) -> Reply {
    let Reply::Array(Some(items)) = reply else {
        return reply;
    };
    let mut out = Vec::new();
    for pair in items.chunks(2) {
        if pair[0] != Reply::bulk("radix-tree-nodes") {
            out.extend_from_slice(pair);
        }
    }
    Reply::Array(Some(out))
}

fn views(conn: &mut Resp) -> Vec<(String, Vec<Reply>)> {
    KEYS.iter()
        .map(|key| (key.to_string(), view(conn, key)))
        .collect()
}

fn check_rdb(path: &Path) {
    require_tool("redis-check-rdb");
    let out = Command::new("redis-check-rdb").arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RDB looks OK!"),
        "redis-check-rdb {}: {text}{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kv(dir: &TempDir, shards: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--shards", shards, "--dir", dir.arg(), "--save", ""];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// Our SAVE of streams passes redis-check-rdb, and redis-server started on it shows the
/// same streams; on 1 and 4 shards.
#[test]
fn our_streams_load_into_redis_server() {
    for shards in ["1", "4"] {
        let dir = TempDir::new("rdb-streams-ours");
        let server = kv(&dir, shards, &["--dbfilename", "kv.rdb"]);
        let mut conn = server.connect();
        workload(&mut conn);
        let ours = views(&mut conn);
        assert_eq!(call(&mut conn, &["SAVE"]), Reply::ok());
        let path = dir.path().join("kv.rdb");
        check_rdb(&path);
        let redis = Redis::start(dir.path(), &["--dbfilename", "kv.rdb"]);
        assert_eq!(views(&mut redis.connect()), ours, "{shards} shards");
    }
}

/// redis-server's dump with streams and groups loads into corewire-kv with the same
/// streams, and corewire-kv's DUMP of each holds what redis-server's holds (the same nodes,
/// deleted entries, metadata and groups; the bytes may differ where LZF finds other
/// matches).
#[test]
fn redis_streams_load_into_corewire_kv() {
    let dir = TempDir::new("rdb-streams-theirs");
    let redis = Redis::start(dir.path(), &["--dbfilename", "dump.rdb"]);
    let mut theirs = redis.connect();
    workload(&mut theirs);
    let expected = views(&mut theirs);
    assert_eq!(call(&mut theirs, &["SAVE"]), Reply::ok());
    for shards in ["1", "4"] {
        let server = kv(&dir, shards, &[]);
        let mut ours = server.connect();
        assert_eq!(views(&mut ours), expected, "{shards} shards");
        for key in KEYS {
            assert_eq!(
                decoded_dump(&mut ours, key),
                decoded_dump(&mut theirs, key),
                "{key}"
            );
        }
    }
}

/// `key`'s DUMP payload, decoded.
fn decoded_dump(conn: &mut Resp, key: &str) -> rdb::RdbValue {
    let Reply::Bulk(Some(payload)) = call(conn, &["DUMP", key]) else {
        panic!("DUMP {key}");
    };
    rdb::decode_dump(&payload).unwrap_or_else(|e| panic!("DUMP {key}: {e:?}"))
}

/// A request with binary arguments (DUMP payloads are not UTF-8).
fn call_bytes(conn: &mut Resp, args: &[&[u8]]) -> Reply {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    conn.send(&out).unwrap();
    conn.read().unwrap()
}

/// redis-server's DUMP of each stream RESTOREs into corewire-kv with the same streams, and
/// corewire-kv's DUMP of it RESTOREs back into redis-server under another name, the same.
#[test]
fn stream_payloads_move_both_ways() {
    let dir = TempDir::new("rdb-streams-dump");
    let redis = Redis::start(dir.path(), &[]);
    let mut theirs = redis.connect();
    workload(&mut theirs);
    let server = kv(&dir, "2", &[]);
    let mut ours = server.connect();
    for key in KEYS {
        let Reply::Bulk(Some(payload)) = call(&mut theirs, &["DUMP", key]) else {
            panic!("DUMP {key}");
        };
        let Reply::Int(pttl) = call(&mut theirs, &["PTTL", key]) else {
            panic!("PTTL {key}");
        };
        let ttl = pttl.max(0).to_string();
        let restore = [b"RESTORE", key.as_bytes(), ttl.as_bytes(), &payload[..]];
        assert_eq!(call_bytes(&mut ours, &restore), Reply::ok(), "{key}");
        assert_eq!(view(&mut ours, key), view(&mut theirs, key), "{key}");
        let Reply::Bulk(Some(back)) = call(&mut ours, &["DUMP", key]) else {
            panic!("our DUMP {key}");
        };
        assert_eq!(
            rdb::decode_dump(&back),
            rdb::decode_dump(&payload),
            "{key}: our DUMP of what redis-server dumped"
        );
        let copy = format!("copy:{key}");
        let restore = [b"RESTORE", copy.as_bytes(), ttl.as_bytes(), &back[..]];
        assert_eq!(call_bytes(&mut theirs, &restore), Reply::ok(), "{key}");
        assert_eq!(
            view(&mut theirs, &copy)[1..],
            view(&mut ours, key)[1..],
            "{key}"
        );
    }
    // The restored streams take writes, group reads and trimming as redis-server's do.
    let mut after = Vec::new();
    for conn in [&mut ours, &mut theirs] {
        call(conn, &["XADD", "s:big", "5000-0", "n", "new"]);
        call(
            conn,
            &[
                "XREADGROUP",
                "GROUP",
                "late",
                "c",
                "COUNT",
                "5",
                "STREAMS",
                "s:big",
                ">",
            ],
        );
        call(conn, &["XTRIM", "s:big", "MAXLEN", "~", "500"]);
    }
    // Delivery times now differ: XINFO STREAM without FULL, XRANGE, XINFO GROUPS.
    for conn in [&mut ours, &mut theirs] {
        let summary = strip_rax_nodes(call(conn, &["XINFO", "STREAM", "s:big"]));
        let mut seen = view(conn, "s:big");
        seen[1] = summary;
        after.push(seen);
    }
    assert_eq!(after[0], after[1]);
}

/// A dump corewire-kv wrote before it wrote streams as Redis does (corewire's own value
/// kind 224, the commands that rebuild the stream) still loads.
#[test]
fn streams_of_the_commands_kind_still_load() {
    use corewire_kv::rdb::{crc64, encode, Limits, ObjectRef, RdbWriter};
    let dir = TempDir::new("rdb-streams-224");
    let mut records = Vec::new();
    for args in [
        &["XADD", "1-1", "f", "v"][..],
        &["XADD", "2-0", "f", "w"],
        &["XSETID", "2-0", "ENTRIESADDED", "2", "MAXDELETEDID", "0-0"],
        &["XGROUP", "CREATE", "g", "0", "ENTRIESREAD", "0"],
    ] {
        records.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            records.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
    }
    let mut file = Vec::new();
    RdbWriter::header(&mut file, 1, 1);
    RdbWriter::select_db(&mut file, 0, 1, 0);
    let object = ObjectRef::Commands(records);
    encode::write_key(&mut file, b"s", &object, None, &Limits::default());
    let crc = crc64::crc64(&file);
    RdbWriter::finish(&mut file, crc);
    std::fs::write(dir.path().join("dump.rdb"), &file).unwrap();
    let server = kv(&dir, "1", &[]);
    let mut conn = server.connect();
    assert_eq!(call(&mut conn, &["XLEN", "s"]), Reply::Int(2));
    let Reply::Array(Some(groups)) = call(&mut conn, &["XINFO", "GROUPS", "s"]) else {
        panic!("XINFO GROUPS");
    };
    assert_eq!(groups.len(), 1);
}
