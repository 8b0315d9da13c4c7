use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::*;
use crate::change::{ChangeSink, WriteOp};
use crate::resp::RequestParser;

/// Records each change as the space-joined request it encodes to.
#[derive(Default)]
struct Log(Vec<String>);

impl ChangeSink for Log {
    fn record(&mut self, op: WriteOp<'_>) {
        let mut encoded = BytesMut::new();
        op.encode(&mut encoded);
        let args = RequestParser::default()
            .parse(&mut encoded)
            .unwrap()
            .unwrap();
        assert!(encoded.is_empty());
        let words: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        self.0.push(words.join(" "));
    }
}

fn command(line: &str) -> Command {
    Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()).unwrap()
}

fn run(store: &mut Store, line: &str, now: u64) -> Reply {
    let reply = store.execute(command(line), now, &mut NoLog);
    store.assert_consistent();
    reply
}

fn run_logged(store: &mut Store, log: &mut Log, line: &str, now: u64) -> Reply {
    let reply = store.execute(command(line), now, log);
    store.assert_consistent();
    reply
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::from(s.to_owned()))
}

fn err(s: &str) -> Reply {
    Reply::Error(Bytes::from(s.to_owned()))
}

#[test]
fn set_and_get_are_binary_safe() {
    let mut store = Store::default();
    let key = Bytes::from_static(b"k\0\r\n");
    let value = Bytes::from_static(b"\xff\x00v");
    let set = Command::parse(vec![Bytes::from("SET"), key.clone(), value.clone()]).unwrap();
    assert_eq!(store.execute(set, 0, &mut NoLog), Reply::ok());
    assert_eq!(
        store.execute(Command::Get(key), 0, &mut NoLog),
        Reply::Bulk(value)
    );
    assert_eq!(run(&mut store, "GET missing", 0), Reply::NullBulk);
}

#[test]
fn set_nx_xx_and_get_option() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "SET k v XX", 0), Reply::NullBulk);
    assert_eq!(run(&mut store, "SET k v1 NX", 0), Reply::ok());
    assert_eq!(run(&mut store, "SET k v2 NX", 0), Reply::NullBulk);
    assert_eq!(run(&mut store, "GET k", 0), bulk("v1"));
    assert_eq!(run(&mut store, "SET k v3 XX GET", 0), bulk("v1"));
    assert_eq!(run(&mut store, "SET k v4 NX GET", 0), bulk("v3"));
    assert_eq!(run(&mut store, "GET k", 0), bulk("v3"));
    assert_eq!(run(&mut store, "SET other v GET", 0), Reply::NullBulk);
    assert_eq!(run(&mut store, "GET other", 0), bulk("v"));
}

#[test]
fn set_expiry_options() {
    let mut store = Store::default();
    run(&mut store, "SET k v EX 10", 1_000);
    assert_eq!(run(&mut store, "PTTL k", 1_000), Reply::Integer(10_000));
    assert_eq!(run(&mut store, "TTL k", 2_400), Reply::Integer(9));
    assert_eq!(run(&mut store, "TTL k", 2_600), Reply::Integer(8));
    // KEEPTTL keeps it, a plain SET drops it.
    run(&mut store, "SET k v2 KEEPTTL", 3_000);
    assert_eq!(run(&mut store, "PTTL k", 3_000), Reply::Integer(8_000));
    run(&mut store, "SET k v3", 3_000);
    assert_eq!(run(&mut store, "PTTL k", 3_000), Reply::Integer(-1));
    run(&mut store, "SET k v PXAT 5000", 3_000);
    assert_eq!(run(&mut store, "PTTL k", 3_000), Reply::Integer(2_000));
    // Visible at the expiry instant, gone one millisecond later.
    assert_eq!(run(&mut store, "GET k", 5_000), bulk("v"));
    assert_eq!(run(&mut store, "GET k", 5_001), Reply::NullBulk);
    // The absolute time must fit a signed 64-bit clock.
    assert_eq!(
        run(&mut store, "SET k v PX 9223372036854775807", 1),
        err("ERR invalid expire time in 'set' command")
    );
}

#[test]
fn getset_returns_old_value_and_clears_ttl() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "GETSET k a", 0), Reply::NullBulk);
    run(&mut store, "EXPIRE k 100", 0);
    assert_eq!(run(&mut store, "GETSET k b", 0), bulk("a"));
    assert_eq!(run(&mut store, "TTL k", 0), Reply::Integer(-1));
}

#[test]
fn counters_and_their_errors() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "INCR n", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "INCRBY n 41", 0), Reply::Integer(42));
    assert_eq!(run(&mut store, "DECR n", 0), Reply::Integer(41));
    assert_eq!(run(&mut store, "DECRBY n 50", 0), Reply::Integer(-9));
    assert_eq!(run(&mut store, "GET n", 0), bulk("-9"));
    run(&mut store, "SET s abc", 0);
    assert_eq!(
        run(&mut store, "INCR s", 0),
        err("ERR value is not an integer or out of range")
    );
    run(&mut store, "SET s 007", 0);
    assert_eq!(
        run(&mut store, "INCR s", 0),
        err("ERR value is not an integer or out of range")
    );
    run(&mut store, "SET big 9223372036854775807", 0);
    assert_eq!(
        run(&mut store, "INCR big", 0),
        err("ERR increment or decrement would overflow")
    );
    run(&mut store, "SET small -9223372036854775808", 0);
    assert_eq!(
        run(&mut store, "DECRBY small 1", 0),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(run(&mut store, "GET big", 0), bulk("9223372036854775807"));
}

#[test]
fn incr_keeps_the_ttl() {
    let mut store = Store::default();
    run(&mut store, "SET n 1 PX 500", 0);
    run(&mut store, "INCR n", 100);
    assert_eq!(run(&mut store, "PTTL n", 100), Reply::Integer(400));
    assert_eq!(run(&mut store, "INCR n", 501), Reply::Integer(1));
}

#[test]
fn append_and_strlen() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "APPEND k abc", 0), Reply::Integer(3));
    assert_eq!(run(&mut store, "APPEND k de", 0), Reply::Integer(5));
    assert_eq!(run(&mut store, "GET k", 0), bulk("abcde"));
    assert_eq!(run(&mut store, "STRLEN k", 0), Reply::Integer(5));
    assert_eq!(run(&mut store, "STRLEN nope", 0), Reply::Integer(0));
    // A value a reply still holds must not be mutated by the append.
    let held = run(&mut store, "GET k", 0);
    run(&mut store, "APPEND k f", 0);
    assert_eq!(held, bulk("abcde"));
    assert_eq!(run(&mut store, "GET k", 0), bulk("abcdef"));
}

#[test]
fn append_respects_the_size_limit() {
    let mut store = Store::new(StoreConfig {
        max_value_len: 4,
        ..StoreConfig::default()
    });
    assert_eq!(run(&mut store, "APPEND k abcd", 0), Reply::Integer(4));
    assert_eq!(
        run(&mut store, "APPEND k e", 0),
        err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
}

#[test]
fn multi_key_commands() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "MSET a 1 b 2 a 3", 0), Reply::ok());
    assert_eq!(
        run(&mut store, "MGET a b c", 0),
        Reply::Array(vec![bulk("3"), bulk("2"), Reply::NullBulk])
    );
    assert_eq!(run(&mut store, "EXISTS a a c b", 0), Reply::Integer(3));
    assert_eq!(run(&mut store, "DEL a a c", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "DBSIZE", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "FLUSHALL", 0), Reply::ok());
    assert_eq!(run(&mut store, "DBSIZE", 0), Reply::Integer(0));
}

#[test]
fn expire_variants_and_conditions() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "EXPIRE nope 10", 0), Reply::Integer(0));
    run(&mut store, "SET k v", 0);
    assert_eq!(run(&mut store, "TTL k", 0), Reply::Integer(-1));
    assert_eq!(run(&mut store, "TTL nope", 0), Reply::Integer(-2));
    assert_eq!(run(&mut store, "EXPIRE k 10 XX", 0), Reply::Integer(0));
    assert_eq!(run(&mut store, "EXPIRE k 10 GT", 0), Reply::Integer(0));
    assert_eq!(run(&mut store, "EXPIRE k 10 NX", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "EXPIRE k 20 NX", 0), Reply::Integer(0));
    assert_eq!(run(&mut store, "EXPIRE k 5 GT", 0), Reply::Integer(0));
    assert_eq!(run(&mut store, "EXPIRE k 20 GT", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "EXPIRE k 30 LT", 0), Reply::Integer(0));
    assert_eq!(
        run(&mut store, "PEXPIRE k 1500 LT XX", 0),
        Reply::Integer(1)
    );
    assert_eq!(run(&mut store, "PTTL k", 0), Reply::Integer(1500));
    assert_eq!(run(&mut store, "EXPIREAT k 100", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "PTTL k", 50_000), Reply::Integer(50_000));
    assert_eq!(run(&mut store, "PEXPIREAT k 60000", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "PERSIST k", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "PERSIST k", 0), Reply::Integer(0));
    assert_eq!(run(&mut store, "TTL k", 0), Reply::Integer(-1));
    // LT treats "no TTL" as infinite, so any time is earlier.
    assert_eq!(run(&mut store, "EXPIRE k 100 LT", 0), Reply::Integer(1));
    // A time in the past deletes the key.
    assert_eq!(run(&mut store, "EXPIRE k -1", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "EXISTS k", 0), Reply::Integer(0));
    run(&mut store, "SET k v", 0);
    assert_eq!(
        run(&mut store, "PEXPIRE k 9223372036854775807", 10),
        err("ERR invalid expire time in 'pexpire' command")
    );
}

#[test]
fn lazy_expiry_counts_and_logs() {
    let mut store = Store::default();
    let mut log = Log::default();
    run_logged(&mut store, &mut log, "SET k v PX 10", 100);
    assert_eq!(store.stats().expires, 1);
    assert_eq!(
        run_logged(&mut store, &mut log, "EXISTS k", 110),
        Reply::Integer(1)
    );
    assert_eq!(
        run_logged(&mut store, &mut log, "GET k", 111),
        Reply::NullBulk
    );
    let stats = store.stats();
    assert_eq!((stats.keys, stats.expires, stats.expired_keys), (0, 0, 1));
    assert_eq!(log.0, vec!["SET k v PXAT 110", "DEL k"]);
}

#[test]
fn writes_are_logged_in_replayable_form() {
    let mut store = Store::default();
    let mut log = Log::default();
    for line in [
        "SET a 1 EX 100",
        "SET a 2 NX",
        "SET b x KEEPTTL",
        "INCRBY a 5",
        "APPEND b yz",
        "GETSET b q",
        "EXPIRE b 50",
        "EXPIRE b 50 NX",
        "PERSIST b",
        "PERSIST b",
        "MSET c 1 d 2",
        "DEL c nope d",
        "DEL nope",
        "EXPIRE a 0",
        "GET a",
        "FLUSHALL",
    ] {
        run_logged(&mut store, &mut log, line, 1_000);
    }
    assert_eq!(
        log.0,
        vec![
            "SET a 1 PXAT 101000",
            "SET b x KEEPTTL",
            "SET a 6 KEEPTTL",
            "APPEND b yz",
            "SET b q",
            "PEXPIREAT b 51000",
            "PERSIST b",
            "MSET c 1 d 2",
            "DEL c d",
            "DEL a",
            "FLUSHALL",
        ]
    );
}

#[test]
fn deleting_an_expired_key_reports_zero_but_logs_it() {
    let mut store = Store::default();
    let mut log = Log::default();
    run_logged(&mut store, &mut log, "SET k v PX 1", 0);
    assert_eq!(
        run_logged(&mut store, &mut log, "DEL k", 5),
        Reply::Integer(0)
    );
    assert_eq!(log.0.last().map(String::as_str), Some("DEL k"));
    assert_eq!(store.stats().expired_keys, 1);
}

#[test]
fn sweep_is_bounded_and_covers_every_key() {
    let mut store = Store::default();
    let mut log = Log::default();
    for i in 0..100 {
        // Even keys expire at 1000, odd keys much later.
        let ttl = if i % 2 == 0 { 1_000 } else { 1_000_000 };
        run(&mut store, &format!("SET k{i} v PX {ttl}"), 0);
    }
    run(&mut store, "SET forever v", 0);
    assert_eq!(
        store.sweep(500, 1000, &mut log),
        SweepOutcome {
            examined: 100,
            removed: 0
        }
    );
    let mut removed = 0;
    let mut sweeps = 0;
    while removed < 50 {
        let outcome = store.sweep(2_000, 10, &mut log);
        store.assert_consistent();
        assert!(outcome.examined <= 10);
        removed += outcome.removed;
        sweeps += 1;
        assert!(sweeps <= 20, "sweeps must make progress");
    }
    assert_eq!(store.len(), 51);
    assert_eq!(store.stats().expired_keys, 50);
    assert_eq!(log.0.len(), 50);
    assert!(log.0.iter().all(|line| line.starts_with("DEL k")));
    assert_eq!(run(&mut store, "GET forever", 2_000), bulk("v"));
}

#[test]
fn stats_track_hits_misses_and_commands() {
    let mut store = Store::default();
    run(&mut store, "SET a 1", 0);
    run(&mut store, "GET a", 0);
    run(&mut store, "MGET a b", 0);
    let stats = store.stats();
    assert_eq!(stats.keyspace_hits, 2);
    assert_eq!(stats.keyspace_misses, 1);
    assert_eq!(stats.commands_processed, 3);
    assert_eq!(stats.data_bytes, 2);
    assert_eq!(
        ShardStats::from_reply(&run(&mut store, "INFO", 0)),
        Some(store.stats())
    );
}

#[test]
fn connection_commands_are_refused() {
    let mut store = Store::default();
    assert!(run(&mut store, "AUTH x", 0).is_error());
    assert_eq!(run(&mut store, "PING", 0), Reply::simple("PONG"));
}

#[test]
fn replaying_the_log_rebuilds_the_same_keyspace() {
    let mut store = Store::default();
    let mut log = Log::default();
    let script = [
        ("SET a 1 PX 100", 0),
        ("SET b 2 EX 1000", 0),
        ("INCR a", 50),
        ("APPEND c xyz", 60),
        ("EXPIRE c 10", 60),
        ("GET a", 200), // expires a lazily: must appear as DEL
        ("SET d 4", 300),
        ("PEXPIRE d 5000", 300),
        ("PERSIST d", 400),
    ];
    for (line, now) in script {
        run_logged(&mut store, &mut log, line, now);
    }
    store.sweep(80_000, 100, &mut log); // removes c
    let mut replayed = Store::default();
    for line in &log.0 {
        let args = line.split(' ').map(|s| Bytes::from(s.to_owned())).collect();
        let reply = replayed.apply_replayed(Command::parse(args).unwrap());
        assert!(!reply.is_error(), "{line}: {reply:?}");
        replayed.assert_consistent();
    }
    for key in ["a", "b", "c", "d"] {
        for now in [80_000, 2_000_000] {
            assert_eq!(
                run(&mut replayed, &format!("PTTL {key}"), now),
                run(&mut store, &format!("PTTL {key}"), now),
                "{key} at {now}"
            );
            assert_eq!(
                run(&mut replayed, &format!("GET {key}"), now),
                run(&mut store, &format!("GET {key}"), now),
                "{key} at {now}"
            );
        }
    }
}

/// Random operations on a handful of keys, checked against a trivially correct model.
#[derive(Debug, Clone)]
enum Op {
    Set(u8, u8, Option<u16>),
    Del(u8),
    Expire(u8, i16),
    Persist(u8),
    Append(u8, u8),
    Get(u8),
    Sweep(u8),
    Advance(u16),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..8, any::<u8>(), proptest::option::of(1u16..500))
            .prop_map(|(k, v, t)| Op::Set(k, v, t)),
        (0u8..8).prop_map(Op::Del),
        (0u8..8, -50i16..500).prop_map(|(k, t)| Op::Expire(k, t)),
        (0u8..8).prop_map(Op::Persist),
        (0u8..8, any::<u8>()).prop_map(|(k, v)| Op::Append(k, v)),
        (0u8..8).prop_map(Op::Get),
        (1u8..6).prop_map(Op::Sweep),
        (0u16..300).prop_map(Op::Advance),
    ]
}

proptest! {
    #[test]
    fn store_matches_a_model(ops in proptest::collection::vec(op_strategy(), 1..120)) {
        use std::collections::HashMap;
        // key -> (value, expire_at)
        let mut model: HashMap<String, (String, Option<u64>)> = HashMap::new();
        let mut store = Store::default();
        let mut now = 1_000u64;
        for op in ops {
            model.retain(|_, (_, at)| at.is_none_or(|at| now <= at));
            match op {
                Op::Set(k, v, ttl) => {
                    let line = match ttl {
                        Some(ms) => format!("SET k{k} v{v} PX {ms}"),
                        None => format!("SET k{k} v{v}"),
                    };
                    run(&mut store, &line, now);
                    model.insert(format!("k{k}"), (format!("v{v}"), ttl.map(|ms| now + u64::from(ms))));
                }
                Op::Del(k) => {
                    let expected = i64::from(model.remove(&format!("k{k}")).is_some());
                    prop_assert_eq!(run(&mut store, &format!("DEL k{k}"), now), Reply::Integer(expected));
                }
                Op::Expire(k, ms) => {
                    let key = format!("k{k}");
                    let expected = i64::from(model.contains_key(&key));
                    if ms <= 0 {
                        model.remove(&key);
                    } else if let Some(entry) = model.get_mut(&key) {
                        entry.1 = Some(now + ms as u64);
                    }
                    prop_assert_eq!(run(&mut store, &format!("PEXPIRE {key} {ms}"), now), Reply::Integer(expected));
                }
                Op::Persist(k) => {
                    let expected = model
                        .get_mut(&format!("k{k}"))
                        .map_or(0, |entry| i64::from(entry.1.take().is_some()));
                    prop_assert_eq!(run(&mut store, &format!("PERSIST k{k}"), now), Reply::Integer(expected));
                }
                Op::Append(k, v) => {
                    let entry = model.entry(format!("k{k}")).or_insert((String::new(), None));
                    entry.0.push_str(&format!("a{v}"));
                    let expected = entry.0.len() as i64;
                    prop_assert_eq!(run(&mut store, &format!("APPEND k{k} a{v}"), now), Reply::Integer(expected));
                }
                Op::Get(k) => {
                    let expected = model.get(&format!("k{k}")).map_or(Reply::NullBulk, |(v, _)| bulk(v));
                    prop_assert_eq!(run(&mut store, &format!("GET k{k}"), now), expected);
                }
                Op::Sweep(budget) => {
                    store.sweep(now, usize::from(budget), &mut NoLog);
                    store.assert_consistent();
                }
                Op::Advance(ms) => now += u64::from(ms),
            }
            prop_assert!(store.len() >= model.len());
        }
    }
}

/// INFO's `avg_ttl`: the sweep's running estimate of the TTL left, 0 once no key has one.
#[test]
fn the_sweep_estimates_the_average_ttl() {
    let mut store = Store::default();
    assert_eq!(store.stats().avg_ttl_ms, 0);
    run(&mut store, "SET a v PX 10000", 0);
    run(&mut store, "SET b v PX 30000", 0);
    run(&mut store, "SET plain v", 0);
    store.sweep(0, 100, &mut NoLog);
    // The first pass's mean (20 s), through the 98/2 running average.
    assert_eq!(store.stats().avg_ttl_ms, 20_000);
    store.sweep(10_000, 100, &mut NoLog);
    // 10 s later only b is left with 20 s: the estimate moves 2% of the way.
    assert_eq!(store.stats().avg_ttl_ms, 20_000 / 50 * 49 + 20_000 / 50);
    run(&mut store, "PERSIST b", 10_000);
    // a expires, and no key is left with a TTL.
    store.sweep(10_001, 100, &mut NoLog);
    assert_eq!(store.stats().avg_ttl_ms, 0);
}

/// INFO's `instantaneous_ops_per_sec`: the command counter sampled on the glue's tick.
#[test]
fn the_command_rate_is_sampled_on_the_tick() {
    let mut store = Store::default();
    store.sample_rates(1_000);
    for i in 0..50 {
        run(&mut store, &format!("SET k{i} v"), 1_050);
    }
    store.sample_rates(1_100);
    // 50 commands in 100 ms: 500/s in one of the 16 samples.
    assert_eq!(store.stats().ops_per_sec, 500 / 16);
    store.reset_stats();
    assert_eq!(store.stats().ops_per_sec, 0);
}

#[test]
fn a_replica_keeps_expired_keys_until_its_master_deletes_them() {
    let mut store = Store::default();
    run(&mut store, "SET k v PXAT 1000", 0);
    run(&mut store, "RPUSH l a", 0);
    run(&mut store, "PEXPIREAT l 1000", 0);
    // A client of the replica: expired keys read as missing, nothing is deleted.
    store.set_expiry_view(ExpiryView::Hide);
    assert_eq!(run(&mut store, "GET k", 2000), Reply::NullBulk);
    assert_eq!(run(&mut store, "EXISTS k", 2000), Reply::Integer(0));
    assert_eq!(run(&mut store, "LLEN l", 2000), Reply::Integer(0));
    assert_eq!(run(&mut store, "LRANGE l 0 -1", 2000), Reply::Array(vec![]));
    assert_eq!(store.len(), 2);
    // The master's stream sees them (it deletes what expired before touching it).
    store.set_expiry_view(ExpiryView::Keep);
    assert_eq!(run(&mut store, "GET k", 2000), Reply::Bulk("v".into()));
    // Its DEL removes it (the reply goes nowhere).
    run(&mut store, "DEL k", 2000);
    assert_eq!(store.len(), 1);
    // A master deletes an expired key it meets.
    store.set_expiry_view(ExpiryView::Delete);
    assert_eq!(run(&mut store, "LLEN l", 2000), Reply::Integer(0));
    assert_eq!(store.len(), 0);
}
