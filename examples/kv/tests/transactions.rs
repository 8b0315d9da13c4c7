//! MULTI/EXEC/DISCARD/WATCH/UNWATCH: generated transactions against `redis-server` (the oracle),
//! WATCH aborts caused by another connection, and isolation under concurrent clients with the
//! keys of one transaction on different shards (no other client ever sees half of one).
//!
//! Reproduce a differential failure with
//! `DIFF_SEED=<seed> cargo test -p corewire-kv --test transactions`.

mod common;
mod diff;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::{Reply, Server};
use diff::gen::{Gen, KEYS};
use diff::{args, servers, Cmp, Pair, Step};

/// Several shards, so that a transaction's keys are spread over them.
const SHARDS: usize = 3;

/// A step that may go inside MULTI: one whose reply is compared exactly (EXEC's array is
/// compared as a whole).
fn exact_step(gen: &mut Gen) -> Step {
    loop {
        let step = match gen.rng.weighted(&[8, 4, 4, 1]) {
            0 => gen.strings(),
            1 => gen.keyspace(),
            2 => gen.collections(),
            _ => gen.errors(),
        };
        if step.cmp == Cmp::Exact {
            return step;
        }
    }
}

/// Random transactions (some with queue-time errors, some discarded, some with WATCH and a
/// write from a second connection in between) replied to exactly as Redis does.
#[test]
fn generated_transactions_match_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    for seed in diff::seeds(&[31, 32, 33]) {
        let mut pair = Pair::new(&oracle, &server, format!("transactions seed {seed}"));
        let mut other = Pair::new(
            &oracle,
            &server,
            format!("transactions seed {seed} (other)"),
        );
        pair.check_str(&["FLUSHALL"]);
        let mut gen = Gen::new(seed);
        for _ in 0..diff::steps(400) {
            let watch = gen.rng.chance(30);
            if watch {
                let mut request = args(&["WATCH"]);
                request.extend(gen.keys(3));
                pair.check(&request, Cmp::Exact);
                if gen.rng.chance(50) {
                    // Maybe a watched key, maybe not.
                    let step = gen.strings();
                    other.run(&step);
                }
                if gen.rng.chance(10) {
                    pair.check_str(&["UNWATCH"]);
                }
            }
            pair.check_str(&["MULTI"]);
            for _ in 0..gen.rng.below(7) {
                let step = exact_step(&mut gen);
                pair.run(&step);
            }
            match gen.rng.below(10) {
                0 => pair.check_str(&["DISCARD"]),
                1 => pair.check_str(&["MULTI"]),
                _ => pair.check_str(&["EXEC"]),
            };
            // A transaction left open by the nested MULTI ends here.
            pair.check_str(&["DISCARD"]);
            if gen.rng.chance(20) {
                let step = exact_step(&mut gen);
                pair.run(&step);
            }
        }
        for &key in KEYS {
            pair.check(&[b"TYPE".to_vec(), key.to_vec()], Cmp::Exact);
            pair.check(&[b"DUMP".to_vec(), key.to_vec()], Cmp::Ignore);
        }
        pair.report();
    }
}

#[test]
fn fixed_cases_match_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "fixed transactions");
    for step in [
        &["FLUSHALL"][..],
        &["EXEC"],
        &["DISCARD"],
        &["UNWATCH"],
        &["MULTI"],
        &["EXEC"],
        // Errors found when a command runs stay inside EXEC's reply.
        &["MULTI"],
        &["SET", "a", "1"],
        &["SET", "a", "1", "EX", "notanumber"],
        &["LPUSH", "a", "x"],
        &["INCR", "a"],
        &["PING"],
        &["ECHO", "hi"],
        &["UNWATCH"],
        &["MSET", "a", "5", "b", "6", "c", "7"],
        &["MGET", "a", "b", "c"],
        &["EXEC"],
        // Errors found before queueing abort it.
        &["MULTI"],
        &["SET", "a", "2"],
        &["NOSUCH"],
        &["GET"],
        &["MULTI"],
        &["WATCH", "a"],
        &["EXEC"],
        &["GET", "a"],
        // Blocking pops answer at once inside a transaction.
        &["MULTI"],
        &["BLPOP", "empty", "0"],
        &["RPUSH", "l", "1", "2"],
        &["BLPOP", "l", "0"],
        &["EXEC"],
        // WATCH of an unchanged key, then of one changed on this connection.
        &["WATCH", "a", "b", "c"],
        &["MULTI"],
        &["GET", "a"],
        &["EXEC"],
        &["WATCH", "a", "zz"],
        &["SET", "a", "changed"],
        &["MULTI"],
        &["SET", "b", "never"],
        &["EXEC"],
        &["GET", "b"],
        // A failed SET NX and a DEL of a missing key change nothing.
        &["WATCH", "a", "missing"],
        &["SET", "a", "x", "NX"],
        &["DEL", "missing"],
        &["MULTI"],
        &["GET", "a"],
        &["EXEC"],
        // UNWATCH and DISCARD drop the watches.
        &["WATCH", "a"],
        &["SET", "a", "again"],
        &["UNWATCH"],
        &["MULTI"],
        &["GET", "a"],
        &["EXEC"],
        &["WATCH", "a"],
        &["SET", "a", "again2"],
        &["MULTI"],
        &["DISCARD"],
        &["MULTI"],
        &["GET", "a"],
        &["EXEC"],
        // A key with a TTL that expires between WATCH and EXEC.
        &["SET", "t", "v", "PX", "30"],
        &["WATCH", "t"],
    ] {
        pair.check_str(step);
    }
    thread::sleep(std::time::Duration::from_millis(60));
    for step in [&["MULTI"][..], &["PING"], &["EXEC"]] {
        pair.check_str(step);
    }
    pair.report();
}

/// A watched key written by another connection (on another shard than the transaction's
/// keys) aborts EXEC; nothing of the transaction runs.
#[test]
fn a_write_from_another_connection_aborts_exec() {
    let server = Server::start(&["--shards", "3"]);
    let mut a = server.connect();
    let mut b = server.connect();
    for key in ["k1", "k2", "k3", "k4"] {
        assert_eq!(a.call(&["SET", key, "0"]), Reply::ok());
    }
    assert_eq!(a.call(&["WATCH", "k1", "k2"]), Reply::ok());
    assert_eq!(b.call(&["INCR", "k2"]), Reply::Int(1));
    assert_eq!(a.call(&["MULTI"]), Reply::ok());
    assert_eq!(a.call(&["SET", "k3", "x"]), Reply::Simple("QUEUED".into()));
    assert_eq!(a.call(&["SET", "k4", "x"]), Reply::Simple("QUEUED".into()));
    assert_eq!(a.call(&["EXEC"]), Reply::Array(None));
    assert_eq!(a.call(&["MGET", "k3", "k4"]), mget(&["0", "0"]));
    // The watches are gone after EXEC: the next transaction runs.
    assert_eq!(b.call(&["INCR", "k2"]), Reply::Int(2));
    assert_eq!(a.call(&["MULTI"]), Reply::ok());
    assert_eq!(a.call(&["SET", "k3", "y"]), Reply::Simple("QUEUED".into()));
    assert_eq!(a.call(&["EXEC"]), Reply::Array(Some(vec![Reply::ok()])));
    // A connection that closes while watching leaves nothing behind.
    assert_eq!(b.call(&["WATCH", "k1", "k2", "k3"]), Reply::ok());
    drop(b);
    assert_eq!(a.call(&["SET", "k1", "after"]), Reply::ok());
    assert_eq!(a.call(&["GET", "k1"]), Reply::bulk("after"));
}

fn mget(values: &[&str]) -> Reply {
    Reply::Array(Some(values.iter().map(|v| Reply::bulk(v)).collect()))
}

fn int_of(reply: &Reply) -> i64 {
    match reply {
        Reply::Bulk(Some(bytes)) => std::str::from_utf8(bytes).unwrap().parse().unwrap(),
        Reply::Int(n) => *n,
        other => panic!("not a number: {other:?}"),
    }
}

/// Writers move amounts between accounts on different shards in transactions while readers
/// read all accounts in one transaction: every read sees the same total (no half of a
/// transfer), and optimistic WATCH increments from several clients lose no update.
#[test]
fn concurrent_transactions_are_isolated_across_shards() {
    let server = Server::start(&["--shards", "3"]);
    let accounts = ["acct:a", "acct:b", "acct:c", "acct:d", "acct:e"];
    let mut setup = server.connect();
    for account in accounts {
        assert_eq!(setup.call(&["SET", account, "1000"]), Reply::ok());
    }
    assert_eq!(setup.call(&["SET", "counter", "0"]), Reply::ok());
    let stop = Arc::new(AtomicBool::new(false));
    let port = server.port;
    let writers: Vec<_> = (0..3)
        .map(|w| {
            thread::spawn(move || {
                let mut conn = common::Resp::connect(port);
                for i in 0..300usize {
                    let from = accounts[(i + w) % accounts.len()];
                    let to = accounts[(i * 7 + w + 1) % accounts.len()];
                    let amount = ((i % 13) + 1).to_string();
                    conn.call(&["MULTI"]);
                    conn.call(&["DECRBY", from, &amount]);
                    conn.call(&["INCRBY", to, &amount]);
                    let Reply::Array(Some(replies)) = conn.call(&["EXEC"]) else {
                        panic!("EXEC without WATCH always runs");
                    };
                    assert_eq!(replies.len(), 2);
                }
            })
        })
        .collect();
    let incrementers: Vec<_> = (0..3)
        .map(|_| {
            thread::spawn(move || {
                let mut conn = common::Resp::connect(port);
                let mut retries = 0u64;
                for _ in 0..50 {
                    loop {
                        conn.call(&["WATCH", "counter"]);
                        let value = int_of(&conn.call(&["GET", "counter"]));
                        conn.call(&["MULTI"]);
                        conn.call(&["SET", "counter", &(value + 1).to_string()]);
                        match conn.call(&["EXEC"]) {
                            Reply::Array(Some(_)) => break,
                            Reply::Array(None) => retries += 1,
                            other => panic!("EXEC: {other:?}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let reader = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut conn = common::Resp::connect(port);
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) || reads == 0 {
                conn.call(&["MULTI"]);
                for account in accounts {
                    conn.call(&["GET", account]);
                }
                let Reply::Array(Some(values)) = conn.call(&["EXEC"]) else {
                    panic!("EXEC without WATCH always runs");
                };
                let total: i64 = values.iter().map(int_of).sum();
                assert_eq!(total, 5000, "a reader saw half of a transfer: {values:?}");
                reads += 1;
            }
            reads
        })
    };
    for writer in writers {
        writer.join().expect("writer");
    }
    let retries: u64 = incrementers
        .into_iter()
        .map(|t| t.join().expect("incrementer"))
        .sum();
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader");
    assert!(reads > 0);
    assert_eq!(int_of(&setup.call(&["GET", "counter"])), 150);
    let total: i64 = accounts
        .iter()
        .map(|account| int_of(&setup.call(&["GET", account])))
        .sum();
    assert_eq!(total, 5000);
    eprintln!("isolation: {reads} consistent reads, {retries} WATCH retries");
}
