//! `redis-cli` drives a real corewire-kv process: the server must be usable by stock Redis
//! tools, unchanged.

mod common;

use std::time::Duration;

use common::{eventually, require_tool, Server, TempDir};

#[test]
fn string_commands_through_redis_cli() {
    require_tool("redis-cli");
    let server = Server::start(&["--shards", "2"]);
    let cli = |args: &[&str]| server.cli(args);
    // redis-cli prints a blank line after an error reply.
    let error = |args: &[&str]| cli(args).trim_end().to_owned();

    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "greeting", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "greeting"]), "hello world");
    assert_eq!(cli(&["GET", "missing"]), "");
    assert_eq!(cli(&["INCR", "counter"]), "1");
    assert_eq!(cli(&["INCRBY", "counter", "41"]), "42");
    assert_eq!(cli(&["DECR", "counter"]), "41");
    assert_eq!(cli(&["APPEND", "greeting", "!"]), "12");
    assert_eq!(cli(&["STRLEN", "greeting"]), "12");

    // Keys chosen to spread over both shards, so MSET/MGET/DEL fan out and merge.
    assert_eq!(cli(&["MSET", "a", "1", "b", "2", "c", "3", "d", "4"]), "OK");
    assert_eq!(cli(&["MGET", "a", "b", "nope", "c", "d"]), "1\n2\n\n3\n4");
    assert_eq!(cli(&["EXISTS", "a", "b", "nope"]), "2");
    assert_eq!(cli(&["DEL", "a", "c", "nope"]), "2");
    assert_eq!(cli(&["MGET", "a", "b", "c"]), "\n2\n");
    // greeting, counter, b, d
    assert_eq!(cli(&["DBSIZE"]), "4");

    assert_eq!(cli(&["TTL", "b"]), "-1");
    assert_eq!(cli(&["TTL", "nope"]), "-2");
    assert_eq!(cli(&["EXPIRE", "b", "100"]), "1");
    let ttl: i64 = cli(&["TTL", "b"]).parse().unwrap();
    assert!((90..=100).contains(&ttl), "TTL {ttl}");
    let pttl: i64 = cli(&["PTTL", "b"]).parse().unwrap();
    assert!((90_000..=100_000).contains(&pttl), "PTTL {pttl}");
    assert_eq!(cli(&["PERSIST", "b"]), "1");
    assert_eq!(cli(&["TTL", "b"]), "-1");

    // A short TTL really expires (lazily on read, or by the sweep).
    assert_eq!(cli(&["SET", "short", "x", "PX", "50"]), "OK");
    assert!(eventually(Duration::from_secs(30), || cli(&[
        "GET", "short"
    ])
    .is_empty()));
    assert_eq!(cli(&["SET", "swept", "x", "PX", "30"]), "OK");
    assert!(
        eventually(Duration::from_secs(30), || cli(&["DBSIZE"]) == "4"),
        "the sweep never removed the expired key"
    );

    // Redis's exact error wording.
    assert_eq!(
        error(&["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        error(&["SET", "k"]),
        "ERR wrong number of arguments for 'set' command"
    );
    assert_eq!(
        error(&["INCR", "greeting"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&["EXPIRE", "b", "soon"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&["NOSUCHCOMMAND", "x"]),
        "ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'x'"
    );
    assert_eq!(error(&["SET", "k", "v", "NX", "XX"]), "ERR syntax error");

    assert_eq!(cli(&["CONFIG", "GET", "appendonly"]), "appendonly\nno");
    assert_eq!(cli(&["FLUSHALL"]), "OK");
    assert_eq!(cli(&["DBSIZE"]), "0");
}

#[test]
fn info_reports_every_shard() {
    require_tool("redis-cli");
    let server = Server::start(&["--shards", "3"]);
    for i in 0..60 {
        assert_eq!(server.cli(&["SET", &format!("key:{i}"), "v"]), "OK");
    }
    let info = server.cli(&["INFO"]);
    for section in ["# Server", "# Clients", "# Stats", "# Keyspace", "# Shards"] {
        assert!(info.contains(section), "no {section} in:\n{info}");
    }
    assert!(info.contains("shards:3"), "{info}");
    assert!(info.contains("db0:keys=60,expires=0"), "{info}");
    assert!(
        info.contains(&format!("tcp_port:{}", server.port)),
        "{info}"
    );
    let shard_lines: Vec<&str> = info
        .lines()
        .filter(|l| l.starts_with("shard") && l.contains(":keys="))
        .collect();
    assert_eq!(shard_lines.len(), 3, "{info}");

    let keyspace = server.cli(&["INFO", "keyspace"]);
    assert_eq!(
        keyspace.replace("\r\n", "\n").trim_end(),
        "# Keyspace\ndb0:keys=60,expires=0,avg_ttl=0"
    );
}

#[test]
fn requirepass_gates_commands() {
    require_tool("redis-cli");
    let server = Server::start(&["--shards", "2", "--requirepass", "s3cret"]);
    assert_eq!(
        server.cli(&["GET", "k"]).trim_end(),
        "NOAUTH Authentication required."
    );
    // redis-cli reports the failed AUTH on stderr, then runs the command unauthenticated.
    assert_eq!(
        server
            .cli(&["-a", "wrong", "--no-auth-warning", "GET", "k"])
            .trim_end(),
        "NOAUTH Authentication required."
    );
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["AUTH", "wrong"]),
        common::Reply::Error(
            "WRONGPASS invalid username-password pair or user is disabled.".into()
        )
    );
    assert_eq!(conn.call(&["AUTH", "s3cret"]), common::Reply::ok());
    assert_eq!(conn.call(&["SET", "k", "v"]), common::Reply::ok());
    assert_eq!(
        server.cli(&["-a", "s3cret", "--no-auth-warning", "SET", "k", "v"]),
        "OK"
    );
    assert_eq!(
        server.cli(&["-a", "s3cret", "--no-auth-warning", "GET", "k"]),
        "v"
    );
}

/// `redis-cli --scan` (SCAN with its cursor), `KEYS` and `RANDOMKEY` see the keys of every
/// shard, and AOF-logged keyspace commands survive a restart.
#[test]
fn keyspace_commands_through_redis_cli() {
    require_tool("redis-cli");
    let dir = TempDir::new("keyspace-cli");
    let args = ["--shards", "3", "--aof", dir.arg(), "--fsync", "always"];
    let mut server = Server::start(&args);
    let cli = |args: &[&str]| server.cli(args);
    let mut expected = Vec::new();
    for i in 0..500 {
        let key = format!("key:{i}");
        assert_eq!(cli(&["SET", &key, "v"]), "OK");
        expected.push(key);
    }
    expected.sort();
    for pattern in ["*", "key:1*"] {
        let wanted: Vec<&String> = expected
            .iter()
            .filter(|k| pattern == "*" || k.starts_with("key:1"))
            .collect();
        let scanned = server.cli(&["--scan", "--pattern", pattern]);
        let mut scanned: Vec<&str> = scanned.lines().collect();
        scanned.sort();
        scanned.dedup();
        assert_eq!(scanned, wanted, "--scan --pattern {pattern}");
        let keys = cli(&["KEYS", pattern]);
        let mut keys: Vec<&str> = keys.lines().collect();
        keys.sort();
        assert_eq!(keys, wanted, "KEYS {pattern}");
    }
    assert!(cli(&["RANDOMKEY"]).starts_with("key:"));
    assert_eq!(cli(&["UNLINK", "key:1", "key:2", "key:3", "nope"]), "3");
    assert_eq!(
        cli(&["RENAME", "{t}a", "{t}b"]).trim_end(),
        "ERR no such key"
    );
    assert_eq!(cli(&["SETEX", "{t}a", "1000", "x"]), "OK");
    assert_eq!(cli(&["RENAME", "{t}a", "{t}b"]), "OK");
    assert_eq!(cli(&["COPY", "{t}b", "{t}c"]), "1");
    assert_eq!(cli(&["SETRANGE", "{t}c", "3", "yz"]), "5");
    assert_eq!(cli(&["INCRBYFLOAT", "f", "2.5"]), "2.5");
    assert_eq!(cli(&["MSETNX", "{t}m", "1", "{t}n", "2"]), "1");
    // An existing key: MSETNX writes nothing, whichever shards its keys live on.
    let replies: Vec<String> = (5..40)
        .map(|n| cli(&["MSETNX", "key:4", "v", &format!("key:{n}"), "v"]))
        .collect();
    assert!(replies.iter().all(|r| r == "0"), "{replies:?}");
    server.stop();

    let server = Server::start(&args);
    let cli = |args: &[&str]| server.cli(args);
    assert_eq!(cli(&["DBSIZE"]), "502");
    assert_eq!(cli(&["GET", "{t}c"]), "x\0\0yz");
    let ttl: i64 = cli(&["TTL", "{t}c"]).parse().unwrap();
    assert!(
        (900..=1000).contains(&ttl),
        "TTL {ttl} (the deadline survives the restart)"
    );
    assert_eq!(cli(&["EXISTS", "{t}a", "{t}b", "key:1"]), "1");
    assert_eq!(cli(&["GET", "f"]), "2.5");
    assert_eq!(cli(&["FLUSHDB"]), "OK");
    assert_eq!(cli(&["DBSIZE"]), "0");
}
