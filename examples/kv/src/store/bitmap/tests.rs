use bytes::{Bytes, BytesMut};

use crate::change::NoLog;
use crate::command::Command;
use crate::reply::Reply;
use crate::resp::RequestParser;
use crate::store::Store;

fn command(line: &str) -> Command {
    Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()).unwrap()
}

fn run(store: &mut Store, line: &str) -> Reply {
    let reply = store.execute(command(line), 0, &mut NoLog);
    store.assert_consistent();
    reply
}

fn int(n: i64) -> Reply {
    Reply::Integer(n)
}

fn err(s: &str) -> Reply {
    Reply::Error(Bytes::from(s.to_owned()))
}

#[test]
fn setbit_getbit_and_offsets() {
    let mut s = Store::default();
    assert_eq!(run(&mut s, "SETBIT k 7 1"), int(0));
    assert_eq!(run(&mut s, "SETBIT k 7 1"), int(1));
    assert_eq!(
        run(&mut s, "GET k"),
        Reply::Bulk(Bytes::from_static(b"\x01"))
    );
    assert_eq!(run(&mut s, "GETBIT k 7"), int(1));
    assert_eq!(run(&mut s, "GETBIT k 100"), int(0));
    assert_eq!(run(&mut s, "GETBIT nokey 0"), int(0));
    let bad_offset = err("ERR bit offset is not an integer or out of range");
    assert_eq!(run(&mut s, "SETBIT k -1 1"), bad_offset);
    assert_eq!(run(&mut s, "SETBIT k 4294967296 1"), bad_offset);
    assert_eq!(run(&mut s, "GETBIT k x"), bad_offset);
    let bad_bit = err("ERR bit is not an integer or out of range");
    assert_eq!(run(&mut s, "SETBIT k 0 2"), bad_bit);
    assert_eq!(run(&mut s, "SETBIT k 0 x"), bad_bit);
    run(&mut s, "LPUSH l a");
    assert!(matches!(run(&mut s, "SETBIT l 0 1"), Reply::Error(e) if e.starts_with(b"WRONGTYPE")));
}

#[test]
fn bitcount_and_bitpos_ranges() {
    let mut s = Store::default();
    run(&mut s, "SET f foobar");
    assert_eq!(run(&mut s, "BITCOUNT f"), int(26));
    assert_eq!(run(&mut s, "BITCOUNT f 1 1"), int(6));
    assert_eq!(run(&mut s, "BITCOUNT f 5 30 BIT"), int(17));
    assert_eq!(run(&mut s, "BITCOUNT f -1 -2"), int(0));
    assert_eq!(run(&mut s, "BITCOUNT f 0 -1 bad"), err("ERR syntax error"));
    assert_eq!(run(&mut s, "BITCOUNT f 0"), err("ERR syntax error"));
    assert_eq!(run(&mut s, "BITCOUNT nokey 0"), int(0));
    for bit in 0..12 {
        run(&mut s, &format!("SETBIT p {bit} 1"));
    }
    run(&mut s, "SETBIT p 23 0");
    assert_eq!(run(&mut s, "BITPOS p 0"), int(12));
    assert_eq!(run(&mut s, "BITPOS p 1 2"), int(-1));
    assert_eq!(run(&mut s, "BITPOS p 1 3 -1 BIT"), int(3));
    assert_eq!(run(&mut s, "BITPOS nokey 0"), int(0));
    assert_eq!(run(&mut s, "BITPOS nokey 1"), int(-1));
    assert_eq!(
        run(&mut s, "BITPOS p 2"),
        err("ERR The bit argument must be 1 or 0.")
    );
    for bit in 0..8 {
        run(&mut s, &format!("SETBIT full {bit} 1"));
    }
    assert_eq!(run(&mut s, "BITPOS full 0"), int(8));
    assert_eq!(run(&mut s, "BITPOS full 0 0"), int(8));
    assert_eq!(run(&mut s, "BITPOS full 0 0 -1"), int(-1));
    assert_eq!(run(&mut s, "BITPOS full 0 0 -1 BIT"), int(-1));
}

#[test]
fn bitop_stores_or_deletes() {
    let mut s = Store::default();
    run(&mut s, "SET a abc");
    run(&mut s, "SET b a");
    assert_eq!(run(&mut s, "BITOP AND d a b"), int(3));
    assert_eq!(
        run(&mut s, "GET d"),
        Reply::Bulk(Bytes::from_static(b"a\0\0"))
    );
    assert_eq!(
        run(&mut s, "BITOP NOT d a b"),
        err("ERR BITOP NOT must be called with a single source key.")
    );
    assert_eq!(run(&mut s, "BITOP NAND d a"), err("ERR syntax error"));
    assert_eq!(run(&mut s, "BITOP OR d x y"), int(0));
    assert_eq!(run(&mut s, "EXISTS d"), int(0));
}

#[test]
fn bitfield_operations_and_overflow() {
    let mut s = Store::default();
    let arr = |v: Vec<Reply>| Reply::Array(v);
    assert_eq!(
        run(&mut s, "BITFIELD k SET i8 0 100 GET i8 0"),
        arr(vec![int(0), int(100)])
    );
    assert_eq!(
        run(&mut s, "BITFIELD k INCRBY i8 0 100"),
        arr(vec![int(-56)])
    );
    assert_eq!(
        run(&mut s, "BITFIELD k OVERFLOW SAT INCRBY i8 0 -100"),
        arr(vec![int(-128)])
    );
    assert_eq!(
        run(&mut s, "BITFIELD k OVERFLOW FAIL INCRBY i8 0 -1"),
        arr(vec![Reply::NullBulk])
    );
    assert_eq!(
        run(&mut s, "BITFIELD k SET u8 #1 255 GET u8 8"),
        arr(vec![int(0), int(255)])
    );
    assert_eq!(run(&mut s, "BITFIELD_RO k GET u8 8"), arr(vec![int(255)]));
    assert_eq!(
        run(&mut s, "BITFIELD_RO k SET u8 8 1"),
        err("ERR BITFIELD_RO only supports the GET subcommand")
    );
    let bad_type = err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.");
    assert_eq!(run(&mut s, "BITFIELD k GET u64 0"), bad_type);
    assert_eq!(run(&mut s, "BITFIELD k GET I8 0"), bad_type);
    assert_eq!(
        run(&mut s, "BITFIELD k OVERFLOW x"),
        err("ERR Invalid OVERFLOW type specified")
    );
    assert_eq!(run(&mut s, "BITFIELD k GET i8"), err("ERR syntax error"));
    assert_eq!(run(&mut s, "BITFIELD k"), arr(vec![]));
}

/// Every write replays from the log into the same values.
#[test]
fn writes_replay_from_the_log() {
    let mut store = Store::default();
    let mut log = BytesMut::new();
    for line in [
        "SETBIT a 100 1",
        "SETBIT a 100 1",
        "SETBIT a 3 0",
        "BITFIELD b SET u4 #3 9 INCRBY i5 7 -3",
        "BITFIELD b OVERFLOW FAIL INCRBY u2 100 9",
        "SET c xyz",
        "BITOP XOR d a b c",
        "BITOP NOT e nokey",
    ] {
        let reply = store.execute(command(line), 0, &mut log);
        assert!(!reply.is_error(), "{line}: {reply:?}");
    }
    let mut replayed = Store::default();
    let mut parser = RequestParser::default();
    while let Some(args) = parser.parse(&mut log).unwrap() {
        let reply = replayed.apply_replayed(Command::parse(args).unwrap());
        assert!(!reply.is_error(), "{reply:?}");
    }
    assert_eq!(replayed.len(), store.len());
    for key in ["a", "b", "c", "d", "e"] {
        let line = format!("GET {key}");
        assert_eq!(run(&mut replayed, &line), run(&mut store, &line), "{line}");
    }
}
