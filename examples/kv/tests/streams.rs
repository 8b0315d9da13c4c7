//! Streams against `redis-server` (the oracle): scripted X* commands with explicit IDs run on
//! both, on one shard and on several (reads over streams of different shards), replies
//! compared exactly except where they carry times; then blocking XREAD / XREADGROUP with
//! streams on different shards, woken by XADD, XGROUP DESTROY and DEL.

mod common;
mod diff;

use std::time::Duration;

use diff::{args, servers, Cmp, Conn, Pair, V};

/// Two keys on different shards of `shards`.
fn keys_apart(shards: usize) -> (String, String) {
    let owner = |key: &str| corewire_kv::routing::shard_of(key.as_bytes(), shards);
    let first = "s:0".to_string();
    let other = (1..100)
        .map(|i| format!("s:{i}"))
        .find(|key| shards == 1 || owner(key) != owner(&first))
        .expect("a key on another shard");
    (first, other)
}

fn script(pair: &mut Pair, a: &str, b: &str) {
    let exact = |pair: &mut Pair, line: String| {
        let parts: Vec<&str> = line.split(' ').collect();
        pair.check(&args(&parts), Cmp::Exact);
    };
    let shape = |pair: &mut Pair, line: String| {
        let parts: Vec<&str> = line.split(' ').collect();
        pair.check(&args(&parts), Cmp::SameShape);
    };
    pair.check_str(&["FLUSHALL"]);
    pair.check_str(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
    // The type, XADD's IDs and options, ranges.
    for i in 1..=12 {
        exact(pair, format!("XADD {a} {i}-1 item {i} other x"));
    }
    exact(pair, format!("XADD {a} 12-* item 13"));
    exact(pair, format!("XADD {a} 12-1 item dup"));
    exact(pair, format!("XADD {a} 0-0 f v"));
    exact(pair, format!("XADD {a} NOMKSTREAM 20-0 f v"));
    exact(pair, "XADD nokey NOMKSTREAM 1-1 f v".to_string());
    exact(pair, format!("XADD {a} 21-0 f"));
    exact(pair, format!("XADD {a} MAXLEN = -1 22-0 f v"));
    exact(pair, format!("XADD {a} MAXLEN 1 MINID 1 22-0 f v"));
    exact(pair, format!("XADD {a} LIMIT 1 22-0 f v"));
    exact(pair, format!("XADD {a} MAXLEN 10 LIMIT 1 22-0 f v"));
    exact(pair, format!("XADD {a} 1x f v"));
    exact(pair, format!("TYPE {a}"));
    exact(pair, format!("OBJECT ENCODING {a}"));
    exact(pair, format!("XLEN {a}"));
    exact(pair, format!("XRANGE {a} - +"));
    exact(pair, format!("XRANGE {a} (3-1 5 COUNT 2"));
    exact(pair, format!("XREVRANGE {a} + - COUNT 3"));
    exact(pair, format!("XREVRANGE {a} (12-1 (10"));
    exact(pair, format!("XRANGE {a} - + COUNT 0"));
    exact(pair, format!("XRANGE {a} 5 3"));
    exact(
        pair,
        format!("XRANGE {a} (18446744073709551615-18446744073709551615 +"),
    );
    exact(pair, format!("XRANGE {a} - + FOO"));
    exact(pair, "XRANGE nokey - +".to_string());
    exact(pair, "SET str v".to_string());
    exact(pair, "XADD str * f v".to_string());
    exact(pair, "XRANGE str - +".to_string());
    // Deletion and trimming, exact and by whole nodes.
    exact(pair, format!("XDEL {a} 2-1 3-1 99-0"));
    exact(pair, format!("XDEL {a} bad"));
    exact(pair, format!("XTRIM {a} MAXLEN ~ 9"));
    exact(pair, format!("XTRIM {a} MAXLEN 9"));
    exact(pair, format!("XTRIM {a} MINID ~ 9"));
    exact(pair, format!("XTRIM {a} MINID 9 LIMIT 1"));
    exact(pair, format!("XTRIM {a}"));
    exact(pair, format!("XADD {a} MAXLEN ~ 5 LIMIT 4 30-0 f v"));
    exact(pair, format!("XADD {a} MINID 10 31-0 f v"));
    exact(pair, format!("XRANGE {a} - +"));
    exact(pair, format!("XSETID {a} 1-0"));
    exact(pair, format!("XSETID {a} 40-0 ENTRIESADDED 1"));
    exact(pair, format!("XSETID {a} 40-0 MAXDELETEDID 50-0"));
    exact(
        pair,
        format!("XSETID {a} 40-0 ENTRIESADDED 100 MAXDELETEDID 35-0"),
    );
    exact(pair, "XSETID nokey 1-0".to_string());
    shape(pair, format!("XINFO STREAM {a}"));
    // Groups, reads and the pending lists.
    exact(pair, format!("XADD {b} 1-0 f 1"));
    exact(pair, format!("XADD {b} 2-0 f 2"));
    exact(pair, format!("XADD {b} 3-0 f 3"));
    exact(pair, format!("XGROUP CREATE {b} g 0"));
    exact(pair, format!("XGROUP CREATE {b} g 0"));
    exact(pair, "XGROUP CREATE nokey g 0".to_string());
    exact(pair, "XGROUP CREATE mk g $ MKSTREAM".to_string());
    exact(pair, "XINFO STREAM mk".to_string());
    exact(pair, format!("XGROUP CREATE {b} g2 $ ENTRIESREAD 3"));
    exact(pair, format!("XGROUP CREATE {b} g3 0 ENTRIESREAD -5"));
    exact(pair, format!("XGROUP CREATECONSUMER {b} g bob"));
    exact(pair, format!("XGROUP CREATECONSUMER {b} g bob"));
    exact(pair, format!("XGROUP CREATECONSUMER {b} nog bob"));
    exact(
        pair,
        format!("XREADGROUP GROUP g alice COUNT 2 STREAMS {b} >"),
    );
    exact(pair, format!("XREADGROUP GROUP g alice STREAMS {b} 0"));
    exact(pair, format!("XREADGROUP GROUP g bob NOACK STREAMS {b} >"));
    exact(pair, format!("XREADGROUP GROUP g bob STREAMS {b} >"));
    exact(pair, format!("XREADGROUP GROUP g bob STREAMS {b} $"));
    exact(pair, format!("XREADGROUP GROUP nog bob STREAMS {b} >"));
    exact(pair, format!("XREAD GROUP g bob STREAMS {b} >"));
    exact(pair, format!("XREAD STREAMS {b} >"));
    exact(pair, format!("XREAD COUNT 1 STREAMS {a} {b} 0 1-0"));
    exact(pair, format!("XREAD STREAMS {a} {b} $ $"));
    exact(pair, format!("XREAD STREAMS {a} {b} 0"));
    exact(pair, "XREAD STREAMS str 0".to_string());
    exact(pair, format!("XPENDING {b} g"));
    shape(pair, format!("XPENDING {b} g - + 10"));
    shape(pair, format!("XPENDING {b} g IDLE 0 - + 10 alice"));
    exact(pair, format!("XPENDING {b} g - + 10 nobody"));
    exact(pair, format!("XPENDING {b} nog"));
    exact(pair, format!("XPENDING {b} g - +"));
    exact(pair, format!("XDEL {b} 2-0"));
    exact(pair, format!("XREADGROUP GROUP g alice STREAMS {b} 0"));
    exact(pair, format!("XCLAIM {b} g carol 0 1-0 JUSTID"));
    exact(pair, format!("XCLAIM {b} g carol 0 2-0 3-0"));
    exact(pair, format!("XCLAIM {b} g carol 0 1-0 FOO"));
    exact(pair, format!("XCLAIM {b} nog carol 0 1-0"));
    exact(pair, format!("XCLAIM {b} g carol 3600000 1-0"));
    exact(
        pair,
        format!("XCLAIM {b} g dave 0 3-0 FORCE RETRYCOUNT 7 LASTID 9-0 JUSTID"),
    );
    exact(pair, format!("XADD {b} 4-0 f 4"));
    exact(pair, format!("XREADGROUP GROUP g alice STREAMS {b} >"));
    exact(pair, format!("XDEL {b} 4-0"));
    exact(pair, format!("XAUTOCLAIM {b} g erin 0 0 COUNT 1"));
    exact(pair, format!("XAUTOCLAIM {b} g erin 0 0 JUSTID"));
    exact(pair, format!("XAUTOCLAIM {b} g erin 0 0 COUNT 0"));
    exact(pair, format!("XAUTOCLAIM {b} nog erin 0 0"));
    exact(pair, format!("XPENDING {b} g"));
    exact(pair, format!("XACK {b} g 1-0 3-0 9-9"));
    exact(pair, format!("XACK {b} nog 1-0"));
    exact(pair, format!("XACK {b} g bad"));
    exact(pair, format!("XINFO GROUPS {b}"));
    shape(pair, format!("XINFO CONSUMERS {b} g"));
    exact(pair, format!("XINFO CONSUMERS {b} nog"));
    exact(pair, "XINFO GROUPS nokey".to_string());
    shape(pair, format!("XINFO STREAM {b} FULL COUNT 2"));
    exact(pair, format!("XINFO STREAM {b} FULL COUNT"));
    exact(pair, format!("XGROUP SETID {b} g 1-0 ENTRIESREAD 1"));
    exact(pair, format!("XGROUP SETID {b} g $"));
    exact(pair, format!("XINFO GROUPS {b}"));
    exact(pair, format!("XGROUP DELCONSUMER {b} g erin"));
    exact(pair, format!("XGROUP DELCONSUMER {b} g nobody"));
    exact(pair, format!("XGROUP DESTROY {b} g2"));
    exact(pair, format!("XGROUP DESTROY {b} g2"));
    exact(pair, format!("XGROUP FOO {b} g"));
    exact(pair, "XGROUP HELP".to_string());
    exact(pair, "XINFO HELP".to_string());
    exact(pair, format!("XINFO GROUPS {b}"));
    // Scripts run the stream commands, but not with BLOCK.
    let read = "return redis.call('XREAD', 'COUNT', '1', 'STREAMS', KEYS[1], '0')";
    pair.check(&args(&["EVAL", read, "1", b]), Cmp::Exact);
    let blocking = "return redis.call('XREAD', 'BLOCK', '0', 'STREAMS', KEYS[1], '$')";
    pair.check(&args(&["EVAL", blocking, "1", b]), Cmp::Exact);
    // RESP3: XREAD's streams as a map, XINFO's maps, nulls.
    pair.check(&args(&["HELLO", "3"]), Cmp::Ignore);
    for line in [
        format!("XREAD STREAMS {a} {b} 0 0"),
        format!("XREAD STREAMS {b} +"),
        format!("XRANGE {b} - + COUNT 1"),
        format!("XINFO GROUPS {b}"),
        format!("XPENDING {b} g"),
        format!("XREADGROUP GROUP g zed STREAMS {b} >"),
        "XINFO STREAM mk".to_string(),
    ] {
        exact(pair, line);
    }
    pair.check(&args(&["HELLO", "2"]), Cmp::Ignore);
    // DUMP / RESTORE of a stream with groups (a Redis 7.0 payload, type 19) brings it back.
    pair.kv.call(&args(&["DEL", "copy"]));
    let dump = pair.kv.call(&args(&["DUMP", b]));
    let V::Bulk(payload) = dump else {
        panic!("DUMP of a stream: {dump:?}")
    };
    let restored = pair.kv.call(&[
        b"RESTORE".to_vec(),
        b"copy".to_vec(),
        b"0".to_vec(),
        payload,
    ]);
    assert_eq!(restored, V::Simple(b"OK".to_vec()));
    for query in [
        ["XRANGE", "-", "+"],
        ["XINFO", "GROUPS", ""],
        ["XPENDING", "g", ""],
    ] {
        let build = |key: &str| -> Vec<Vec<u8>> {
            let mut line = vec![query[0]];
            if query[0] == "XINFO" {
                line.extend([query[1], key]);
            } else {
                line.extend([key, query[1]]);
                if !query[2].is_empty() {
                    line.push(query[2]);
                }
            }
            args(&line)
        };
        assert_eq!(
            pair.kv.call(&build(b)),
            pair.kv.call(&build("copy")),
            "{query:?}"
        );
    }
}

fn differential(shards: usize) {
    let (oracle, server) = servers(shards, &[]);
    let (a, b) = keys_apart(shards);
    let mut pair = Pair::new(&oracle, &server, format!("streams on {shards} shards"));
    script(&mut pair, &a, &b);
    pair.report();
}

#[test]
fn streams_match_redis_on_one_shard() {
    differential(1);
}

#[test]
fn streams_match_redis_on_several_shards() {
    differential(3);
}

fn read_reply(conn: &mut Conn, within: Duration) -> Option<V> {
    conn.try_read(within).ok()
}

#[test]
fn blocking_reads_on_streams_of_different_shards() {
    let shards = 4;
    let (_oracle, server) = servers(shards, &[]);
    let (a, b) = keys_apart(shards);
    let mut writer = Conn::connect(server.port);
    let mut reader = Conn::connect(server.port);
    writer.call_str(&["XADD", &a, "1-0", "f", "old"]);

    // XREAD BLOCK over two shards: `$` means after what is there now; an XADD to the other
    // shard wakes it with that entry.
    reader.send(&args(&[
        "XREAD", "BLOCK", "5000", "STREAMS", &a, &b, "$", "$",
    ]));
    assert!(read_reply(&mut reader, Duration::from_millis(300)).is_none());
    writer.call_str(&["XADD", &b, "5-0", "f", "new"]);
    let woken = read_reply(&mut reader, Duration::from_secs(5)).expect("woken by XADD");
    let shown = woken.show();
    assert!(
        shown.contains("5-0") && shown.contains("new") && !shown.contains("old"),
        "{shown}"
    );

    // A timeout answers nil.
    let nil = reader.call_str(&["XREAD", "BLOCK", "100", "STREAMS", &a, &b, "$", "$"]);
    assert_eq!(nil, V::NullArray);

    // XREADGROUP BLOCK on one shard: served by XADD, then ended by XGROUP DESTROY and DEL.
    writer.call_str(&["XGROUP", "CREATE", &a, "g", "$"]);
    reader.send(&args(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        &a,
        ">",
    ]));
    assert!(read_reply(&mut reader, Duration::from_millis(300)).is_none());
    writer.call_str(&["XADD", &a, "2-0", "f", "v"]);
    let served = read_reply(&mut reader, Duration::from_secs(5)).expect("served");
    assert!(served.show().contains("2-0"), "{}", served.show());
    let pending = writer.call_str(&["XPENDING", &a, "g"]);
    assert!(pending.show().contains('c'), "{}", pending.show());

    reader.send(&args(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        &a,
        ">",
    ]));
    assert!(read_reply(&mut reader, Duration::from_millis(300)).is_none());
    writer.call_str(&["XGROUP", "DESTROY", &a, "g"]);
    let error = read_reply(&mut reader, Duration::from_secs(5)).expect("unblocked");
    assert!(
        error
            .show()
            .contains("NOGROUP the consumer group this client was blocked on no longer exists"),
        "{}",
        error.show()
    );

    writer.call_str(&["XGROUP", "CREATE", &a, "g", "$"]);
    reader.send(&args(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        &a,
        ">",
    ]));
    assert!(read_reply(&mut reader, Duration::from_millis(300)).is_none());
    writer.call_str(&["DEL", &a]);
    let error = read_reply(&mut reader, Duration::from_secs(5)).expect("unblocked");
    assert!(
        error
            .show()
            .contains("UNBLOCKED the stream key no longer exists"),
        "{}",
        error.show()
    );

    // Inside MULTI a blocking read answers nil at once.
    reader.call_str(&["MULTI"]);
    reader.call_str(&["XREAD", "BLOCK", "0", "STREAMS", &b, "$"]);
    let exec = reader.call_str(&["EXEC"]);
    assert_eq!(exec.show(), V::Array(vec![V::NullArray]).show());
}

/// `shown` without the values of the groups' `entries-read` and `lag`: Redis logs a group
/// read as XCLAIMs, which move the group's last ID but not its read counter, so replay
/// leaves a counter that was an estimate unknown (as Redis's own replay does).
fn without_counters(shown: &str) -> String {
    without(shown, &["entries-read", "lag"])
}

/// `shown` with the values of the `names` fields replaced by `_`.
fn without(shown: &str, names: &[&str]) -> String {
    let mut out = Vec::new();
    let mut skip = false;
    for token in shown.split(", ") {
        if skip {
            skip = false;
            let closing: String = token.chars().filter(|c| *c == ']').collect();
            out.push(format!("_{closing}"));
            continue;
        }
        skip = names
            .iter()
            .any(|name| token.ends_with(&format!("\"{name}\"")));
        out.push(token.to_string());
    }
    out.join(", ")
}

/// What must survive a restart: entries, metadata, groups and who has what pending (delivery
/// times and counts included; idle times and consumers' seen times move with the clock).
fn persisted_state(conn: &mut Conn, keys: &[&str], counters: bool) -> Vec<String> {
    let mut state = Vec::new();
    for key in keys {
        for query in [
            vec!["XRANGE", key, "-", "+"],
            vec!["XINFO", "GROUPS", key],
            vec!["XLEN", key],
        ] {
            let shown = conn.call_str(&query).show();
            state.push(if counters {
                shown
            } else {
                without_counters(&shown)
            });
        }
        let (V::Map(info) | V::Array(info)) = conn.call_str(&["XINFO", "STREAM", key, "FULL"])
        else {
            panic!("XINFO STREAM FULL of {key}");
        };
        // Everything but the consumers' seen times.
        let shown: Vec<String> = info.iter().map(V::show).collect();
        let shown: Vec<String> = if counters {
            shown
        } else {
            shown.iter().map(|s| without_counters(s)).collect()
        };
        // The node layout follows stream-node-max-entries, which a restart resets.
        let varying = ["seen-time", "radix-tree-keys", "radix-tree-nodes"];
        state.push(without(&shown.join(", "), &varying));
    }
    state
}

#[test]
fn streams_and_groups_survive_aof_replay_and_rewrite() {
    let dir = common::TempDir::new("streams-aof");
    let args = ["--shards", "2", "--aof", dir.arg(), "--fsync", "always"];
    let mut server = common::Server::start(&args);
    let (a, b) = keys_apart(2);
    let mut conn = Conn::connect(server.port);
    conn.call_str(&["CONFIG", "SET", "stream-node-max-entries", "3"]);
    for i in 1..=20 {
        conn.call_str(&["XADD", &a, "*", "n", &i.to_string()]);
        conn.call_str(&["XADD", &b, &format!("{i}-1"), "n", &i.to_string()]);
    }
    conn.call_str(&["XTRIM", &a, "MAXLEN", "~", "10"]);
    conn.call_str(&["XADD", &b, "MAXLEN", "~", "12", "*", "n", "x"]);
    conn.call_str(&["XDEL", &b, "15-1"]);
    conn.call_str(&["XGROUP", "CREATE", &a, "g", "0"]);
    conn.call_str(&["XGROUP", "CREATE", &b, "g", "$"]);
    conn.call_str(&["XGROUP", "CREATE", &b, "h", "0", "ENTRIESREAD", "0"]);
    conn.call_str(&["XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM"]);
    conn.call_str(&["XGROUP", "CREATECONSUMER", &b, "g", "idle"]);
    conn.call_str(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "4",
        "STREAMS",
        &a,
        ">",
    ]);
    conn.call_str(&[
        "XREADGROUP",
        "GROUP",
        "h",
        "bob",
        "NOACK",
        "COUNT",
        "5",
        "STREAMS",
        &b,
        ">",
    ]);
    conn.call_str(&[
        "XREADGROUP",
        "GROUP",
        "h",
        "carol",
        "COUNT",
        "3",
        "STREAMS",
        &b,
        ">",
    ]);
    let pending = conn.call_str(&["XPENDING", &a, "g", "-", "+", "1"]);
    let V::Array(first) = &pending else {
        panic!("XPENDING: {pending:?}")
    };
    let V::Array(first) = &first[0] else {
        panic!("XPENDING entry")
    };
    let V::Bulk(first_id) = &first[0] else {
        panic!("XPENDING id")
    };
    let first_id = String::from_utf8(first_id.clone()).unwrap();
    conn.call_str(&["XCLAIM", &a, "g", "dave", "0", &first_id, "RETRYCOUNT", "9"]);
    conn.call_str(&["XAUTOCLAIM", &b, "h", "erin", "0", "0", "COUNT", "2"]);
    conn.call_str(&["XACK", &a, "g", &first_id]);
    conn.call_str(&[
        "XSETID",
        "empty",
        "5-5",
        "ENTRIESADDED",
        "7",
        "MAXDELETEDID",
        "5-0",
    ]);
    let keys = [a.as_str(), b.as_str(), "empty"];
    let before = persisted_state(&mut conn, &keys, false);
    drop(conn);
    server.stop();

    let mut server = common::Server::start(&args);
    let mut conn = Conn::connect(server.port);
    assert_eq!(
        persisted_state(&mut conn, &keys, false),
        before,
        "after replay"
    );
    let replayed = persisted_state(&mut conn, &keys, true);
    conn.call_str(&["BGREWRITEAOF"]);
    let rewritten = common::eventually(Duration::from_secs(30), || {
        let V::Bulk(info) = conn.call_str(&["INFO", "persistence"]) else {
            return false;
        };
        let info = String::from_utf8_lossy(&info);
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrites:2")
    });
    assert!(rewritten, "the rewrite did not finish");
    drop(conn);
    server.stop();

    let server = common::Server::start(&args);
    let mut conn = Conn::connect(server.port);
    assert_eq!(
        persisted_state(&mut conn, &keys, true),
        replayed,
        "after the rewrite"
    );
}

/// The keyspace events of the stream commands, as redis-server sends them.
#[test]
fn keyspace_events_match_redis() {
    let (oracle, server) = servers(3, &[]);
    let mut pair = Pair::new(&oracle, &server, "stream events");
    pair.check_str(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut listeners = [Conn::connect(oracle.port), Conn::connect(server.port)];
    for conn in &mut listeners {
        conn.call_str(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    }
    for line in [
        "XADD ev 1-0 f v",
        "XADD ev MAXLEN 1 2-0 f v",
        "XDEL ev 2-0",
        "XADD ev 3-0 f v",
        "XTRIM ev MAXLEN 0",
        "XSETID ev 9-0",
        "XGROUP CREATE ev g $",
        "XGROUP CREATECONSUMER ev g c",
        "XADD ev 10-0 f v",
        "XREADGROUP GROUP g d STREAMS ev >",
        "XCLAIM ev g e 0 10-0",
        "XAUTOCLAIM ev g f 0 0",
        "XACK ev g 10-0",
        "XGROUP SETID ev g 0",
        "XGROUP DELCONSUMER ev g c",
        "XGROUP DESTROY ev g",
        "XGROUP CREATE ev2 g $ MKSTREAM",
        "DEL ev",
    ] {
        let parts: Vec<&str> = line.split(' ').collect();
        pair.check(&args(&parts), Cmp::Ignore);
    }
    let events = |conn: &mut Conn| {
        let mut seen = Vec::new();
        while let Ok(message) = conn.try_read(Duration::from_millis(300)) {
            seen.push(message.show());
        }
        seen
    };
    let expected = events(&mut listeners[0]);
    assert!(expected.len() > 10, "{expected:?}");
    assert_eq!(events(&mut listeners[1]), expected);
}
