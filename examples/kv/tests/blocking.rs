//! BLPOP and BRPOP with real processes: replies that need no waiting against `redis-server`,
//! timeouts, wake-ups in the order clients blocked, a push serving waiters on another
//! connection's shard, and a closed connection leaving no waiter behind (no item popped for
//! nobody). Waits are observed through INFO's `blocked_clients`, never by sleeping.

mod common;
mod diff;

use std::time::Duration;

use common::{eventually, Reply, Resp, Server, TempDir};
use diff::{servers, Pair};

/// Generous: the machine running the tests may be loaded.
const WAIT: Duration = Duration::from_secs(30);

fn blocked_clients(conn: &mut Resp) -> u64 {
    let Reply::Bulk(Some(text)) = conn.call(&["INFO", "clients"]) else {
        panic!("INFO is a bulk string");
    };
    let text = String::from_utf8(text).expect("utf-8 INFO");
    text.lines()
        .find_map(|line| line.strip_prefix("blocked_clients:"))
        .expect("INFO clients has blocked_clients")
        .trim()
        .parse()
        .expect("a number")
}

fn wait_blocked(conn: &mut Resp, count: u64) {
    assert!(
        eventually(WAIT, || blocked_clients(conn) == count),
        "blocked_clients never reached {count} (now {})",
        blocked_clients(conn)
    );
}

fn pair(key: &str, item: &str) -> Reply {
    Reply::Array(Some(vec![Reply::bulk(key), Reply::bulk(item)]))
}

#[test]
fn pops_that_need_not_wait_answer_as_redis() {
    let (oracle, server) = servers(3, &[]);
    let mut pair = Pair::new(&oracle, &server, "blocking pops");
    for step in [
        &["FLUSHALL"][..],
        &["RPUSH", "{b}l", "a", "b", "c", "d"],
        &["BLPOP", "{b}l", "0"],
        &["BRPOP", "{b}missing", "{b}l", "0"],
        &["SET", "{b}s", "x"],
        &["BLPOP", "{b}s", "0"],
        &["BLPOP", "{b}missing", "{b}s", "{b}l", "0"],
        &["BLPOP", "{b}l", "{b}s", "0"],
        &["BLPOP", "{b}l", "abc"],
        &["BLPOP", "{b}l", "-1"],
        &["BLPOP", "{b}l"],
        &["BRPOP", "{b}l", "{b}l", "0.5"],
        // Empty now: both wait out a short timeout and answer nil.
        &["BLPOP", "{b}l", "0.05"],
        &["BRPOP", "{b}missing", "0.01"],
        &["EXISTS", "{b}l"],
    ] {
        pair.check_str(step);
    }
    pair.report();
}

#[test]
fn a_timeout_answers_nil_and_leaves_no_waiter() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["BLPOP", "{t}k", "0.1"]), Reply::Array(None));
    assert_eq!(
        conn.call(&["BRPOP", "{t}k", "{t}other", "0.2"]),
        Reply::Array(None)
    );
    let mut observer = server.connect();
    wait_blocked(&mut observer, 0);
    // The connection is still usable, and a later push is not taken by a waiter that left.
    assert_eq!(conn.call(&["LPUSH", "{t}k", "x"]), Reply::Int(1));
    assert_eq!(conn.call(&["LLEN", "{t}k"]), Reply::Int(1));
}

#[test]
fn clients_are_served_in_the_order_they_blocked() {
    let server = Server::start(&["--shards", "3"]);
    let mut observer = server.connect();
    let mut waiters: Vec<Resp> = (0..3).map(|_| server.connect()).collect();
    for (i, waiter) in waiters.iter_mut().enumerate() {
        waiter
            .send(&common::request(&["BLPOP", "{q}other", "{q}k", "0"]))
            .unwrap();
        wait_blocked(&mut observer, i as u64 + 1);
    }
    // One push of three items serves all three, first blocked first, one item each.
    assert_eq!(
        observer.call(&["RPUSH", "{q}k", "a", "b", "c"]),
        Reply::Int(3)
    );
    for (waiter, item) in waiters.iter_mut().zip(["a", "b", "c"]) {
        assert_eq!(waiter.read().unwrap(), pair("{q}k", item));
    }
    wait_blocked(&mut observer, 0);
    assert_eq!(observer.call(&["EXISTS", "{q}k"]), Reply::Int(0));

    // A push of one item serves only the first; the next push the second (from the right).
    waiters[0]
        .send(&common::request(&["BRPOP", "{q}k", "0"]))
        .unwrap();
    wait_blocked(&mut observer, 1);
    waiters[1]
        .send(&common::request(&["BRPOP", "{q}k", "0"]))
        .unwrap();
    wait_blocked(&mut observer, 2);
    assert_eq!(observer.call(&["LPUSH", "{q}k", "x"]), Reply::Int(1));
    assert_eq!(waiters[0].read().unwrap(), pair("{q}k", "x"));
    wait_blocked(&mut observer, 1);
    assert_eq!(observer.call(&["RPUSH", "{q}k", "y", "z"]), Reply::Int(2));
    assert_eq!(waiters[1].read().unwrap(), pair("{q}k", "z"));
    assert_eq!(
        observer.call(&["LRANGE", "{q}k", "0", "-1"]),
        Reply::Array(Some(vec![Reply::bulk("y")]))
    );
    // The waiters' connections go on as usual.
    assert_eq!(waiters[2].call(&["LPOP", "{q}k"]), Reply::bulk("y"));
}

#[test]
fn closed_connections_leave_their_waits_on_every_shard() {
    let server = Server::start(&["--shards", "4"]);
    let mut observer = server.connect();
    // Keys and connections spread over the shards: some waits sit on another shard than
    // their connection's, and go through the cross-shard cancel.
    let keys = ["ka", "kb", "kc", "kd", "ke", "kf", "kg", "kh"];
    let mut gone = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let mut conn = server.connect();
        conn.send(&common::request(&["BLPOP", key, "0"])).unwrap();
        wait_blocked(&mut observer, i as u64 + 1);
        gone.push(conn);
    }
    drop(gone);
    wait_blocked(&mut observer, 0);
    for key in keys {
        assert_eq!(observer.call(&["LPUSH", key, "kept"]), Reply::Int(1));
        assert_eq!(observer.call(&["LLEN", key]), Reply::Int(1), "{key}");
    }
}

#[test]
fn pops_are_logged_and_answered_through_the_durability_gate() {
    let dir = TempDir::new("blocking-aof");
    let args = ["--shards", "3", "--aof", dir.arg(), "--fsync", "always"];
    let mut server = Server::start(&args);
    let mut observer = server.connect();
    let mut waiter = server.connect();
    assert_eq!(observer.call(&["RPUSH", "{a}k", "first"]), Reply::Int(1));
    assert_eq!(waiter.call(&["BLPOP", "{a}k", "0"]), pair("{a}k", "first"));
    waiter
        .send(&common::request(&["BRPOP", "{a}k", "0"]))
        .unwrap();
    wait_blocked(&mut observer, 1);
    assert_eq!(observer.call(&["RPUSH", "{a}k", "a", "b"]), Reply::Int(2));
    assert_eq!(waiter.read().unwrap(), pair("{a}k", "b"));
    // LMPOP, and BLMPOP answered at once and after waiting, logged as LPOP/RPOP key n.
    let popped = |key: &str, items: &[&str]| {
        Reply::Array(Some(vec![
            Reply::bulk(key),
            Reply::Array(Some(items.iter().map(|i| Reply::bulk(i)).collect())),
        ]))
    };
    assert_eq!(
        observer.call(&["RPUSH", "{a}k", "c", "d", "e"]),
        Reply::Int(4)
    );
    assert_eq!(
        waiter.call(&["BLMPOP", "0", "1", "{a}k", "RIGHT", "COUNT", "2"]),
        popped("{a}k", &["e", "d"])
    );
    waiter
        .send(&common::request(&[
            "BLMPOP", "0", "1", "{a}e", "LEFT", "COUNT", "5",
        ]))
        .unwrap();
    wait_blocked(&mut observer, 1);
    assert_eq!(observer.call(&["RPUSH", "{a}e", "1", "2"]), Reply::Int(2));
    assert_eq!(waiter.read().unwrap(), popped("{a}e", &["1", "2"]));
    assert_eq!(
        observer.call(&["LMPOP", "1", "{a}k", "LEFT"]),
        popped("{a}k", &["a"])
    );
    drop((observer, waiter));
    server.stop();

    // Every pop was logged: only "c" is left after replay.
    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["LRANGE", "{a}k", "0", "-1"]),
        Reply::Array(Some(vec![Reply::bulk("c")]))
    );
    assert_eq!(conn.call(&["EXISTS", "{a}e"]), Reply::Int(0));
}

#[test]
fn keys_on_several_shards_wait_on_all_of_them() {
    let server = Server::start(&["--shards", "4"]);
    let mut conn = server.connect();
    let names: Vec<String> = (0..16).map(|i| format!("key{i}")).collect();
    let mut args = vec!["BLPOP"];
    args.extend(names.iter().map(String::as_str));
    args.push("0.1");
    assert_eq!(
        conn.call(&args),
        Reply::Array(None),
        "times out over 4 shards"
    );
    assert_eq!(conn.call(&["RPUSH", "key9", "a", "b"]), Reply::Int(2));
    let count = names.len().to_string();
    let mut args = vec!["BLMPOP", "0", &count];
    args.extend(names.iter().map(String::as_str));
    args.extend(["LEFT", "COUNT", "5"]);
    assert_eq!(
        conn.call(&args),
        Reply::Array(Some(vec![
            Reply::bulk("key9"),
            Reply::Array(Some(vec![Reply::bulk("a"), Reply::bulk("b")]))
        ]))
    );
}

/// A key that becomes another type while a pop waits on it serves nobody: the pop keeps
/// waiting and takes the next item of a list, as in Redis (keys on one shard and over
/// several; sorted-set pops too).
#[test]
fn a_waited_key_of_another_type_keeps_the_pop_waiting() {
    let server = Server::start(&["--shards", "4"]);
    let mut observer = server.connect();
    let mut waiter = server.connect();
    let spread: Vec<String> = (0..16).map(|i| format!("key{i}")).collect();
    for (keys, pop, push, item) in [
        (
            vec!["{w}a".to_string(), "{w}b".to_string()],
            "BLPOP",
            "RPUSH",
            "x",
        ),
        (spread.clone(), "BLPOP", "RPUSH", "x"),
        (spread.clone(), "BZPOPMIN", "ZADD", "x"),
    ] {
        observer.call(&["FLUSHALL"]);
        let mut request = vec![pop];
        request.extend(keys.iter().map(String::as_str));
        request.push("0");
        waiter.send(&common::request(&request)).unwrap();
        wait_blocked(&mut observer, 1);
        // The first key becomes a string: the pop would answer WRONGTYPE if it woke.
        assert_eq!(observer.call(&["SET", &keys[0], "s"]), Reply::ok());
        let last = keys.last().unwrap().as_str();
        let pushed = if push == "ZADD" {
            observer.call(&["ZADD", last, "1", item])
        } else {
            observer.call(&[push, last, item])
        };
        assert_eq!(pushed, Reply::Int(1));
        let expected = if pop == "BZPOPMIN" {
            Reply::Array(Some(vec![
                Reply::bulk(last),
                Reply::bulk(item),
                Reply::bulk("1"),
            ]))
        } else {
            pair(last, item)
        };
        assert_eq!(waiter.read().unwrap(), expected, "{pop} over {keys:?}");
        wait_blocked(&mut observer, 0);
        assert_eq!(observer.call(&["GET", &keys[0]]), Reply::bulk("s"));
    }
}

#[test]
fn moves_that_need_not_wait_answer_as_redis() {
    let (oracle, server) = servers(3, &[]);
    let mut pair = Pair::new(&oracle, &server, "blocking moves");
    for step in [
        &["FLUSHALL"][..],
        &["RPUSH", "{m}src", "a", "b", "c"],
        &["BLMOVE", "{m}src", "{m}dst", "LEFT", "RIGHT", "0"],
        &["BLMOVE", "{m}src", "{m}dst", "RIGHT", "LEFT", "0.5"],
        &["BRPOPLPUSH", "{m}src", "{m}dst", "0"],
        &["LRANGE", "{m}dst", "0", "-1"],
        &["BLMOVE", "{m}src", "{m}dst", "UP", "LEFT", "0"],
        &["BLMOVE", "{m}dst", "{m}src", "LEFT", "LEFT", "x"],
        &["BLMOVE", "{m}dst", "{m}src", "LEFT", "LEFT", "-1"],
        &["BRPOPLPUSH", "{m}dst", "{m}src", "x"],
        &["SET", "{m}str", "v"],
        &["BLMOVE", "{m}str", "{m}dst", "LEFT", "LEFT", "0"],
        &["BLMOVE", "{m}dst", "{m}str", "LEFT", "LEFT", "0"],
        &["BRPOPLPUSH", "{m}dst", "{m}dst", "0"],
        // Empty: a short timeout answers nil.
        &["BLMOVE", "{m}empty", "{m}dst", "LEFT", "LEFT", "0.05"],
        &["BRPOPLPUSH", "{m}empty", "{m}dst", "0.01"],
        &["MULTI"],
        &["BLMOVE", "{m}empty", "{m}dst", "LEFT", "LEFT", "0"],
        &["BRPOPLPUSH", "{m}dst", "{m}src", "0"],
        &["EXEC"],
        &["LRANGE", "{m}src", "0", "-1"],
        &["LRANGE", "{m}dst", "0", "-1"],
    ] {
        pair.check_str(step);
    }
    pair.report();
}

/// A waiting BLMOVE is served by a push to its source; the item it moves serves a BLPOP
/// waiting on its destination; a timed-out move answers a nil array (as Redis 7.0).
#[test]
fn a_waiting_move_is_served_and_feeds_the_next_waiter() {
    let server = Server::start(&["--shards", "3"]);
    let mut observer = server.connect();
    let mut mover = server.connect();
    let mut popper = server.connect();
    mover
        .send(&common::request(&[
            "BLMOVE", "{c}in", "{c}out", "RIGHT", "LEFT", "0",
        ]))
        .unwrap();
    wait_blocked(&mut observer, 1);
    popper
        .send(&common::request(&["BLPOP", "{c}out", "0"]))
        .unwrap();
    wait_blocked(&mut observer, 2);
    assert_eq!(observer.call(&["RPUSH", "{c}in", "x", "y"]), Reply::Int(2));
    assert_eq!(mover.read().unwrap(), Reply::bulk("y"));
    assert_eq!(popper.read().unwrap(), pair("{c}out", "y"));
    wait_blocked(&mut observer, 0);
    assert_eq!(
        observer.call(&["LRANGE", "{c}in", "0", "-1"]),
        Reply::Array(Some(vec![Reply::bulk("x")]))
    );
    assert_eq!(observer.call(&["EXISTS", "{c}out"]), Reply::Int(0));
    assert_eq!(
        mover.call(&["BRPOPLPUSH", "{c}none", "{c}out", "0.1"]),
        Reply::Array(None)
    );
}

#[test]
fn mpops_that_need_not_wait_answer_as_redis() {
    let (oracle, server) = servers(3, &[]);
    let mut pair = Pair::new(&oracle, &server, "lmpop and blmpop");
    for step in [
        &["FLUSHALL"][..],
        &["RPUSH", "{p}l", "a", "b", "c", "d", "e"],
        &["LMPOP", "2", "{p}missing", "{p}l", "LEFT"],
        &["LMPOP", "1", "{p}l", "right", "COUNT", "2"],
        &[
            "BLMPOP",
            "0",
            "2",
            "{p}missing",
            "{p}l",
            "RIGHT",
            "count",
            "10",
        ],
        &["EXISTS", "{p}l"],
        &["LMPOP", "1", "{p}l", "LEFT"],
        &["RPUSH", "{p}l", "x"],
        &["SET", "{p}s", "v"],
        &["LMPOP", "2", "{p}s", "{p}l", "LEFT"],
        &["BLMPOP", "0", "2", "{p}l", "{p}s", "LEFT"],
        &["BLMPOP", "0", "1", "{p}s", "LEFT"],
        // Errors, in Redis's order: numkeys, the end, COUNT, then the timeout.
        &["LMPOP", "0", "{p}l", "LEFT"],
        &["LMPOP", "x", "{p}l", "LEFT"],
        &["LMPOP", "-1", "{p}l", "LEFT"],
        &["LMPOP", "2", "{p}l", "LEFT"],
        &["LMPOP", "1", "{p}l", "UP"],
        &["LMPOP", "1", "{p}l", "LEFT", "COUNT"],
        &["LMPOP", "1", "{p}l", "LEFT", "COUNT", "0"],
        &["LMPOP", "1", "{p}l", "LEFT", "COUNT", "-2"],
        &["LMPOP", "1", "{p}l", "LEFT", "COUNT", "1", "COUNT", "2"],
        &["LMPOP", "1", "{p}l", "LEFT", "EXTRA"],
        &["LMPOP", "1", "{p}l"],
        &["BLMPOP", "x", "1", "{p}l", "LEFT"],
        &["BLMPOP", "x", "0", "{p}l", "LEFT"],
        &["BLMPOP", "-1", "1", "{p}l", "LEFT"],
        &["BLMPOP", "-1", "1", "{p}l", "LEFT", "COUNT", "0"],
        &["BLMPOP", "0", "1", "{p}l", "SIDEWAYS"],
        &["BLMPOP", "0", "1", "{p}l"],
        // Empty: a short timeout answers nil.
        &["BLMPOP", "0.05", "2", "{p}none", "{p}l", "LEFT"],
        &["LMPOP", "1", "{p}none", "LEFT"],
        // Inside MULTI a pop that would wait answers nil at once.
        &["MULTI"],
        &["BLMPOP", "0", "1", "{p}none", "LEFT"],
        &["RPUSH", "{p}l", "1", "2", "3"],
        &["BLMPOP", "0", "1", "{p}l", "RIGHT", "COUNT", "2"],
        &["LMPOP", "1", "{p}l", "LEFT", "COUNT", "5"],
        &["EXEC"],
        &["EXISTS", "{p}l"],
    ] {
        pair.check_str(step);
    }
    pair.report();
}

/// BLMPOP, BLPOP and BRPOP waiting on one key, against redis-server: one push serves them in
/// the order they blocked, BLMPOP with up to its COUNT from its end; a key of the list that
/// gets items first serves; a timeout answers nil.
fn mpop_waiters_scenario(port: u16) -> Vec<String> {
    use diff::Conn;
    let blocked = |observer: &mut Conn| -> u64 {
        let info = observer.call_str(&["INFO", "clients"]);
        let diff::V::Bulk(text) = info else {
            panic!("INFO is a bulk string");
        };
        String::from_utf8(text)
            .unwrap()
            .lines()
            .find_map(|line| line.strip_prefix("blocked_clients:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("blocked_clients")
    };
    let mut out = Vec::new();
    let mut observer = Conn::connect(port);
    let requests: [&[&str]; 4] = [
        &["BLMPOP", "0", "2", "{w}other", "{w}k", "LEFT", "COUNT", "2"],
        &["BLPOP", "{w}k", "0"],
        &["BLMPOP", "0", "1", "{w}k", "RIGHT", "COUNT", "5"],
        &["BLMPOP", "0", "2", "{w}k", "{w}other", "RIGHT"],
    ];
    let mut waiters: Vec<Conn> = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let mut waiter = Conn::connect(port);
        waiter.send(&diff::args(request));
        assert!(
            eventually(WAIT, || blocked(&mut observer) == i as u64 + 1),
            "waiter {i} never blocked"
        );
        waiters.push(waiter);
    }
    out.push(
        observer
            .call_str(&["RPUSH", "{w}k", "a", "b", "c", "d", "e", "f"])
            .show(),
    );
    for waiter in &mut waiters[..3] {
        out.push(waiter.read().show());
    }
    assert!(eventually(WAIT, || blocked(&mut observer) == 1));
    // The last one waits on both keys: the other one serves it.
    out.push(observer.call_str(&["LPUSH", "{w}other", "z"]).show());
    out.push(waiters[3].read().show());
    out.push(observer.call_str(&["LRANGE", "{w}k", "0", "-1"]).show());
    out.push(
        waiters[0]
            .call_str(&["BLMPOP", "0.05", "1", "{w}none", "LEFT"])
            .show(),
    );
    assert!(eventually(WAIT, || blocked(&mut observer) == 0));
    out
}

#[test]
fn mpop_waiters_are_served_in_order_as_redis() {
    let oracle = diff::Oracle::start();
    let server = Server::start(&["--shards", "3"]);
    let expected = mpop_waiters_scenario(oracle.port);
    let actual = mpop_waiters_scenario(server.port);
    assert_eq!(expected, actual, "redis-server first");
    assert!(expected.iter().any(|line| line.contains("\"{w}other\"")));
}

/// A transaction holding several shards (it has a command over keys of two shards) serves
/// the clients blocked on its keys after it, as Redis does after EXEC, not between its
/// commands: the BLPOP waiting on `k` does not get the item the same transaction moves away.
#[test]
fn a_transaction_over_several_shards_serves_blocked_clients_after_it() {
    let server = Server::start(&["--shards", "4"]);
    // `k` and `other` on different shards: RPOPLPUSH makes the transaction a program.
    let k = "k";
    let shard = |key: &str| corewire_kv::routing::shard_of(key.as_bytes(), 4);
    let other = (0..)
        .map(|i| format!("other{i}"))
        .find(|key| shard(key) != shard(k))
        .expect("a key on another shard");
    let other = other.as_str();
    let mut waiter = server.connect();
    let mut conn = server.connect();
    waiter
        .send(&common::request(&["BLPOP", k, "0"]))
        .expect("sending BLPOP");
    wait_blocked(&mut conn, 1);
    assert_eq!(conn.call(&["MULTI"]), Reply::ok());
    assert_eq!(
        conn.call(&["LPUSH", k, "a"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(
        conn.call(&["RPOPLPUSH", k, other]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(
        conn.call(&["EXEC"]),
        Reply::Array(Some(vec![Reply::Int(1), Reply::bulk("a")]))
    );
    assert_eq!(blocked_clients(&mut conn), 1, "the BLPOP still waits");
    assert_eq!(conn.call(&["RPUSH", k, "b"]), Reply::Int(1));
    assert_eq!(waiter.read().expect("BLPOP's reply"), pair(k, "b"));
}

/// A pop served by a transaction whose parts run on several shards is answered, and logged,
/// only after every part ran (Redis serves blocked clients after EXEC): a SLOWLOG RESET in
/// the transaction, which runs on the waiting connection's shard too, never drops the pop's
/// entry. Keys on every shard, so some waits sit on another shard than their connection's.
#[test]
fn a_transaction_over_several_shards_serves_its_waiters_after_every_part() {
    for env in [vec![], vec![("COREWIRE_BACKEND", "epoll")]] {
        let server = Server::start_with_env(&["--shards", "4"], &env);
        let mut r = server.connect();
        assert_eq!(
            r.call(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
            Reply::ok()
        );
        for key in ["la", "lb", "lc", "ld", "le", "lf", "lg", "lh"] {
            let mut waiter = server.connect();
            waiter.send(&common::request(&["BLPOP", key, "0"])).unwrap();
            wait_blocked(&mut r, 1);
            assert_eq!(r.call(&["MULTI"]), Reply::ok());
            assert_eq!(
                r.call(&["LPUSH", key, "foo"]),
                Reply::Simple("QUEUED".into())
            );
            assert_eq!(
                r.call(&["SLOWLOG", "RESET"]),
                Reply::Simple("QUEUED".into())
            );
            assert_eq!(
                r.call(&["EXEC"]),
                Reply::Array(Some(vec![Reply::Int(1), Reply::ok()]))
            );
            assert_eq!(waiter.read().unwrap(), pair(key, "foo"), "{env:?} {key}");
            drop(waiter);
            let Reply::Array(Some(entries)) = r.call(&["SLOWLOG", "GET"]) else {
                panic!("SLOWLOG GET is an array");
            };
            let newest = entries.first().cloned();
            let Some(Reply::Array(Some(fields))) = newest else {
                panic!("{env:?} {key}: no SLOWLOG entry for the pop: {entries:?}");
            };
            let pop = Reply::Array(Some(vec![
                Reply::bulk("BLPOP"),
                Reply::bulk(key),
                Reply::bulk("0"),
            ]));
            assert_eq!(fields.get(3), Some(&pop), "{env:?} {key}: newest entry");
        }
    }
}
