//! Keyspace notifications against `redis-server` (the oracle): the same writes, with every
//! event class on, must publish the same events; and with 4 shards every key's events reach
//! subscribers on every shard. Events of one key come from one shard, in order; events of
//! different keys may interleave differently across shards, so transcripts are compared key
//! by key (and in total).

mod common;
mod diff;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Server;
use diff::{servers, Conn, V};

/// The writes: every type, expiry (lazily found), renames, deletes by emptying. Keys a
/// command names together share a hash tag (one shard).
fn script() -> Vec<Vec<String>> {
    owned(vec![
        vec!["SET", "{s}1", "1"],
        vec!["SETRANGE", "{s}1", "0", "x"],
        vec!["APPEND", "{s}1", "y"],
        vec!["INCR", "n"],
        vec!["INCRBYFLOAT", "n", "1.5"],
        vec!["DECRBY", "n", "2"],
        vec!["GETDEL", "n"],
        vec!["SETEX", "t", "100", "v"],
        vec!["EXPIRE", "t", "200"],
        vec!["PERSIST", "t"],
        vec!["PEXPIRE", "t", "1"],
        vec!["MSET", "{m}1", "1", "{m}2", "2"],
        vec!["RENAME", "{m}1", "{m}3"],
        vec!["DEL", "{m}2", "{m}3", "missing"],
        vec!["LPUSH", "l", "a", "b"],
        vec!["RPUSH", "l", "c"],
        vec!["LSET", "l", "0", "z"],
        vec!["LINSERT", "l", "BEFORE", "z", "y"],
        vec!["LTRIM", "l", "0", "1"],
        vec!["LPOP", "l"],
        vec!["RPOP", "l"],
        vec!["HSET", "h", "f", "1", "g", "2"],
        vec!["HINCRBY", "h", "f", "2"],
        vec!["HINCRBYFLOAT", "h", "f", "0.5"],
        vec!["HDEL", "h", "f", "g"],
        vec!["SADD", "{st}1", "a", "b", "c"],
        vec!["SREM", "{st}1", "a"],
        vec!["SMOVE", "{st}1", "{st}2", "b"],
        vec!["SPOP", "{st}1"],
        vec!["ZADD", "z", "1", "a", "2", "b"],
        vec!["ZINCRBY", "z", "1", "a"],
        vec!["ZREM", "z", "a"],
        vec!["ZREM", "z", "b"],
        vec!["SET", "gone", "1", "PX", "1"],
        vec!["SET", "x", "1"],
        vec!["EXPIRE", "x", "-1"],
        vec!["GETEX", "{s}1", "PX", "100000"],
        vec!["COPY", "{s}1", "{s}2"],
        vec!["FLUSHALL"],
    ])
}

fn owned(script: Vec<Vec<&str>>) -> Vec<Vec<String>> {
    (script.into_iter())
        .map(|step| step.into_iter().map(str::to_owned).collect())
        .collect()
}

/// Multi-key writes whose keys are on different shards of 4 (no hash tags): each must
/// publish the command's events (`rename_from`/`rename_to`, `lpop`/`rpush`, `sinterstore`,
/// `copy_to`, ...) as on one shard, not the write-backs' `restore` and `del`.
fn cross_shard_script() -> Vec<Vec<String>> {
    // Logical name -> a key on shard `index % 4`: neighbours in this list are apart.
    let names = [
        "src", "dst", "s1", "s2", "s3", "z1", "z2", "z3", "c1", "c2", "r1", "r2", "m1", "m2",
    ];
    let key = |name: &str| -> String {
        let index = names
            .iter()
            .position(|n| *n == name)
            .expect("a listed name");
        (0..)
            .map(|i| format!("{name}:{i}"))
            .find(|key| corewire_kv::routing::shard_of(key.as_bytes(), 4) == index % 4)
            .expect("some key lands there")
    };
    let steps: Vec<Vec<&str>> = vec![
        vec!["SET", "r1", "v"],
        vec!["RENAME", "r1", "r2"],
        vec!["SET", "r1", "w"],
        vec!["RENAMENX", "r2", "r1"],
        vec!["RENAME", "r2", "r1"],
        vec!["RPUSH", "src", "a", "b", "c", "d"],
        vec!["LMOVE", "src", "dst", "LEFT", "RIGHT"],
        vec!["RPOPLPUSH", "src", "dst"],
        vec!["LMPOP", "2", "s1", "src", "LEFT"],
        vec!["LMOVE", "src", "dst", "RIGHT", "LEFT"],
        vec!["SADD", "s1", "a", "b"],
        vec!["SADD", "s2", "b", "c"],
        vec!["SINTERSTORE", "s3", "s1", "s2"],
        vec!["SUNIONSTORE", "s3", "s1", "s2"],
        vec!["SDIFFSTORE", "s3", "s1", "s1"],
        vec!["SMOVE", "s1", "s2", "a"],
        vec!["SMOVE", "s1", "s2", "b"],
        vec!["ZADD", "z1", "1", "a"],
        vec!["ZADD", "z2", "2", "a", "3", "b"],
        vec!["ZUNIONSTORE", "z3", "2", "z1", "z2"],
        vec!["ZINTERSTORE", "z3", "2", "z1", "z2"],
        vec!["ZRANGESTORE", "z1", "z2", "0", "-1"],
        vec!["SET", "c1", "x"],
        vec!["COPY", "c1", "c2"],
        vec!["COPY", "c1", "c2", "REPLACE"],
        vec!["MSETNX", "m1", "1", "m2", "2"],
        vec!["SORT", "s2", "ALPHA", "STORE", "m1"],
    ];
    let resolve = |arg: &str| {
        if names.contains(&arg) {
            key(arg)
        } else {
            arg.to_owned()
        }
    };
    (steps.into_iter())
        .map(|step| step.into_iter().map(resolve).collect())
        .collect()
}

fn subscribe(port: u16) -> Conn {
    let mut sub = Conn::connect(port);
    sub.send(&diff::args(&["PSUBSCRIBE", "__key*__:*"]));
    let confirmation = sub.read();
    assert_eq!(confirmation.items().map(<[V]>::len), Some(3));
    sub
}

/// `[pmessage, pattern, channel, message]`, as (channel, message).
fn event(message: &V) -> (String, String) {
    let items = message.items().expect("a message");
    let text = |v: &V| String::from_utf8_lossy(v.as_bytes().expect("bulk")).into_owned();
    assert_eq!(text(&items[0]), "pmessage");
    (text(&items[2]), text(&items[3]))
}

/// The events of the script on a server, grouped by key (keyspace events under their key,
/// keyevent events under the key they name).
fn run(
    port: u16,
    script: &[Vec<String>],
    expected: Option<usize>,
) -> (usize, BTreeMap<String, Vec<String>>) {
    let mut admin = Conn::connect(port);
    assert_eq!(admin.call_str(&["FLUSHALL"]), V::ok());
    assert_eq!(
        admin.call_str(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        V::ok()
    );
    let mut sub = subscribe(port);
    let mut writer = Conn::connect(port);
    for step in script {
        let step: Vec<&str> = step.iter().map(String::as_str).collect();
        writer.call_str(&step);
        if step[0] == "SET" && step[1] == "gone" {
            // Let it expire, then find it expired.
            std::thread::sleep(Duration::from_millis(20));
            writer.call_str(&["GET", "gone"]);
        }
        if step == ["PEXPIRE", "t", "1"] {
            std::thread::sleep(Duration::from_millis(20));
            writer.call_str(&["EXISTS", "t"]);
        }
    }
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut count = 0;
    let mut read = |sub: &mut Conn| -> bool {
        match sub.try_read(Duration::from_millis(if expected.is_some() {
            10_000
        } else {
            500
        })) {
            Ok(message) => {
                let (channel, payload) = event(&message);
                let (key, what) = match channel.strip_prefix("__keyspace@0__:") {
                    Some(key) => (key.to_owned(), format!("space {payload}")),
                    None => (payload, format!("event {channel}")),
                };
                by_key.entry(key).or_default().push(what);
                true
            }
            Err(_) => false,
        }
    };
    match expected {
        Some(n) => {
            while count < n {
                assert!(read(&mut sub), "only {count} of {n} events arrived");
                count += 1;
            }
            // And no more.
            let extra = sub.try_read(Duration::from_millis(300));
            assert!(
                extra.is_err(),
                "an extra event: {:?}",
                extra.map(|v| v.show())
            );
        }
        None => {
            while read(&mut sub) {
                count += 1;
            }
        }
    }
    admin.call_str(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    (count, by_key)
}

#[test]
fn events_match_redis_key_by_key() {
    let (oracle, server) = servers(4, &[]);
    let (count, expected) = run(oracle.port, &script(), None);
    assert!(count > 60, "redis-server published {count} events");
    let (_, actual) = run(server.port, &script(), Some(count));
    for (key, events) in &expected {
        assert_eq!(
            Some(events),
            actual.get(key),
            "events of {key}: redis-server vs corewire-kv"
        );
    }
    assert_eq!(expected.len(), actual.len());
}

#[test]
fn multi_key_writes_across_shards_publish_the_commands_events() {
    let (oracle, server) = servers(4, &[]);
    let script = cross_shard_script();
    let (count, expected) = run(oracle.port, &script, None);
    assert!(count > 50, "redis-server published {count} events");
    // Until quiet: an extra event shows under its key.
    let (_, actual) = run(server.port, &script, None);
    for (key, events) in &expected {
        assert_eq!(
            Some(events),
            actual.get(key),
            "events of {key}: redis-server vs corewire-kv"
        );
    }
    assert_eq!(expected.len(), actual.len());
}

/// Classes filter what is published; `new` and `m` (key miss) are only sent when asked for.
#[test]
fn classes_filter_events_as_redis() {
    let (oracle, server) = servers(4, &[]);
    let mut transcripts = Vec::new();
    for port in [oracle.port, server.port] {
        let mut admin = Conn::connect(port);
        let mut sub = subscribe(port);
        let mut out = Vec::new();
        for flags in ["Kl", "E$", "Egn", "Km", "Kx", "AKEm"] {
            admin.call_str(&["FLUSHALL"]);
            assert_eq!(
                admin.call_str(&["CONFIG", "SET", "notify-keyspace-events", flags]),
                V::ok()
            );
            let reported = admin.call_str(&["CONFIG", "GET", "notify-keyspace-events"]);
            out.push(format!("{flags} -> {}", reported.show()));
            for step in [
                &["SET", "k", "v"][..],
                &["GET", "nokey"],
                &["LPUSH", "l", "a"],
                &["DEL", "k"],
                &["SET", "e", "1", "PX", "1"],
            ] {
                admin.call_str(step);
            }
            std::thread::sleep(Duration::from_millis(20));
            admin.call_str(&["GET", "e"]);
            admin.call_str(&["PUBLISH", "__marker__", "x"]);
            // One shard's events (a single writer, one key at a time) arrive in order.
            let mut events = Vec::new();
            while let Ok(message) = sub.try_read(Duration::from_millis(300)) {
                events.push(event(&message));
            }
            events.sort();
            out.push(format!("{events:?}"));
        }
        admin.call_str(&["CONFIG", "SET", "notify-keyspace-events", ""]);
        transcripts.push(out);
    }
    assert_eq!(transcripts[0], transcripts[1]);
}

/// With 4 shards, subscribers (on different shards) each get the events of keys on every
/// shard, and one key's events in order.
#[test]
fn every_subscriber_gets_every_shards_events() {
    let server = Server::start(&["--shards", "4", "--notify-keyspace-events", "KA"]);
    let mut subscribers: Vec<Conn> = (0..4).map(|_| subscribe(server.port)).collect();
    let mut writer = Conn::connect(server.port);
    let keys: Vec<String> = (0..40).map(|i| format!("key:{i}")).collect();
    for key in &keys {
        writer.call_str(&["SET", key, "1"]);
        writer.call_str(&["INCR", key]);
        writer.call_str(&["DEL", key]);
    }
    for sub in &mut subscribers {
        let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for _ in 0..keys.len() * 3 {
            let (channel, payload) = event(&sub.read());
            let key = channel.strip_prefix("__keyspace@0__:").expect("keyspace");
            by_key.entry(key.to_owned()).or_default().push(payload);
        }
        assert_eq!(by_key.len(), keys.len());
        for events in by_key.values() {
            assert_eq!(events, &["set", "incrby", "del"]);
        }
    }
}
