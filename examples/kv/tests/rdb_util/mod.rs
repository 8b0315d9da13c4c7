//! Helpers for `tests/rdb.rs`: a redis-server 7.0 child on a free loopback port, a workload
//! that writes every type in its small and large encodings, and a content listing made with
//! ordinary commands (TYPE, GET, LRANGE, HGETALL, SMEMBERS, ZRANGE WITHSCORES, PTTL) to
//! compare two servers.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::common::{eventually, require_tool, Reply, Resp};

/// A redis-server child; killed when dropped.
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    /// Starts redis-server with `--dir dir` and `args`; waits until it answers PING.
    pub fn start(dir: &Path, args: &[&str]) -> Redis {
        Redis::try_start(dir, args).unwrap_or_else(|e| panic!("redis-server did not start: {e}"))
    }

    pub fn try_start(dir: &Path, args: &[&str]) -> Result<Redis, String> {
        require_tool("redis-server");
        let port = free_port();
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--dir",
                dir.to_str().unwrap(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let up = eventually(Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                && matches!(Resp::connect(port).call(&["PING"]), Reply::Simple(ref s) if s == "PONG")
        });
        if !up {
            let _ = child.kill();
            let _ = child.wait();
            return Err("no PONG within 20 s".into());
        }
        Ok(Redis { child, port })
    }

    pub fn connect(&self) -> Resp {
        Resp::connect(self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn call_ok(conn: &mut Resp, args: &[&str]) {
    let reply = conn.call(args);
    assert!(!matches!(reply, Reply::Error(_)), "{args:?}: {reply:?}");
}

/// Writes keys of every type, small and large, with integers, binary-ish text, expiries.
pub fn workload(conn: &mut Resp) {
    let big = "v".repeat(100);
    let compressible = "abcdefgh".repeat(40);
    // Strings: int-encoded, raw, LZF, empty, with TTLs.
    for (k, v) in [
        ("s:int8", "12"),
        ("s:int16", "-3000"),
        ("s:int32", "1234567"),
        ("s:bigint", "12345678901234"),
        ("s:lead0", "0012"),
        ("s:empty", ""),
        ("s:text", "hello world"),
        ("s:lzf", compressible.as_str()),
        ("s:crlf", "a\r\nb\0c"),
    ] {
        call_ok(conn, &["SET", k, v]);
    }
    call_ok(conn, &["SET", "s:ttl", "x", "EX", "10000"]);
    call_ok(conn, &["SET", "s:pttl", "y", "PX", "5000000"]);
    // Lists: one small node, many nodes, big elements.
    call_ok(
        conn,
        &["RPUSH", "l:small", "a", "1", "-2", "300000", "", "b"],
    );
    let many: Vec<String> = (0..3000).map(|i| format!("item-{i}")).collect();
    let mut args = vec!["RPUSH", "l:many"];
    args.extend(many.iter().map(String::as_str));
    call_ok(conn, &args);
    call_ok(
        conn,
        &["RPUSH", "l:big", &compressible, &"z".repeat(10_000), "tail"],
    );
    call_ok(conn, &["EXPIRE", "l:small", "9000"]);
    // Sets: intset, plain (text), plain (too many ints).
    call_ok(
        conn,
        &[
            "SADD",
            "set:ints",
            "1",
            "-5",
            "70000",
            "9223372036854775807",
        ],
    );
    call_ok(conn, &["SADD", "set:text", "a", "b", "1"]);
    let ints: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    let mut args = vec!["SADD", "set:manyints"];
    args.extend(ints.iter().map(String::as_str));
    call_ok(conn, &args);
    // Hashes: listpack, plain (long value), plain (many fields).
    call_ok(conn, &["HSET", "h:small", "f", "v", "n", "42", "neg", "-7"]);
    call_ok(conn, &["HSET", "h:longval", "f", &big]);
    let fields: Vec<String> = (0..200)
        .flat_map(|i| [format!("f{i}"), i.to_string()])
        .collect();
    let mut args = vec!["HSET", "h:many"];
    args.extend(fields.iter().map(String::as_str));
    call_ok(conn, &args);
    call_ok(conn, &["PEXPIRE", "h:many", "7000000"]);
    // Sorted sets: listpack, skiplist (many), skiplist (long member), special scores.
    call_ok(
        conn,
        &[
            "ZADD", "z:small", "1", "a", "2.5", "b", "-3", "c", "0.1", "d",
        ],
    );
    call_ok(
        conn,
        &[
            "ZADD", "z:inf", "inf", "top", "-inf", "bottom", "1e300", "huge",
        ],
    );
    let members: Vec<String> = (0..300)
        .flat_map(|i| [format!("{}", i as f64 / 7.0), format!("m{i}")])
        .collect();
    let mut args = vec!["ZADD", "z:many"];
    args.extend(members.iter().map(String::as_str));
    call_ok(conn, &args);
    call_ok(conn, &["ZADD", "z:longmember", "5", &big]);
}

/// What a key holds, read with ordinary commands.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyContent {
    pub kind: String,
    pub value: Vec<Vec<u8>>,
    /// Whether the key has a TTL, and roughly how long: minutes, rounded down to a multiple
    /// of 10. The workloads' TTLs sit at least 200 s above a multiple of 10 minutes (or
    /// cross one within a millisecond), so a slow run reads the same value on both servers;
    /// rounding to the minute gave a boundary 10 s after the write.
    pub ttl_minutes: Option<i64>,
}

/// [`KeyContent::ttl_minutes`] of a TTL of `pttl_ms` milliseconds.
pub fn ttl_bucket(pttl_ms: i64) -> i64 {
    pttl_ms / 600_000 * 10
}

fn bulk_items(reply: Reply) -> Vec<Vec<u8>> {
    match reply {
        Reply::Array(Some(items)) => items
            .into_iter()
            .map(|item| match item {
                Reply::Bulk(Some(b)) => b,
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Every key's content.
pub fn contents(conn: &mut Resp) -> BTreeMap<Vec<u8>, KeyContent> {
    let keys = bulk_items(conn.call(&["KEYS", "*"]));
    let mut out = BTreeMap::new();
    for key in keys {
        let k = std::str::from_utf8(&key).unwrap().to_owned();
        let Reply::Simple(kind) = conn.call(&["TYPE", &k]) else {
            panic!("TYPE");
        };
        let value = match kind.as_str() {
            // Gone since KEYS (a replica applying its stream): not part of this reading.
            "none" => continue,
            "string" => match conn.call(&["GET", &k]) {
                Reply::Bulk(Some(v)) => vec![v],
                other => panic!("GET {k}: {other:?}"),
            },
            "list" => bulk_items(conn.call(&["LRANGE", &k, "0", "-1"])),
            "set" => {
                let mut m = bulk_items(conn.call(&["SMEMBERS", &k]));
                m.sort();
                m
            }
            "hash" => {
                let flat = bulk_items(conn.call(&["HGETALL", &k]));
                let mut pairs: Vec<Vec<u8>> = flat
                    .chunks(2)
                    .map(|p| [p[0].clone(), b"=".to_vec(), p[1].clone()].concat())
                    .collect();
                pairs.sort();
                pairs
            }
            "zset" => bulk_items(conn.call(&["ZRANGE", &k, "0", "-1", "WITHSCORES"])),
            other => panic!("type {other} of {k}"),
        };
        let pttl = match conn.call(&["PTTL", &k]) {
            Reply::Int(pttl) => pttl,
            other => panic!("PTTL {k}: {other:?}"),
        };
        let ttl_minutes = (pttl >= 0).then(|| ttl_bucket(pttl));
        out.insert(
            key,
            KeyContent {
                kind,
                value,
                ttl_minutes,
            },
        );
    }
    out
}
