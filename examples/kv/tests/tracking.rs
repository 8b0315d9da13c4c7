//! Client-side caching (CLIENT TRACKING) with 4 shards: readers, writers, redirect targets
//! and the keys they touch are spread over the shards (connections are placed on the least
//! loaded shard, keys by slot), and every invalidation must reach its reader wherever the
//! write ran.

mod common;
mod diff;

use std::collections::BTreeSet;
use std::time::Duration;

use common::Server;
use diff::resp::V;
use diff::Conn;

const SHARDS: &str = "4";

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn resp3(server: &Server) -> Conn {
    let mut conn = Conn::connect(server.port);
    let hello = conn.call_str(&["HELLO", "3"]);
    assert!(matches!(hello, V::Map(_)), "{}", hello.show());
    conn
}

/// The keys of an invalidation push `>[invalidate, [keys] | null]` (`None` for null).
fn invalidated(message: &V) -> Option<Vec<String>> {
    let V::Push(items) = message else {
        panic!("not a push: {}", message.show());
    };
    assert_eq!(items[0], V::bulk("invalidate"), "{}", message.show());
    match &items[1] {
        V::Null => None,
        V::Array(keys) => Some(
            keys.iter()
                .map(|k| String::from_utf8_lossy(k.as_bytes().unwrap()).into_owned())
                .collect(),
        ),
        other => panic!("invalidate's keys: {}", other.show()),
    }
}

/// Reads invalidation pushes until `wanted` keys were all named; returns every key named.
fn read_invalidations(conn: &mut Conn, wanted: &BTreeSet<String>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    while !wanted.is_subset(&seen) {
        let message = conn.read();
        seen.extend(invalidated(&message).expect("keys, not a flush"));
    }
    seen
}

/// Nothing more is queued for `conn`: a PING's reply comes next.
fn nothing_pending(conn: &mut Conn) {
    let reply = conn.call_str(&["PING"]);
    assert_eq!(reply, V::Simple(b"PONG".to_vec()), "{}", reply.show());
}

/// Keys read on every shard are invalidated by writes from a connection on another shard;
/// the reader's own write is invalidated too, after its reply, unless NOLOOP.
#[test]
fn invalidations_come_from_every_shard() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut reader = resp3(&server);
    let mut writer = Conn::connect(server.port);
    let keys = keys("key:", 32);
    for key in &keys {
        writer.call_str(&["SET", key, "1"]);
    }
    assert_eq!(reader.call_str(&["CLIENT", "TRACKING", "ON"]), V::ok());
    for key in &keys {
        assert_eq!(reader.call_str(&["GET", key]), V::bulk("1"));
    }
    let mut mset = vec!["MSET".to_string()];
    for key in &keys {
        mset.push(key.clone());
        mset.push("2".into());
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(writer.call_str(&mset), V::ok());
    let wanted: BTreeSet<String> = keys.iter().cloned().collect();
    assert_eq!(read_invalidations(&mut reader, &wanted), wanted);
    nothing_pending(&mut reader);
    // Invalidated keys are forgotten until read again.
    writer.call_str(&["SET", "key:0", "3"]);
    nothing_pending(&mut reader);

    // Its own write: the reply, then the invalidation.
    reader.call_str(&["GET", "key:1"]);
    assert_eq!(reader.call_str(&["SET", "key:1", "mine"]), V::ok());
    assert_eq!(invalidated(&reader.read()), Some(vec!["key:1".into()]));
    // NOLOOP: not for its own writes, still for others'.
    assert_eq!(
        reader.call_str(&["CLIENT", "TRACKING", "ON", "NOLOOP"]),
        V::ok()
    );
    reader.call_str(&["GET", "key:2"]);
    reader.call_str(&["GET", "key:3"]);
    reader.call_str(&["SET", "key:2", "mine"]);
    nothing_pending(&mut reader);
    writer.call_str(&["DEL", "key:3"]);
    assert_eq!(invalidated(&reader.read()), Some(vec!["key:3".into()]));
    // Expired keys are invalidated when they go (here: by a lookup).
    reader.call_str(&["SET", "short", "x", "PX", "50"]);
    reader.call_str(&["GET", "short"]);
    std::thread::sleep(Duration::from_millis(100));
    writer.call_str(&["GET", "short"]);
    assert_eq!(invalidated(&reader.read()), Some(vec!["short".into()]));
    let info = reader.call_str(&["CLIENT", "TRACKINGINFO"]);
    assert_eq!(
        info.show(),
        r#"%["flags", ~["on", "noloop"], "redirect", :0, "prefixes", []]"#
    );
}

/// REDIRECT to a RESP2 connection subscribed to `__redis__:invalidate`: invalidations for
/// keys on every shard arrive there as Pub/Sub messages, FLUSHALL as a null; once the target
/// is gone the reader's redirect is broken.
#[test]
fn redirected_invalidations_reach_a_resp2_subscriber() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut target = Conn::connect(server.port);
    let id = target
        .call_str(&["CLIENT", "ID"])
        .as_int()
        .unwrap()
        .to_string();
    target.send(&diff::args(&["SUBSCRIBE", "__redis__:invalidate"]));
    target.read();
    let mut reader = Conn::connect(server.port);
    let mut writer = Conn::connect(server.port);
    assert_eq!(
        reader.call_str(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]),
        V::ok()
    );
    assert_eq!(
        reader.call_str(&["CLIENT", "GETREDIR"]),
        V::Int(id.parse().unwrap())
    );
    let keys = keys("r:", 16);
    for key in &keys {
        reader.call_str(&["GET", key]);
    }
    for key in &keys {
        writer.call_str(&["SET", key, "v"]);
    }
    let mut seen = BTreeSet::new();
    while seen.len() < keys.len() {
        let message = target.read();
        let items = message.items().expect("a message");
        assert_eq!(items[0], V::bulk("message"));
        assert_eq!(items[1], V::bulk("__redis__:invalidate"));
        for key in items[2].items().expect("keys") {
            seen.insert(String::from_utf8_lossy(key.as_bytes().unwrap()).into_owned());
        }
    }
    assert_eq!(seen, keys.iter().cloned().collect());
    reader.call_str(&["GET", "r:0"]);
    writer.call_str(&["FLUSHALL"]);
    let message = target.read();
    assert_eq!(
        message.items().unwrap()[2],
        V::NullBulk,
        "{}",
        message.show()
    );

    // The target leaves: the reader's redirect breaks at the next invalidation.
    drop(target);
    reader.call_str(&["GET", "r:1"]);
    let broken = common::eventually(Duration::from_secs(10), || {
        writer.call_str(&["SET", "r:1", "again"]);
        reader.call_str(&["GET", "r:1"]);
        let info = reader.call_str(&["CLIENT", "TRACKINGINFO"]).show();
        info.contains("broken_redirect")
    });
    assert!(broken, "the redirect was never reported broken");
}

/// BCAST with prefixes: writes under them on every shard are reported, gathered per
/// prefix; other keys are not; the registration goes with tracking off.
#[test]
fn broadcast_prefixes_see_writes_on_every_shard() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut reader = resp3(&server);
    let mut writer = Conn::connect(server.port);
    assert_eq!(
        reader.call_str(&[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "order:"
        ]),
        V::ok()
    );
    let mut wanted = BTreeSet::new();
    for key in keys("user:", 12).into_iter().chain(keys("order:", 12)) {
        writer.call_str(&["SET", &key, "1"]);
        wanted.insert(key);
    }
    writer.call_str(&["SET", "other:1", "1"]);
    let seen = read_invalidations(&mut reader, &wanted);
    assert_eq!(seen, wanted, "other:1 is under no prefix");
    nothing_pending(&mut reader);
    assert_eq!(reader.call_str(&["CLIENT", "TRACKING", "OFF"]), V::ok());
    writer.call_str(&["SET", "user:0", "2"]);
    nothing_pending(&mut reader);
}

/// OPTIN: only reads right after CLIENT CACHING YES are tracked.
#[test]
fn optin_tracks_only_what_caching_yes_precedes() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut reader = resp3(&server);
    let mut writer = Conn::connect(server.port);
    reader.call_str(&["CLIENT", "TRACKING", "ON", "OPTIN"]);
    reader.call_str(&["GET", "plain"]);
    assert_eq!(reader.call_str(&["CLIENT", "CACHING", "YES"]), V::ok());
    reader.call_str(&["MGET", "cached:a", "cached:b"]);
    reader.call_str(&["GET", "plain:after"]);
    for key in ["plain", "cached:a", "cached:b", "plain:after"] {
        writer.call_str(&["SET", key, "1"]);
    }
    let wanted: BTreeSet<String> = ["cached:a".to_string(), "cached:b".to_string()].into();
    assert_eq!(read_invalidations(&mut reader, &wanted), wanted);
    nothing_pending(&mut reader);
}

/// `tracking-table-max-keys` holds over all shards together: keys past it are forgotten,
/// each with an invalidation, and INFO counts what is left.
#[test]
fn the_tracking_table_is_bounded_over_all_shards() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut reader = resp3(&server);
    let mut admin = Conn::connect(server.port);
    reader.call_str(&["CLIENT", "TRACKING", "ON"]);
    for key in keys("t:", 40) {
        reader.call_str(&["GET", &key]);
    }
    let tracked = |admin: &mut Conn| -> i64 {
        let info = admin.call_str(&["INFO", "stats"]);
        let text = String::from_utf8_lossy(info.as_bytes().unwrap()).into_owned();
        text.lines()
            .find_map(|line| line.strip_prefix("tracking_total_keys:"))
            .expect("tracking_total_keys")
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(tracked(&mut admin), 40);
    assert_eq!(
        admin.call_str(&["CONFIG", "SET", "tracking-table-max-keys", "10"]),
        V::ok()
    );
    let mut forgotten = BTreeSet::new();
    while forgotten.len() < 30 {
        forgotten.extend(invalidated(&reader.read()).expect("keys"));
    }
    assert_eq!(forgotten.len(), 30);
    assert_eq!(tracked(&mut admin), 10);
    // Reads past the limit evict again (the invalidations come between the replies).
    for key in keys("u:", 5) {
        reader.send(&diff::args(&["GET", &key]));
    }
    let (mut replies, mut more) = (0, 0);
    while replies < 5 || more < 5 {
        match reader.read() {
            V::Push(items) => more += invalidated(&V::Push(items)).expect("keys").len(),
            reply => {
                assert_eq!(reply, V::Null, "GET of a missing key");
                replies += 1;
            }
        }
    }
    assert_eq!(more, 5);
    assert_eq!(tracked(&mut admin), 10);
}

/// A script tracks its declared keys for its caller once it reads (not when it only
/// writes); its writes are the caller's own (NOLOOP); EVAL_RO itself is no read.
#[test]
fn scripts_track_their_declared_keys_when_they_read() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut reader = resp3(&server);
    let mut writer = Conn::connect(server.port);
    reader.call_str(&["CLIENT", "TRACKING", "ON"]);
    let keys = ["2", "a{x}", "b{x}"];
    let script = |body: &str| -> Vec<String> {
        ["EVAL", body]
            .iter()
            .map(|s| s.to_string())
            .chain(keys.iter().map(|s| s.to_string()))
            .collect()
    };
    let call = |conn: &mut Conn, args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        conn.call_str(&args)
    };
    call(&mut reader, &script("redis.call('set', 'c{x}', 'v')"));
    writer.call_str(&["MSET", "b{x}", "1", "a{x}", "1"]);
    nothing_pending(&mut reader);
    let mut ro = script("redis.call('ping')");
    ro[0] = "EVAL_RO".into();
    call(&mut reader, &ro);
    writer.call_str(&["MSET", "b{x}", "2", "a{x}", "2"]);
    nothing_pending(&mut reader);
    call(&mut reader, &script("redis.call('get', 'c{x}')"));
    writer.call_str(&["MSET", "b{x}", "3", "a{x}", "3"]);
    assert_eq!(invalidated(&reader.read()), Some(vec!["b{x}".into()]));
    assert_eq!(invalidated(&reader.read()), Some(vec!["a{x}".into()]));
    // NOLOOP: the script's own write is the caller's.
    reader.call_str(&["CLIENT", "TRACKING", "ON", "NOLOOP"]);
    reader.call_str(&["GET", "k"]);
    let reply = reader.call_str(&["EVAL", "return redis.call('set', KEYS[1], '2')", "1", "k"]);
    assert_eq!(reply, V::ok());
    nothing_pending(&mut reader);
}

/// INFO memory's `used_memory_keyspace`: the estimate `maxmemory` is compared with.
fn keyspace_memory(conn: &mut Conn) -> u64 {
    let info = conn.call_str(&["INFO", "memory"]);
    let text = String::from_utf8_lossy(info.as_bytes().expect("INFO is a string")).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix("used_memory_keyspace:"))
        .unwrap_or_else(|| panic!("no used_memory_keyspace in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// As Redis evicts before any command (not only the ones that may grow memory): a read past
/// the limit evicts a tracked volatile key first (`volatile-random`), and its reader is told.
/// `used_memory_keyspace` is what the limit is compared with, so a limit 100 KiB above it is
/// reached by a 200 KiB bitmap. One shard: the limit is shared out per
/// shard (see `store/memory.rs`). (Redis sends that invalidation before the read's reply;
/// here it is queued behind the reply of the request in flight.)
#[test]
fn a_read_past_the_limit_evicts_and_invalidates() {
    let server = Server::start(&["--shards", "1"]);
    let mut conn = resp3(&server);
    assert_eq!(conn.call_str(&["CLIENT", "TRACKING", "ON"]), V::ok());
    let used = keyspace_memory(&mut conn);
    let limit = (used + 100 * 1024).to_string();
    assert_eq!(
        conn.call_str(&["CONFIG", "SET", "maxmemory", &limit]),
        V::ok()
    );
    assert_eq!(
        conn.call_str(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]),
        V::ok()
    );
    assert_eq!(
        conn.call_str(&["SETEX", "volatile-key", "10000", "x"]),
        V::ok()
    );
    assert_eq!(conn.call_str(&["GET", "volatile-key"]), V::bulk("x"));
    assert_eq!(
        conn.call_str(&["SETBIT", "big-key", "1600000", "0"]),
        V::Int(0)
    );
    conn.send(&diff::args(&["GETBIT", "big-key", "0"]));
    let mut replies = [conn.read(), conn.read()];
    replies.sort_by_key(|reply| matches!(reply, V::Push(_)));
    assert_eq!(replies[0], V::Int(0));
    assert_eq!(
        invalidated(&replies[1]),
        Some(vec!["volatile-key".to_string()])
    );
    assert_eq!(conn.call_str(&["EXISTS", "volatile-key"]), V::Int(0));
    // A write is refused only when nothing is left to evict (no key with a TTL).
    assert!(!conn.call_str(&["GET", "big-key"]).is_error());
    let refused = conn.call_str(&["SET", "other", "v"]);
    assert!(refused.is_error(), "{}", refused.show());
}
