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

fn err(s: &str) -> Reply {
    Reply::Error(Bytes::from(s.to_owned()))
}

fn int(n: i64) -> Reply {
    Reply::Integer(n)
}

#[test]
fn pfadd_pfcount_and_the_cache() {
    let mut s = Store::default();
    assert_eq!(run(&mut s, "PFADD h"), int(1));
    assert_eq!(run(&mut s, "PFADD h"), int(0));
    assert_eq!(run(&mut s, "PFCOUNT h"), int(0));
    assert_eq!(run(&mut s, "PFADD h a b c"), int(1));
    assert_eq!(run(&mut s, "PFADD h a b c"), int(0));
    assert_eq!(
        run(&mut s, "GETRANGE h 15 15"),
        Reply::Bulk(Bytes::from_static(b"\x80"))
    );
    assert_eq!(run(&mut s, "PFCOUNT h"), int(3));
    assert_eq!(
        run(&mut s, "GETRANGE h 15 15"),
        Reply::Bulk(Bytes::from_static(b"\x00"))
    );
    assert_eq!(run(&mut s, "PFCOUNT nokey"), int(0));
    run(&mut s, "PFADD g c d e");
    assert_eq!(run(&mut s, "PFCOUNT h g nokey"), int(5));
}

#[test]
fn pfmerge_and_pfdebug() {
    let mut s = Store::default();
    run(&mut s, "PFADD a 1 2 3");
    run(&mut s, "PFADD b 3 4");
    assert_eq!(run(&mut s, "PFMERGE d a b"), Reply::ok());
    assert_eq!(run(&mut s, "PFCOUNT d"), int(4));
    assert_eq!(
        run(&mut s, "PFDEBUG ENCODING d"),
        Reply::Simple(Bytes::from_static(b"sparse"))
    );
    assert_eq!(run(&mut s, "PFDEBUG TODENSE d"), int(1));
    assert_eq!(run(&mut s, "PFDEBUG TODENSE d"), int(0));
    assert_eq!(
        run(&mut s, "PFDEBUG ENCODING d"),
        Reply::Simple(Bytes::from_static(b"dense"))
    );
    assert_eq!(
        run(&mut s, "PFDEBUG DECODE d"),
        err("ERR HLL encoding is not sparse")
    );
    assert_eq!(run(&mut s, "PFCOUNT d"), int(4));
    // A dense source makes the destination dense.
    assert_eq!(run(&mut s, "PFMERGE e a d"), Reply::ok());
    assert_eq!(
        run(&mut s, "PFDEBUG ENCODING e"),
        Reply::Simple(Bytes::from_static(b"dense"))
    );
    let Reply::Array(regs) = run(&mut s, "PFDEBUG GETREG a") else {
        panic!("GETREG answers an array");
    };
    assert_eq!(regs.len(), 16384);
    assert_eq!(
        run(&mut s, "PFDEBUG GETREG nokey"),
        err("ERR The specified key does not exist")
    );
    assert_eq!(
        run(&mut s, "PFDEBUG FOO a"),
        err("ERR Unknown PFDEBUG subcommand 'FOO'")
    );
}

#[test]
fn type_checks_and_corruption() {
    let mut s = Store::default();
    run(&mut s, "SET str bar");
    let not_hll = err("WRONGTYPE Key is not a valid HyperLogLog string value.");
    assert_eq!(run(&mut s, "PFADD str 1"), not_hll);
    assert_eq!(run(&mut s, "PFCOUNT str"), not_hll);
    assert_eq!(run(&mut s, "PFMERGE d str"), not_hll);
    assert_eq!(run(&mut s, "PFMERGE str d"), not_hll);
    run(&mut s, "LPUSH l a");
    assert!(
        matches!(run(&mut s, "PFADD l 1"), Reply::Error(e) if e.starts_with(b"WRONGTYPE Operation"))
    );
    run(&mut s, "PFADD h a b c");
    run(&mut s, "APPEND h hello");
    assert_eq!(
        run(&mut s, "PFCOUNT h"),
        err("INVALIDOBJ Corrupted HLL object detected")
    );
    run(&mut s, "DEL h");
    run(&mut s, "PFADD h a b c");
    run(&mut s, "SETRANGE h 4 x");
    assert_eq!(run(&mut s, "PFCOUNT h"), not_hll);
}

#[test]
fn writes_replay_from_the_log() {
    let mut store = Store::default();
    let mut log = BytesMut::new();
    for line in [
        "PFADD a x y z",
        "PFADD b z w",
        "PFMERGE c a b",
        "PFCOUNT c",
        "PFDEBUG TODENSE b",
    ] {
        let reply = store.execute(command(line), 0, &mut log);
        assert!(!reply.is_error(), "{line}: {reply:?}");
    }
    let mut replayed = Store::default();
    let mut parser = RequestParser::default();
    while let Some(args) = parser.parse(&mut log).unwrap() {
        assert!(!replayed
            .apply_replayed(Command::parse(args).unwrap())
            .is_error());
    }
    for key in ["a", "b", "c"] {
        let line = format!("PFCOUNT {key}");
        assert_eq!(run(&mut replayed, &line), run(&mut store, &line), "{line}");
        let line = format!("GET {key}");
        assert_eq!(run(&mut replayed, &line), run(&mut store, &line), "{line}");
    }
}
