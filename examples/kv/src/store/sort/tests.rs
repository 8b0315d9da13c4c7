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

fn bulks(items: &[&str]) -> Reply {
    Reply::Array(
        items
            .iter()
            .map(|s| Reply::Bulk(Bytes::from(s.to_string())))
            .collect(),
    )
}

fn err(s: &str) -> Reply {
    Reply::Error(Bytes::from(s.to_owned()))
}

#[test]
fn numeric_alpha_limit_and_desc() {
    let mut s = Store::default();
    run(&mut s, "RPUSH l 3 10 2 1");
    assert_eq!(run(&mut s, "SORT l"), bulks(&["1", "2", "3", "10"]));
    assert_eq!(run(&mut s, "SORT l DESC"), bulks(&["10", "3", "2", "1"]));
    assert_eq!(run(&mut s, "SORT l ALPHA"), bulks(&["1", "10", "2", "3"]));
    assert_eq!(run(&mut s, "SORT l LIMIT 1 2"), bulks(&["2", "3"]));
    assert_eq!(run(&mut s, "SORT l LIMIT -5 1"), bulks(&["1"]));
    assert_eq!(run(&mut s, "SORT l LIMIT 10 1"), bulks(&[]));
    assert_eq!(
        run(&mut s, "SORT l BY nosort"),
        bulks(&["3", "10", "2", "1"])
    );
    assert_eq!(
        run(&mut s, "SORT l BY nosort DESC LIMIT 1 2"),
        bulks(&["2", "10"])
    );
    run(&mut s, "RPUSH bad 1 x");
    assert_eq!(
        run(&mut s, "SORT bad"),
        err("ERR One or more scores can't be converted into double")
    );
    run(&mut s, "SET str x");
    assert!(matches!(run(&mut s, "SORT str"), Reply::Error(e) if e.starts_with(b"WRONGTYPE")));
    assert_eq!(run(&mut s, "SORT nokey"), bulks(&[]));
    assert_eq!(run(&mut s, "SORT_RO l STORE d"), err("ERR syntax error"));
}

#[test]
fn by_and_get_patterns() {
    let mut s = Store::default();
    run(&mut s, "SADD s a b c");
    run(&mut s, "MSET w_a 3 w_b 1 w_c 2 o_a A o_c C");
    run(&mut s, "HSET h_b f HB");
    assert_eq!(run(&mut s, "SORT s BY w_*"), bulks(&["b", "c", "a"]));
    let reply = run(&mut s, "SORT s BY w_* GET # GET o_* GET h_*->f");
    let nil = Reply::NullBulk;
    let bulk = |t: &str| Reply::Bulk(Bytes::from(t.to_owned()));
    assert_eq!(
        reply,
        Reply::Array(vec![
            bulk("b"),
            nil.clone(),
            bulk("HB"),
            bulk("c"),
            bulk("C"),
            nil.clone(),
            bulk("a"),
            bulk("A"),
            nil,
        ])
    );
    // A set with a constant BY comes out sorted.
    assert_eq!(run(&mut s, "SORT s BY nosort"), bulks(&["a", "b", "c"]));
    assert_eq!(
        run(&mut s, "SORT s BY w_* ALPHA DESC"),
        bulks(&["a", "c", "b"])
    );
    run(&mut s, "ZADD z 1 x 2 y 3 z");
    assert_eq!(
        run(&mut s, "SORT z BY nosort DESC LIMIT 0 2"),
        bulks(&["z", "y"])
    );
}

#[test]
fn store_writes_a_list_and_replays() {
    let mut store = Store::default();
    let mut log = BytesMut::new();
    for line in [
        "RPUSH l 3 1 2",
        "SET k_1 x",
        "SET d old",
        "SORT l STORE d",
        "SORT l GET k_* STORE e",
        "SORT nokey STORE l",
    ] {
        let reply = store.execute(command(line), 0, &mut log);
        assert!(!reply.is_error(), "{line}: {reply:?}");
    }
    assert_eq!(run(&mut store, "LRANGE d 0 -1"), bulks(&["1", "2", "3"]));
    assert_eq!(run(&mut store, "LRANGE e 0 -1"), bulks(&["x", "", ""]));
    assert_eq!(run(&mut store, "EXISTS l"), Reply::Integer(0));
    let mut replayed = Store::default();
    let mut parser = RequestParser::default();
    while let Some(args) = parser.parse(&mut log).unwrap() {
        assert!(!replayed
            .apply_replayed(Command::parse(args).unwrap())
            .is_error());
    }
    for key in ["d", "e", "l"] {
        let line = format!("LRANGE {key} 0 -1");
        assert_eq!(run(&mut replayed, &line), run(&mut store, &line), "{line}");
    }
}

#[test]
fn pattern_keys_for_the_multi_key_route() {
    let mut s = Store::default();
    run(&mut s, "RPUSH l 1 2");
    let named = [Bytes::from_static(b"l")];
    let keys = s.sort_pattern_keys(&command("SORT l BY w_* GET # GET h_*->f"), &named, 0);
    assert_eq!(keys, ["w_1", "h_1", "w_2", "h_2"].map(Bytes::from));
    assert!(s
        .sort_pattern_keys(&command("SORT l BY nosort GET #"), &named, 0)
        .is_empty());
}

#[test]
fn cluster_mode_refuses_patterns_as_redis() {
    let mut s = Store::default();
    s.enable_slot_index();
    run(&mut s, "RPUSH l 2 1");
    assert_eq!(
        run(&mut s, "SORT l BY w_*"),
        err("ERR BY option of SORT denied in Cluster mode.")
    );
    assert_eq!(
        run(&mut s, "SORT l GET #"),
        err("ERR GET option of SORT denied in Cluster mode.")
    );
    assert_eq!(run(&mut s, "SORT l BY nosort"), bulks(&["2", "1"]));
}
