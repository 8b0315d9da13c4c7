use bytes::{Bytes, BytesMut};

use crate::change::NoLog;
use crate::command::Command;
use crate::reply::Reply;
use crate::resp::RequestParser;
use crate::store::Store;

fn command(line: &str) -> Command {
    Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()).unwrap()
}

fn run(store: &mut Store, line: &str, now: u64) -> Reply {
    let reply = store.execute(command(line), now, &mut NoLog);
    store.assert_consistent();
    reply
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::from(s.to_owned()))
}

fn err(s: &str) -> Reply {
    Reply::Error(Bytes::from(s.to_owned()))
}

/// Every write is logged in a form whose replay (at time 0, as AOF loading does) rebuilds the
/// same values and expiries.
#[test]
fn replaying_the_log_rebuilds_the_same_keyspace() {
    let mut store = Store::default();
    let mut log = BytesMut::new();
    let script = [
        ("SETNX a 1", 0),
        ("SETNX a 2", 0),
        ("SETEX b 100 x", 0),
        ("PSETEX c 100 y", 0),
        ("SETRANGE b 5 zz", 10),
        ("SETRANGE n 2 q", 10),
        ("INCRBYFLOAT a 1.5", 20),
        ("INCRBYFLOAT f 9223372036854775807", 20),
        ("INCRBYFLOAT f 1", 20),
        ("GETEX c PX 5000", 30),
        ("GETEX b PERSIST", 30),
        ("SET g 1", 30),
        ("GETDEL g", 30),
        ("MSETNX m1 1 m2 2", 40),
        ("MSETNX m2 3 m3 4", 40),
        ("RENAME c r", 50),
        ("SET d 4 PX 900", 50),
        ("RENAMENX d r", 50),
        ("RENAMENX d r2", 50),
        ("COPY r2 r3", 60),
        ("COPY a r3 REPLACE", 60),
        ("SET u 1", 60),
        ("UNLINK u m1", 60),
        ("GETEX n EXAT 1", 70), // in the past: deletes n
    ];
    for (line, now) in script {
        let reply = store.execute(command(line), now, &mut log);
        assert!(!reply.is_error(), "{line}: {reply:?}");
        store.assert_consistent();
    }
    let mut replayed = Store::default();
    let mut parser = RequestParser::default();
    while let Some(args) = parser.parse(&mut log).unwrap() {
        let reply = replayed.apply_replayed(Command::parse(args).unwrap());
        assert!(!reply.is_error(), "{reply:?}");
        replayed.assert_consistent();
    }
    assert_eq!(replayed.len(), store.len());
    for key in [
        "a", "b", "c", "d", "f", "g", "n", "m1", "m2", "m3", "r", "r2", "r3", "u",
    ] {
        for line in [format!("GET {key}"), format!("PEXPIRETIME {key}")] {
            assert_eq!(
                run(&mut replayed, &line, 80),
                run(&mut store, &line, 80),
                "{line}"
            );
        }
    }
    assert_eq!(run(&mut store, "GET f", 80), bulk("9223372036854775808"));
    assert_eq!(run(&mut store, "GET b", 80), bulk("x\0\0\0\0zz"));
    assert_eq!(run(&mut store, "PEXPIRETIME r2", 80), Reply::Integer(950));
}

#[test]
fn rename_and_copy_follow_redis() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "RENAME x y", 0), err("ERR no such key"));
    run(&mut store, "SET x 1 PX 100", 0);
    assert_eq!(run(&mut store, "RENAME x x", 0), Reply::ok());
    assert_eq!(run(&mut store, "RENAMENX x x", 0), Reply::Integer(0));
    assert_eq!(run(&mut store, "RENAME x y", 0), Reply::ok());
    assert_eq!(run(&mut store, "PTTL y", 0), Reply::Integer(100));
    assert_eq!(
        run(&mut store, "COPY y y", 0),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(
        run(&mut store, "COPY y z DB 1", 0),
        err("ERR Copying to another database is not allowed in cluster mode")
    );
    assert_eq!(run(&mut store, "COPY y z BAD", 0), err("ERR syntax error"));
    assert_eq!(run(&mut store, "COPY y z", 0), Reply::Integer(1));
    assert_eq!(run(&mut store, "COPY y z", 0), Reply::Integer(0));
    run(&mut store, "RPUSH l a b", 0);
    assert_eq!(run(&mut store, "COPY l z REPLACE", 0), Reply::Integer(1));
    assert_eq!(
        run(&mut store, "LRANGE z 0 -1", 0),
        Reply::Array(vec![bulk("a"), bulk("b")])
    );
    // The key expires: rename sees no key.
    assert_eq!(run(&mut store, "RENAME y w", 101), err("ERR no such key"));
}

#[test]
fn object_encoding_names() {
    let mut store = Store::default();
    for (line, encoding) in [
        ("SET s 12345", "int"),
        ("SET s abc", "embstr"),
        (
            "SET s aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "raw",
        ),
        ("RPUSH l a", "quicklist"),
        ("HSET h f v", "listpack"),
        ("SADD i 1 2", "intset"),
        ("SADD t a", "hashtable"),
        ("ZADD z 1 a", "listpack"),
    ] {
        run(&mut store, line, 0);
        let key = line.split(' ').nth(1).unwrap();
        assert_eq!(
            run(&mut store, &format!("OBJECT ENCODING {key}"), 0),
            bulk(encoding),
            "{line}"
        );
    }
    assert_eq!(run(&mut store, "OBJECT ENCODING nope", 0), Reply::NullBulk);
}

/// A SCAN that runs while keys are added and removed returns every key present throughout.
#[test]
fn scan_meets_every_key_that_stays() {
    let mut store = Store::default();
    for i in 0..300 {
        run(&mut store, &format!("SET k{i} v"), 0);
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let Reply::Array(page) = run(&mut store, &format!("SCAN {cursor} COUNT 7"), 0) else {
            panic!("not a page");
        };
        let [Reply::Bulk(next), Reply::Array(keys)] = &page[..] else {
            panic!("bad page {page:?}");
        };
        for key in keys {
            let Reply::Bulk(key) = key else { panic!() };
            seen.insert(key.clone());
        }
        // Churn: delete a key the walk has not reached (an odd one), add a new one.
        round += 1;
        run(&mut store, &format!("DEL k{}", 2 * round + 1), 0);
        run(&mut store, &format!("SET new{round} v"), 0);
        cursor = String::from_utf8(next.to_vec()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    for i in (0..300).step_by(2) {
        assert!(seen.contains(format!("k{i}").as_bytes()), "k{i} missed");
    }
    assert_eq!(
        run(&mut store, "SCAN 0 MATCH k1? COUNT 1000 TYPE string", 0),
        run(&mut store, "SCAN 0 COUNT 1000 MATCH k1? TYPE STRING", 0)
    );
    assert_eq!(run(&mut store, "SCAN x", 0), err("ERR invalid cursor"));
    assert_eq!(
        run(&mut store, "SCAN 0 COUNT 0", 0),
        err("ERR syntax error")
    );
}

#[test]
fn string_edge_cases() {
    let mut store = Store::default();
    assert_eq!(run(&mut store, "GETRANGE k 0 -1", 0), bulk(""));
    run(&mut store, "SET k Hello", 0);
    assert_eq!(run(&mut store, "GETRANGE k -3 -1", 0), bulk("llo"));
    assert_eq!(run(&mut store, "GETRANGE k -1 -3", 0), bulk(""));
    assert_eq!(run(&mut store, "SUBSTR k 1 100", 0), bulk("ello"));
    assert_eq!(
        run(&mut store, "SETRANGE k -1 x", 0),
        err("ERR offset is out of range")
    );
    assert_eq!(
        run(&mut store, "SETRANGE k 536870911 xx", 0),
        err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    assert_eq!(run(&mut store, "SETRANGE missing 5 ", 0), Reply::Integer(0));
    assert_eq!(run(&mut store, "EXISTS missing", 0), Reply::Integer(0));
    assert_eq!(
        run(&mut store, "INCRBYFLOAT k 1", 0),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        run(&mut store, "SETEX k 0 v", 0),
        err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(
        run(&mut store, "GETEX k EX 1 PERSIST", 0),
        err("ERR syntax error")
    );
    run(&mut store, "RPUSH l a", 0);
    assert_eq!(
        run(&mut store, "GETDEL l", 0),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(run(&mut store, "EXPIRETIME l", 0), Reply::Integer(-1));
    assert_eq!(run(&mut store, "EXPIRETIME nope", 0), Reply::Integer(-2));
    assert_eq!(run(&mut store, "TOUCH l k nope", 0), Reply::Integer(2));
}
