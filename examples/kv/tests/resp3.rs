//! HELLO and RESP3 against `redis-server` (the oracle): the handshake, its errors, then
//! generated commands of every type compared reply by reply in RESP3 (maps, sets, doubles,
//! nulls, verbatim text), transactions, and Pub/Sub push messages.
//!
//! Reproduce a failure with `DIFF_SEED=<seed> cargo test -p corewire-kv --test resp3`.

mod common;
mod diff;

use diff::gen::Gen;
use diff::resp::V;
use diff::{args, servers, Cmp, Conn, Pair};

/// HELLO's map, with the fields that differ by design (version, id) blanked.
fn handshake(conn: &mut Conn, request: &[&str]) -> V {
    match conn.call_str(request) {
        V::Map(mut items) => {
            for pair in items.chunks_mut(2) {
                if matches!(&pair[0], V::Bulk(k) if k == b"version" || k == b"id") {
                    pair[1] = V::Null;
                }
            }
            V::Map(items)
        }
        V::Array(mut items) => {
            for pair in items.chunks_mut(2) {
                if matches!(&pair[0], V::Bulk(k) if k == b"version" || k == b"id") {
                    pair[1] = V::Null;
                }
            }
            V::Array(items)
        }
        other => other,
    }
}

#[test]
fn hello_matches_redis() {
    let (oracle, server) = servers(3, &[]);
    let mut redis = Conn::connect(oracle.port);
    let mut kv = Conn::connect(server.port);
    for request in [
        &["HELLO"][..],
        &["HELLO", "2"],
        &["HELLO", "3"],
        &["HELLO"],
        &["HELLO", "2", "SETNAME", "me"],
        &["HELLO", "3", "AUTH", "default", "any"],
    ] {
        assert_eq!(
            handshake(&mut redis, request).show(),
            handshake(&mut kv, request).show(),
            "{request:?}"
        );
    }
    let mut pair = Pair::new(&oracle, &server, "hello errors");
    for request in [
        &["HELLO", "4"][..],
        &["HELLO", "x"],
        &["HELLO", "3", "AUTH", "someone", "pw"],
        &["HELLO", "3", "AUTH", "default"],
        &["HELLO", "3", "SETNAME", "a b"],
        &["HELLO", "3", "BOGUS"],
        &["CLIENT", "GETNAME"],
    ] {
        pair.check_str(request);
    }
}

/// Generated commands of every type, both servers in RESP3.
#[test]
fn generated_commands_match_redis_in_resp3() {
    let (oracle, server) = servers(3, &[]);
    for seed in diff::seeds(&[41, 42]) {
        let mut pair = Pair::new(&oracle, &server, format!("resp3 seed {seed}"));
        pair.check(&args(&["HELLO", "3"]), Cmp::Ignore);
        pair.check_str(&["FLUSHALL"]);
        let mut gen = Gen::new(seed);
        for _ in 0..diff::steps(3_000) {
            let step = match gen.rng.weighted(&[12, 6, 3, 1]) {
                0 => gen.collections(),
                1 => gen.strings(),
                2 => gen.keyspace(),
                _ => gen.errors(),
            };
            pair.run(&step);
        }
        pair.report();
    }
}

/// A script's booleans: without `redis.setresp(3)` true is 1 and false a null in the
/// caller's protocol; after it, booleans (1 and 0 to a RESP2 caller).
#[test]
fn script_booleans_match_redis_in_both_protocols() {
    let (oracle, server) = servers(3, &[]);
    let mut pair = Pair::new(&oracle, &server, "script booleans");
    for protocol in ["3", "2"] {
        pair.check(&args(&["HELLO", protocol]), Cmp::Ignore);
        for script in [
            "return false",
            "return true",
            "return {1, false, true}",
            "redis.setresp(3); return false",
            "redis.setresp(3); return {true, false, {double=1.5}}",
            "redis.setresp(3); redis.setresp(2); return {false}",
            "redis.setresp(3); return redis.call('get', 'nosuchkey') == nil",
        ] {
            pair.check_str(&["EVAL", script, "0"]);
        }
    }
    pair.report();
}

#[test]
fn transactions_and_info_in_resp3() {
    let (oracle, server) = servers(3, &[]);
    let mut pair = Pair::new(&oracle, &server, "resp3 fixed");
    pair.check(&args(&["HELLO", "3"]), Cmp::Ignore);
    for step in [
        &["FLUSHALL"][..],
        &["ZADD", "{z}s", "1.5", "a", "2", "b", "inf", "c"],
        &["HSET", "{z}h", "f", "v"],
        &["SADD", "{z}t", "x"],
        &["MULTI"],
        &["ZSCORE", "{z}s", "a"],
        &["ZRANGE", "{z}s", "0", "-1", "WITHSCORES"],
        &["HGETALL", "{z}h"],
        &["SMEMBERS", "{z}t"],
        &["GET", "nothing"],
        &["ZPOPMIN", "{z}s"],
        &["ZPOPMAX", "{z}s", "5"],
        &["ZMSCORE", "{z}s", "a", "zz"],
        &["ZINCRBY", "{z}s", "2", "q"],
        &["ZADD", "{z}s", "INCR", "1", "q"],
        &["EXEC"],
        &["HRANDFIELD", "{z}h", "1", "WITHVALUES"],
        &["CONFIG", "GET", "appendonly"],
    ] {
        pair.check_str(step);
    }
    // INFO's text differs by design; its type is compared.
    let redis = pair.redis.call_str(&["INFO", "keyspace"]);
    let kv = pair.kv.call_str(&["INFO", "keyspace"]);
    assert_eq!((redis.kind(), kv.kind()), (b'=', b'='));
    // Introspection's nested maps and sets.
    for step in [
        &["COMMAND", "INFO", "get", "lmove"][..],
        &["COMMAND", "DOCS", "hdel", "getset"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "lmove",
            "a",
            "b",
            "left",
            "right",
        ],
        &["CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP"],
        &["CLIENT", "CACHING", "YES"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "OFF"],
        &["CONFIG", "RESETSTAT"],
        &["LATENCY", "HISTOGRAM", "nosuch"],
    ] {
        pair.check_str(step);
    }
    // Their shape where the numbers differ by nature.
    for step in [
        &["LATENCY", "HISTOGRAM", "config|resetstat"][..],
        &["MEMORY", "STATS"],
        &["MEMORY", "DOCTOR"],
        &["LATENCY", "DOCTOR"],
    ] {
        let redis = pair.redis.call_str(step);
        let kv = pair.kv.call_str(step);
        assert_eq!(
            redis.kind(),
            kv.kind(),
            "{step:?}: {} vs {}",
            redis.show(),
            kv.show()
        );
    }
}

#[test]
fn pubsub_pushes_match_redis_in_resp3() {
    let (oracle, server) = servers(3, &[]);
    let mut out = Vec::new();
    for port in [oracle.port, server.port] {
        let mut sub = Conn::connect(port);
        let mut publisher = Conn::connect(port);
        let mut replies = Vec::new();
        sub.call_str(&["HELLO", "3"]);
        replies.push(sub.call_str(&["SUBSCRIBE", "c1"]));
        replies.push(sub.call_str(&["PSUBSCRIBE", "c*"]));
        // Any command works while subscribed in RESP3.
        replies.push(sub.call_str(&["SET", "k", "v"]));
        replies.push(sub.call_str(&["PING"]));
        replies.push(publisher.call_str(&["PUBLISH", "c1", "hi"]));
        replies.push(sub.read());
        replies.push(sub.read());
        replies.push(sub.call_str(&["UNSUBSCRIBE"]));
        replies.push(sub.call_str(&["PUNSUBSCRIBE"]));
        out.push(replies.iter().map(V::show).collect::<Vec<_>>());
    }
    assert_eq!(out[0], out[1], "redis-server vs corewire-kv");
}
