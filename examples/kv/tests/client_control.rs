//! Commands that act on other connections or on the whole node, with 4 shards (connections
//! are placed on the least loaded shard, so the ones here live on different shards): CLIENT
//! PAUSE / UNPAUSE, CLIENT UNBLOCK, MONITOR, SLOWLOG and LATENCY merged from every shard,
//! sharded Pub/Sub, SHUTDOWN.

mod common;
mod diff;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::Server;
use diff::{Conn, V};

const SHARDS: &str = "4";

fn text(v: &V) -> String {
    String::from_utf8_lossy(v.as_bytes().expect("a string")).into_owned()
}

/// CLIENT PAUSE WRITE holds writes (from every shard's connections) and lets reads through;
/// UNPAUSE from any connection releases them, in order.
#[test]
fn pause_write_holds_writes_until_unpause() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    let mut writers: Vec<Conn> = (0..4).map(|_| Conn::connect(server.port)).collect();
    for (i, writer) in writers.iter_mut().enumerate() {
        writer.call_str(&["SET", &format!("k{i}"), "before"]);
    }
    assert_eq!(
        admin.call_str(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        V::ok()
    );
    for (i, writer) in writers.iter_mut().enumerate() {
        writer.send(&diff::args(&["SET", &format!("k{i}"), "after"]));
        writer.send(&diff::args(&["GET", &format!("k{i}")]));
    }
    // Reads behind a held write wait with it (replies are in order); other connections'
    // reads go through.
    let mut reader = Conn::connect(server.port);
    assert_eq!(reader.call_str(&["GET", "k0"]), V::bulk("before"));
    for writer in &mut writers {
        assert!(
            writer.try_read(Duration::from_millis(200)).is_err(),
            "a write ran during the pause"
        );
    }
    assert_eq!(
        Conn::connect(server.port).call_str(&["CLIENT", "UNPAUSE"]),
        V::ok()
    );
    for writer in &mut writers {
        assert_eq!(writer.read(), V::ok());
        assert_eq!(writer.read(), V::bulk("after"));
    }
}

/// A request CLIENT PAUSE holds back counts as blocked, as in Redis: INFO's node-wide
/// `blocked_clients` counts it whichever shard its connection lives on, CLIENT LIST flags it
/// `b`, and the count falls back when the pause ends or the connection goes.
#[test]
fn paused_requests_count_as_blocked() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    let blocked = |admin: &mut Conn| -> usize {
        let info = text(&admin.call_str(&["INFO", "clients"]));
        (info.lines())
            .find_map(|line| line.strip_prefix("blocked_clients:"))
            .expect("INFO clients has blocked_clients")
            .trim()
            .parse()
            .expect("a count")
    };
    let flagged = |admin: &mut Conn| -> usize {
        let list = text(&admin.call_str(&["CLIENT", "LIST"]));
        (list.lines())
            .filter(|line| {
                line.split(' ').any(|field| {
                    field
                        .strip_prefix("flags=")
                        .is_some_and(|f| f.contains('b'))
                })
            })
            .count()
    };
    let wait = |admin: &mut Conn, count: usize| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while blocked(admin) != count || flagged(admin) != count {
            assert!(
                Instant::now() < deadline,
                "blocked_clients {} and CLIENT LIST's b flags {}, expected {count}",
                blocked(admin),
                flagged(admin)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert_eq!(
        admin.call_str(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        V::ok()
    );
    let mut writers: Vec<Conn> = (0..4).map(|_| Conn::connect(server.port)).collect();
    let mut reader = Conn::connect(server.port);
    assert_eq!(reader.call_str(&["GET", "k"]), V::NullBulk);
    for (i, writer) in writers.iter_mut().enumerate() {
        writer.send(&diff::args(&["SET", &format!("k{i}"), "v"]));
        wait(&mut admin, i + 1);
    }
    // A held connection that goes away is no longer counted.
    drop(writers.pop());
    wait(&mut admin, writers.len());
    assert_eq!(admin.call_str(&["CLIENT", "UNPAUSE"]), V::ok());
    for writer in &mut writers {
        assert_eq!(writer.read(), V::ok());
    }
    wait(&mut admin, 0);
}

/// A WRITE pause judges a script by the flags it declares, as Redis does: EVAL, EVALSHA and
/// FCALL of `no-writes` scripts run (alone or in MULTI), a script without flags waits; a
/// request of the wrong arity, or a read-only script that would publish, is refused at once
/// rather than held.
#[test]
fn pause_write_lets_read_only_scripts_through() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    let library = "#!lua name=lib\nredis.register_function{function_name='ro', \
                   callback=function() return 'ro' end, flags={'no-writes'}}";
    assert_eq!(
        admin.call_str(&["FUNCTION", "LOAD", library]),
        V::bulk("lib")
    );
    let read_only = "#!lua flags=no-writes\nreturn 2";
    let sha = text(&admin.call_str(&["SCRIPT", "LOAD", read_only]));
    assert_eq!(
        admin.call_str(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        V::ok()
    );
    let mut writer = Conn::connect(server.port);
    writer.send(&diff::args(&["EVAL", "return 1", "0"]));
    let mut reader = Conn::connect(server.port);
    assert_eq!(reader.call_str(&["EVAL", read_only, "0"]), V::Int(2));
    assert_eq!(reader.call_str(&["EVALSHA", &sha, "0"]), V::Int(2));
    assert_eq!(reader.call_str(&["FCALL", "ro", "0"]), V::bulk("ro"));
    assert_eq!(reader.call_str(&["MULTI"]), V::ok());
    assert_eq!(
        reader.call_str(&["EVAL", read_only, "0"]),
        V::Simple(b"QUEUED".to_vec())
    );
    assert_eq!(reader.call_str(&["EXEC"]), V::Array(vec![V::Int(2)]));
    assert!(matches!(reader.call_str(&["SET", "k"]), V::Error(_)));
    // What a read-only script could propagate is refused, not held.
    let publish = "return redis.call('publish', 'ch', 'm')";
    assert!(matches!(
        reader.call_str(&["EVAL_RO", publish, "0"]),
        V::Error(e) if e.starts_with(b"ERR Write commands are not allowed from read-only scripts")
    ));
    assert!(
        writer.try_read(Duration::from_millis(200)).is_err(),
        "a script without flags ran during the pause"
    );
    assert_eq!(admin.call_str(&["CLIENT", "UNPAUSE"]), V::ok());
    assert_eq!(writer.read(), V::Int(1));
}

/// While a pause is in force nothing expires (a deletion is a write): an expired key reads
/// as missing but stays, uncounted, until the pause ends.
#[test]
fn pause_keeps_expired_keys() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    let expired = |admin: &mut Conn| -> u64 {
        let info = text(&admin.call_str(&["INFO", "stats"]));
        (info.lines())
            .find_map(|line| line.strip_prefix("expired_keys:"))
            .expect("INFO stats has expired_keys")
            .trim()
            .parse()
            .expect("a count")
    };
    let before = expired(&mut admin);
    let keys: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
    for key in &keys {
        assert_eq!(admin.call_str(&["SET", key, "v", "PX", "300"]), V::ok());
    }
    assert_eq!(
        admin.call_str(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        V::ok()
    );
    // (On a slow host a key may expire before the pause: counted from here.)
    let at_pause = expired(&mut admin);
    std::thread::sleep(Duration::from_millis(400));
    for key in &keys {
        assert_eq!(admin.call_str(&["GET", key]), V::NullBulk);
    }
    assert_eq!(
        expired(&mut admin),
        at_pause,
        "a key expired during the pause"
    );
    assert_eq!(admin.call_str(&["CLIENT", "UNPAUSE"]), V::ok());
    for key in &keys {
        assert_eq!(admin.call_str(&["GET", key]), V::NullBulk);
    }
    assert_eq!(expired(&mut admin), before + keys.len() as u64);
}

/// CLIENT PAUSE ALL holds every command until its time is up, then they run.
#[test]
fn pause_all_ends_by_itself() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    let mut other = Conn::connect(server.port);
    let started = Instant::now();
    assert_eq!(admin.call_str(&["CLIENT", "PAUSE", "300"]), V::ok());
    other.send(&diff::args(&["PING"]));
    assert_eq!(other.read(), V::Simple(b"PONG".to_vec()));
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "PING ran during the pause"
    );
}

/// CLIENT UNBLOCK wakes a blocked pop wherever it waits: TIMEOUT answers as a timeout,
/// ERROR with Redis's UNBLOCKED error; a client that is not blocked is not unblocked.
#[test]
fn unblock_wakes_a_pop_on_any_shard() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    for (i, mode) in ["TIMEOUT", "ERROR"].into_iter().enumerate() {
        let mut blocked = Conn::connect(server.port);
        let id = blocked
            .call_str(&["CLIENT", "ID"])
            .as_int()
            .unwrap()
            .to_string();
        blocked.send(&diff::args(&["BLPOP", &format!("list:{i}"), "0"]));
        let waiting = common::eventually(Duration::from_secs(10), || {
            let info = admin.call_str(&["INFO", "clients"]);
            text(&info).contains("blocked_clients:1")
        });
        assert!(waiting, "the BLPOP never blocked");
        assert_eq!(admin.call_str(&["CLIENT", "UNBLOCK", &id, mode]), V::Int(1));
        let reply = blocked.read();
        match mode {
            "TIMEOUT" => assert_eq!(reply, V::NullArray),
            _ => assert_eq!(
                reply,
                V::Error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK".to_vec())
            ),
        }
        assert_eq!(admin.call_str(&["CLIENT", "UNBLOCK", &id]), V::Int(0));
    }
}

/// MONITOR shows the commands of connections on every shard, in Redis's line format.
#[test]
fn monitor_sees_every_shard() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut monitor = Conn::connect(server.port);
    assert_eq!(monitor.call_str(&["MONITOR"]), V::ok());
    let mut clients: Vec<Conn> = (0..4).map(|_| Conn::connect(server.port)).collect();
    let mut wanted = BTreeSet::new();
    for (i, client) in clients.iter_mut().enumerate() {
        let key = format!("key {i}");
        client.call_str(&["SET", &key, "va\"lue"]);
        wanted.insert(format!(r#""SET" "key {i}" "va\"lue""#));
    }
    let mut seen = BTreeSet::new();
    while !wanted.is_subset(&seen) {
        let line = text(&monitor.read());
        // `<seconds>.<micros> [0 <addr>] "SET" ...`
        let (stamp, rest) = line.split_once(' ').expect("a timestamp");
        assert!(
            stamp.contains('.') && stamp.parse::<f64>().is_ok(),
            "{line}"
        );
        let (client, command) = rest.split_once("] ").expect("a client");
        assert!(client.starts_with("[0 127.0.0.1:"), "{line}");
        seen.insert(command.to_owned());
    }
}

/// SLOWLOG GET merges the shards' logs newest first with node-wide ids; LEN counts them
/// all; RESET empties every shard's.
#[test]
fn slowlog_merges_every_shard() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    admin.call_str(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    admin.call_str(&["SLOWLOG", "RESET"]);
    let mut clients: Vec<Conn> = (0..4).map(|_| Conn::connect(server.port)).collect();
    for round in 0..3 {
        for (i, client) in clients.iter_mut().enumerate() {
            client.call_str(&["SET", &format!("key:{i}:{round}"), "v"]);
        }
    }
    let entries = admin.call_str(&["SLOWLOG", "GET", "-1"]);
    let entries = entries.items().expect("entries").to_vec();
    let ids: Vec<i64> = entries
        .iter()
        .map(|e| e.items().unwrap()[0].as_int().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.dedup();
    assert_eq!(ids, sorted, "newest first, ids distinct");
    let stamps: Vec<i64> = entries
        .iter()
        .map(|e| e.items().unwrap()[1].as_int().unwrap())
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] >= w[1]), "in time order");
    let sets = entries
        .iter()
        .filter(|e| e.items().unwrap()[3].items().unwrap()[0] == V::bulk("SET"))
        .count();
    assert_eq!(sets, 12);
    let len = admin.call_str(&["SLOWLOG", "LEN"]).as_int().unwrap();
    assert!(len as usize >= entries.len() && len as usize <= entries.len() + 1);
    assert_eq!(admin.call_str(&["SLOWLOG", "RESET"]), V::ok());
    assert!(admin.call_str(&["SLOWLOG", "LEN"]).as_int().unwrap() <= 1);
}

/// LATENCY HISTOGRAM and INFO commandstats add every shard's calls.
#[test]
fn command_statistics_add_up_over_shards() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    admin.call_str(&["CONFIG", "RESETSTAT"]);
    let mut clients: Vec<Conn> = (0..4).map(|_| Conn::connect(server.port)).collect();
    for round in 0..5 {
        for (i, client) in clients.iter_mut().enumerate() {
            client.call_str(&["SET", &format!("k{i}{round}"), "v"]);
        }
    }
    let histogram = admin.call_str(&["LATENCY", "HISTOGRAM", "set"]);
    let items = histogram.items().expect("a map");
    assert_eq!(items[0], V::bulk("set"));
    assert_eq!(items[1].items().unwrap()[1], V::Int(20));
    let info = text(&admin.call_str(&["INFO", "commandstats"]));
    assert!(info.contains("cmdstat_set:calls=20,"), "{info}");
}

/// A script's commands count in INFO commandstats as calls of their own, failures too
/// (errorstats counts the script's reply once), as in Redis.
#[test]
fn script_commands_count_in_command_statistics() {
    let server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    admin.call_str(&["CONFIG", "RESETSTAT"]);
    admin.call_str(&["SET", "mykey", "myval"]);
    // The INCR of a list fails: the script's reply carries its WRONGTYPE out.
    let reply = admin.call_str(&[
        "EVAL",
        "redis.call('set', KEYS[1], 0) redis.call('expire', KEYS[1], 0) \
         redis.call('lpush', KEYS[1], 'x') return redis.call('incr', KEYS[1])",
        "1",
        "mykey",
    ]);
    assert!(matches!(reply, V::Error(_)), "{reply:?}");
    let info = text(&admin.call_str(&["INFO", "commandstats"]));
    for expected in [
        "cmdstat_eval:calls=1,",
        "cmdstat_set:calls=2,",
        "cmdstat_expire:calls=1,",
        "cmdstat_lpush:calls=1,",
        "cmdstat_incr:calls=1,",
    ] {
        assert!(info.contains(expected), "{expected} in {info}");
    }
    let incr = info
        .lines()
        .find(|l| l.starts_with("cmdstat_incr:"))
        .unwrap();
    assert!(incr.ends_with("failed_calls=1"), "{incr}");
    let errors = text(&admin.call_str(&["INFO", "errorstats"]));
    assert!(
        errors.contains("errorstat_WRONGTYPE:count=1\r\n"),
        "{errors}"
    );
    // A `redis.pcall` error the script keeps counts once too, as in Redis (the script
    // answers no error).
    admin.call_str(&["CONFIG", "RESETSTAT"]);
    let reply = admin.call_str(&[
        "EVAL",
        "redis.pcall('XGROUP', 'CREATECONSUMER', 's1', 'mygroup', 'consumer') return 1",
        "0",
    ]);
    assert_eq!(reply, V::Int(1));
    let errors = text(&admin.call_str(&["INFO", "errorstats"]));
    assert!(errors.contains("errorstat_ERR:count=1\r\n"), "{errors}");
    let stats = text(&admin.call_str(&["INFO", "stats"]));
    assert!(stats.contains("total_error_replies:1\r\n"), "{stats}");
}

/// Sharded Pub/Sub: subscribers on every shard get what SPUBLISH sends to their channels'
/// shard (channels spread over the slots), and nothing after SUNSUBSCRIBE.
#[test]
fn sharded_pubsub_reaches_subscribers_on_every_shard() {
    let server = Server::start(&["--shards", SHARDS]);
    let channels: Vec<String> = (0..8).map(|i| format!("chan:{i}")).collect();
    let mut subscribers: Vec<Conn> = (0..4).map(|_| Conn::connect(server.port)).collect();
    for sub in &mut subscribers {
        let mut args = vec!["SSUBSCRIBE"];
        args.extend(channels.iter().map(String::as_str));
        sub.send(&diff::args(&args));
        for (i, channel) in channels.iter().enumerate() {
            let confirmation = sub.read();
            assert_eq!(
                confirmation,
                V::Array(vec![
                    V::bulk("ssubscribe"),
                    V::bulk(channel),
                    V::Int(i as i64 + 1)
                ])
            );
        }
    }
    let mut publisher = Conn::connect(server.port);
    for channel in &channels {
        assert_eq!(publisher.call_str(&["SPUBLISH", channel, "hi"]), V::Int(4));
    }
    let numsub = publisher.call_str(&["PUBSUB", "SHARDNUMSUB", "chan:0", "chan:7", "none"]);
    assert_eq!(
        numsub,
        V::Array(vec![
            V::bulk("chan:0"),
            V::Int(4),
            V::bulk("chan:7"),
            V::Int(4),
            V::bulk("none"),
            V::Int(0)
        ])
    );
    let listed = publisher.call_str(&["PUBSUB", "SHARDCHANNELS"]);
    assert_eq!(listed.items().map(<[V]>::len), Some(8));
    for sub in &mut subscribers {
        let mut got = BTreeSet::new();
        for _ in 0..channels.len() {
            let message = sub.read();
            let items = message.items().expect("a message");
            assert_eq!(items[0], V::bulk("smessage"));
            assert_eq!(items[2], V::bulk("hi"));
            got.insert(text(&items[1]));
        }
        assert_eq!(got.len(), channels.len());
    }
    // SUNSUBSCRIBE answers once every channel's shard has dropped the subscriber.
    let first = &mut subscribers[0];
    first.send(&diff::args(&["SUNSUBSCRIBE"]));
    for _ in 0..channels.len() {
        first.read();
    }
    for channel in &channels {
        assert_eq!(
            publisher.call_str(&["SPUBLISH", channel, "again"]),
            V::Int(3)
        );
    }
    // A closed subscriber is dropped too.
    subscribers.pop();
    let dropped = common::eventually(Duration::from_secs(10), || {
        publisher.call_str(&["SPUBLISH", "chan:0", "x"]) == V::Int(2)
    });
    assert!(dropped);
}

/// SHUTDOWN NOSAVE stops the server; its connection sees the close.
#[test]
fn shutdown_stops_the_server() {
    let mut server = Server::start(&["--shards", SHARDS]);
    let mut admin = Conn::connect(server.port);
    admin.send(&diff::args(&["SHUTDOWN", "NOSAVE"]));
    let reply = admin.try_read(Duration::from_secs(10));
    assert!(
        reply.is_err(),
        "no reply, the server went: {:?}",
        reply.map(|r| r.show())
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && std::net::TcpStream::connect(("127.0.0.1", server.port)).is_ok()
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::net::TcpStream::connect(("127.0.0.1", server.port)).is_err());
    server.stop();
}

/// With `enable-debug-command yes`: DEBUG SLEEP holds the server, DEBUG SET-ACTIVE-EXPIRE 0
/// stops the expiry sweep on every shard (expired keys go only when looked up).
#[test]
fn debug_sleep_and_active_expire() {
    let server = Server::start(&["--shards", SHARDS, "--enable-debug-command", "yes"]);
    let mut admin = Conn::connect(server.port);
    let started = Instant::now();
    assert_eq!(admin.call_str(&["DEBUG", "SLEEP", "0.2"]), V::ok());
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        admin.call_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        V::ok()
    );
    for i in 0..8 {
        admin.call_str(&["SET", &format!("k{i}"), "v", "PX", "1"]);
    }
    // Several sweep ticks (100 ms each) pass: nothing is swept.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(admin.call_str(&["DBSIZE"]), V::Int(8));
    assert_eq!(admin.call_str(&["GET", "k0"]), V::NullBulk);
    assert_eq!(admin.call_str(&["DBSIZE"]), V::Int(7));
    assert_eq!(
        admin.call_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]),
        V::ok()
    );
    let swept = common::eventually(Duration::from_secs(10), || {
        admin.call_str(&["DBSIZE"]) == V::Int(0)
    });
    assert!(swept, "the sweep did not resume");
}
