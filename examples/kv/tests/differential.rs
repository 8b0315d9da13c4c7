//! corewire-kv against `redis-server` (Debian's, the oracle): generated command scripts run on
//! both and every reply must match (see `diff/mod.rs` for how replies are compared). The
//! servers run side by side; corewire-kv with 3 shards so that multi-key commands fan out.
//!
//! Reproduce a failure with `DIFF_SEED=<seed> cargo test -p corewire-kv --test differential`.

mod common;
mod diff;

use std::collections::BTreeSet;

use diff::gen::{Gen, KEYS};
use diff::{servers, Pair, Step};

const SHARDS: usize = 3;

/// Runs `steps` commands chosen by `next` for each seed, on fresh servers.
fn run_script(name: &str, seeds: &[u64], steps: usize, mut next: impl FnMut(&mut Gen) -> Step) {
    let (oracle, server) = servers(SHARDS, &[]);
    for seed in diff::seeds(seeds) {
        let mut pair = Pair::new(&oracle, &server, format!("{name} seed {seed}"));
        pair.check_str(&["FLUSHALL"]);
        let mut gen = Gen::new(seed);
        for i in 0..diff::steps(steps) {
            let step = next(&mut gen);
            pair.run(&step);
            if i % 100 == 99 {
                settle(&mut pair);
            }
        }
        // The keyspaces agree at the end, key by key.
        compare_keyspace(&mut pair);
        pair.report();
    }
}

/// Looks at every key of the pool (which lazily expires the ones due, on both servers), then
/// compares DBSIZE: it counts expired keys not yet reclaimed, so it is only comparable once
/// nothing expired lingers.
fn settle(pair: &mut Pair) {
    let mut exists = vec![b"EXISTS".to_vec()];
    exists.extend(KEYS.iter().map(|k| k.to_vec()));
    pair.check(&exists, diff::Cmp::Exact);
    pair.check_str(&["DBSIZE"]);
}

/// Every key of the generator's pool: same existence, type and TTL class on both servers.
fn compare_keyspace(pair: &mut Pair) {
    settle(pair);
    for &key in KEYS {
        pair.check(&[b"EXISTS".to_vec(), key.to_vec()], diff::Cmp::Exact);
        pair.check(
            &[b"TTL".to_vec(), key.to_vec()],
            diff::Cmp::Ttl { tolerance: 2 },
        );
        pair.check(&[b"TYPE".to_vec(), key.to_vec()], diff::Cmp::Exact);
    }
}

#[test]
fn strings_and_keys() {
    run_script("strings", &[1, 2, 3], 3_000, |gen| {
        match gen.rng.weighted(&[10, 6, 1]) {
            0 => gen.strings(),
            1 => gen.keyspace(),
            _ => gen.errors(),
        }
    });
}

/// Lists, hashes, sets and sorted sets, mixed with strings so types clash (WRONGTYPE) and
/// with malformed options. Commands over several keys use hash-tagged keys (corewire-kv
/// refuses keys spread over shards for these; see README).
#[test]
fn collections() {
    run_script("collections", &[11, 12, 13], 4_000, |gen| {
        match gen.rng.weighted(&[12, 3, 1, 1]) {
            0 => gen.collections(),
            1 => gen.strings(),
            2 => gen.keyspace(),
            _ => gen.errors(),
        }
    });
}

/// Keyspace and string commands of issue 13 item 2 mixed with the strings and key commands
/// they interact with; at the end SCAN (plain, MATCH, TYPE, COUNT) walks both servers to the
/// same set of keys.
#[test]
fn keyspace_commands() {
    let (oracle, server) = servers(SHARDS, &[]);
    for seed in diff::seeds(&[21, 22, 23]) {
        let mut pair = Pair::new(&oracle, &server, format!("keyops seed {seed}"));
        pair.check_str(&["FLUSHALL"]);
        let mut gen = Gen::new(seed);
        for i in 0..diff::steps(3_000) {
            let step = match gen.rng.weighted(&[10, 4, 3, 2, 1]) {
                0 => gen.keyops(),
                1 => gen.strings(),
                2 => gen.keyspace(),
                3 => gen.collections(),
                _ => gen.errors(),
            };
            pair.run(&step);
            if i % 100 == 99 {
                settle(&mut pair);
                compare_scans(&mut pair);
            }
        }
        compare_keyspace(&mut pair);
        compare_scans(&mut pair);
        pair.report();
    }
}

/// SCAN to completion on both servers, with and without options: the same keys (a key may
/// come back twice from either; the sets are compared).
fn compare_scans(pair: &mut Pair) {
    let options: [&[&str]; 5] = [
        &[],
        &["COUNT", "3"],
        &["MATCH", "{t}*"],
        &["TYPE", "string"],
        &["MATCH", "*", "TYPE", "list", "COUNT", "1000"],
    ];
    for suffix in options {
        let suffix = diff::args(suffix);
        let prefix = diff::args(&["SCAN"]);
        let expected = diff::scan_all(&mut pair.redis, &prefix, &suffix).expect("redis SCAN");
        let actual = diff::scan_all(&mut pair.kv, &prefix, &suffix).expect("corewire-kv SCAN");
        let (expected, actual): (BTreeSet<_>, BTreeSet<_>) = (
            expected.into_iter().map(|v| v.show()).collect(),
            actual.into_iter().map(|v| v.show()).collect(),
        );
        assert_eq!(expected, actual, "[{}] SCAN {suffix:?}", pair.label);
    }
    for args in [
        &["SCAN", "x"][..],
        &["SCAN", "0", "COUNT", "0"],
        &["SCAN", "0", "MATCH"],
    ] {
        pair.check_str(args);
    }
}

/// CLIENT SETNAME/GETNAME, RESET and their errors (SETINFO is newer than Debian's redis-server 7.0;
/// CLIENT ID differs by design: ids count connections, which differ between the servers).
#[test]
fn client_identity_commands() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "client identity");
    for args in [
        &["CLIENT", "GETNAME"][..],
        &["CLIENT", "SETNAME", "worker-1"],
        &["client", "getname"],
        &["CLIENT", "SETNAME", "a b"],
        &["CLIENT", "SETNAME", "new\nline"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", ""],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME"],
        &["CLIENT", "GETNAME", "extra"],
        &["CLIENT", "ID", "extra"],
        &["CLIENT", "NOPE"],
        &["CLIENT"],
        &["CLIENT", "SETNAME", "again"],
        &["RESET"],
        &["CLIENT", "GETNAME"],
        &["reset", "extra"],
        &["SET", "k", "v"],
        &["GET", "k"],
    ] {
        pair.check_str(args);
    }
    pair.report();
}

/// The comparison is not vacuous: replies that differ are caught.
#[test]
fn the_harness_sees_differences() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "sanity");
    let info = diff::args(&["INFO", "server"]);
    let expected = pair.redis.call(&info);
    let actual = pair.kv.call(&info);
    assert!(!diff::agree(&expected, &actual, diff::Cmp::Exact));
    let set = diff::args(&["SET", "k", "v"]);
    assert_eq!(pair.check(&set, diff::Cmp::Exact), diff::V::ok());
    let get = diff::args(&["GET", "k"]);
    assert_eq!(pair.check(&get, diff::Cmp::Exact), diff::V::bulk("v"));
    pair.redis.call(&diff::args(&["SET", "k", "other"]));
    let expected = pair.redis.call(&get);
    let actual = pair.kv.call(&get);
    assert!(!diff::agree(&expected, &actual, diff::Cmp::Exact));
    assert!(diff::agree(
        &diff::V::Array(vec![diff::V::bulk("a"), diff::V::bulk("b")]),
        &diff::V::Array(vec![diff::V::bulk("b"), diff::V::bulk("a")]),
        diff::Cmp::Unordered
    ));
    assert!(!diff::agree(
        &diff::V::Array(vec![diff::V::bulk("a"), diff::V::bulk("a")]),
        &diff::V::Array(vec![diff::V::bulk("b"), diff::V::bulk("a")]),
        diff::Cmp::Unordered
    ));
}
