//! `--maxmemory` on a real server with two shards: `noeviction` refuses growth with Redis's
//! OOM error while reads and deletions still work; `allkeys-lru` and `allkeys-lfu` keep
//! every shard under its share by evicting, keep the key in use, and count evictions in INFO.

mod common;

use common::{Reply, Resp, Server};

const LIMIT: u64 = 1 << 20;

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

#[test]
fn noeviction_refuses_writes_past_the_limit() {
    let server = Server::start(&["--shards", "2", "--maxmemory", "1mb"]);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["CONFIG", "GET", "maxmemory", "maxmemory-policy"]),
        Reply::Array(Some(vec![
            Reply::bulk("maxmemory"),
            Reply::bulk(&LIMIT.to_string()),
            Reply::bulk("maxmemory-policy"),
            Reply::bulk("noeviction"),
        ]))
    );
    let value = "v".repeat(1_000);
    let mut written = 0;
    let refused = loop {
        match conn.call(&["SET", &format!("key:{written}"), &value]) {
            reply if reply == Reply::ok() => written += 1,
            other => break other,
        }
        assert!(written < 10_000, "the limit never took effect");
    };
    assert_eq!(
        refused,
        Reply::Error("OOM command not allowed when used memory > 'maxmemory'.".into())
    );
    // Each shard stops at its half; the other may still take a few keys.
    assert!(written > 500, "only {written} keys");
    let used = info_field(&mut conn, "memory", "used_memory_keyspace");
    assert!(
        used > LIMIT / 2 && used <= LIMIT + 4_096,
        "used_memory_keyspace {used}"
    );
    assert_eq!(conn.call(&["GET", "key:0"]), Reply::bulk(&value));
    let keys: Vec<String> = (0..written).map(|i| format!("key:{i}")).collect();
    let mut del = vec!["DEL"];
    del.extend(keys.iter().map(String::as_str));
    assert_eq!(conn.call(&del), Reply::Int(written as i64));
    assert_eq!(conn.call(&["SET", "key:again", &value]), Reply::ok());
    assert_eq!(info_field(&mut conn, "stats", "evicted_keys"), 0);
}

#[test]
fn eviction_policies_keep_shards_under_the_limit() {
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let server = Server::start(&[
            "--shards",
            "2",
            "--maxmemory",
            "1mb",
            "--maxmemory-policy",
            policy,
        ]);
        let mut conn = server.connect();
        assert_eq!(conn.call(&["SET", "hot", "1"]), Reply::ok());
        let value = "v".repeat(1_000);
        for i in 0..5_000 {
            assert_eq!(
                conn.call(&["SET", &format!("key:{i}"), &value]),
                Reply::ok()
            );
            assert_eq!(conn.call(&["GET", "hot"]), Reply::bulk("1"), "{policy}");
        }
        let used = info_field(&mut conn, "memory", "used_memory_keyspace");
        assert!(
            used <= LIMIT + 4_096,
            "{policy}: used_memory_keyspace {used}"
        );
        let evicted = info_field(&mut conn, "stats", "evicted_keys");
        let Reply::Int(keys) = conn.call(&["DBSIZE"]) else {
            panic!("DBSIZE");
        };
        assert_eq!(keys as u64 + evicted, 5_001, "{policy}");
        assert!(evicted > 3_000, "{policy}: {evicted} evicted");
    }
}
