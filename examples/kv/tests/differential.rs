//! corewire-kv against `redis-server` (Debian's, the oracle): generated command scripts run on
//! both and every reply must match (see `diff/mod.rs` for how replies are compared). The
//! servers run side by side; corewire-kv with 4 shards, so multi-key commands span shards.
//!
//! Reproduce a failure with `DIFF_SEED=<seed> cargo test -p corewire-kv --test differential`.

mod common;
mod diff;

use std::collections::BTreeSet;

use diff::gen::{Gen, KEYS};
use diff::{servers, Pair, Step};

const SHARDS: usize = 4;

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
/// with malformed options. Commands over several keys (LMOVE, SMOVE, the STORE forms, ...)
/// take plain keys, which live on different shards, as well as hash-tagged ones.
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

/// Keyspace and string commands (SETNX ... OBJECT ENCODING) mixed with the strings and key commands
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

/// Sets and hashes past the small form (128 members or fields: corewire-kv then moves them
/// from an insertion-ordered map to a plain table): every read, the set algebra, scans run to
/// completion, random picks by shape, and popping everything compared as a multiset.
#[test]
fn sets_and_hashes_past_the_small_form() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "large collections");
    pair.check_str(&["FLUSHALL"]);
    let member = |i: usize| format!("m{i}").into_bytes();
    let cmd = |name: &str, key: &str, rest: Vec<Vec<u8>>| {
        let mut v = vec![name.as_bytes().to_vec(), key.as_bytes().to_vec()];
        v.extend(rest);
        v
    };
    // {t}x and {t}y share a shard (multi-key set commands need that, see README).
    for i in 0..600 {
        pair.check(&cmd("SADD", "{t}x", vec![member(i)]), diff::Cmp::Exact);
        if i % 3 == 0 {
            pair.check(
                &cmd("SADD", "{t}y", vec![member(i), member(i + 1000)]),
                diff::Cmp::Exact,
            );
        }
        let value = format!("v{i}").into_bytes();
        pair.check(
            &cmd("HSET", "{t}h", vec![member(i), value]),
            diff::Cmp::Exact,
        );
    }
    for i in (0..600).step_by(7) {
        pair.check(
            &cmd("SREM", "{t}x", vec![member(i), member(i + 5000)]),
            diff::Cmp::Exact,
        );
        pair.check(&cmd("HDEL", "{t}h", vec![member(i)]), diff::Cmp::Exact);
    }
    for (args, how) in [
        (cmd("SMEMBERS", "{t}x", vec![]), diff::Cmp::Unordered),
        (cmd("SCARD", "{t}x", vec![]), diff::Cmp::Exact),
        (cmd("SISMEMBER", "{t}x", vec![member(8)]), diff::Cmp::Exact),
        (cmd("SISMEMBER", "{t}x", vec![member(7)]), diff::Cmp::Exact),
        (
            cmd(
                "SMISMEMBER",
                "{t}x",
                vec![member(1), member(14), member(9999)],
            ),
            diff::Cmp::Exact,
        ),
        (
            cmd("SINTER", "{t}x", vec![b"{t}y".to_vec()]),
            diff::Cmp::Unordered,
        ),
        (
            cmd("SUNION", "{t}x", vec![b"{t}y".to_vec()]),
            diff::Cmp::Unordered,
        ),
        (
            cmd("SDIFF", "{t}x", vec![b"{t}y".to_vec()]),
            diff::Cmp::Unordered,
        ),
        (
            cmd("SDIFF", "{t}y", vec![b"{t}x".to_vec()]),
            diff::Cmp::Unordered,
        ),
        (
            cmd("SINTERCARD", "2", vec![b"{t}x".to_vec(), b"{t}y".to_vec()]),
            diff::Cmp::Exact,
        ),
        (
            cmd(
                "SINTERSTORE",
                "{t}z",
                vec![b"{t}x".to_vec(), b"{t}y".to_vec()],
            ),
            diff::Cmp::Exact,
        ),
        (cmd("SMEMBERS", "{t}z", vec![]), diff::Cmp::Unordered),
        (
            cmd("SRANDMEMBER", "{t}x", vec![b"50".to_vec()]),
            diff::Cmp::SameShape,
        ),
        (
            cmd("SRANDMEMBER", "{t}x", vec![b"-700".to_vec()]),
            diff::Cmp::SameShape,
        ),
        (
            cmd("SRANDMEMBER", "{t}x", vec![b"10000".to_vec()]),
            diff::Cmp::Unordered,
        ),
        (cmd("HGETALL", "{t}h", vec![]), diff::Cmp::UnorderedPairs),
        (cmd("HLEN", "{t}h", vec![]), diff::Cmp::Exact),
        (
            cmd("HMGET", "{t}h", vec![member(1), member(7), member(599)]),
            diff::Cmp::Exact,
        ),
        (
            cmd("HRANDFIELD", "{t}h", vec![b"30".to_vec()]),
            diff::Cmp::SameShape,
        ),
        (
            cmd("HRANDFIELD", "{t}h", vec![b"100000".to_vec()]),
            diff::Cmp::Unordered,
        ),
    ] {
        pair.check(&args, how);
    }
    for (key, command) in [("{t}x", "SSCAN"), ("{t}h", "HSCAN")] {
        let prefix = diff::args(&[command, key]);
        let suffix = diff::args(&["COUNT", "17"]);
        let expected = diff::scan_all(&mut pair.redis, &prefix, &suffix).expect("redis scan");
        let actual = diff::scan_all(&mut pair.kv, &prefix, &suffix).expect("corewire-kv scan");
        let (expected, actual): (BTreeSet<_>, BTreeSet<_>) = (
            expected.into_iter().map(|v| v.show()).collect(),
            actual.into_iter().map(|v| v.show()).collect(),
        );
        assert_eq!(expected, actual, "[{}] {command} {key}", pair.label);
    }
    // Popping more than there is takes everything: the same multiset on both.
    pair.check(
        &cmd("SPOP", "{t}x", vec![b"1000".to_vec()]),
        diff::Cmp::Unordered,
    );
    pair.check(&cmd("EXISTS", "{t}x", vec![]), diff::Cmp::Exact);
    pair.report();
}

/// Sorted sets of many chunks (corewire-kv keeps the order in chunks of 128 with positions,
/// `store/zorder.rs`): ranks, score and lex ranges with every kind of bound, LIMIT, REV,
/// ZCOUNT, ZLEXCOUNT, ZRANK and pops, after inserts, re-scores and removals with many tied
/// scores, compared reply by reply.
#[test]
fn sorted_sets_past_one_chunk() {
    use diff::gen::Rng;
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "large sorted sets");
    pair.check_str(&["FLUSHALL"]);
    let mut rng = Rng::new(31);
    let member = |i: usize| format!("m{i}");
    let score = |rng: &mut Rng| match rng.below(4) {
        0 => format!("{}.5", rng.range(-20, 20)),
        _ => rng.range(-40, 40).to_string(),
    };
    for i in 0..1500 {
        let s = score(&mut rng);
        pair.check_str(&["ZADD", "z", &s, &member(i)]);
        // Every member of `lex` scores 0: lex ranges are meant for that.
        pair.check_str(&["ZADD", "lex", "0", &member(rng.below(3000))]);
    }
    for _ in 0..400 {
        let m = member(rng.below(1600));
        match rng.below(3) {
            0 => pair.check_str(&["ZREM", "z", &m]),
            1 => pair.check_str(&["ZINCRBY", "z", "3", &m]),
            _ => pair.check_str(&["ZADD", "z", &score(&mut rng), &m]),
        };
    }
    let bound = |rng: &mut Rng| match rng.below(6) {
        0 => "-inf".to_string(),
        1 => "+inf".to_string(),
        2 => format!("({}", rng.range(-45, 45)),
        3 => format!("({}.5", rng.range(-25, 25)),
        _ => rng.range(-45, 45).to_string(),
    };
    let lex = |rng: &mut Rng| match rng.below(5) {
        0 => "-".to_string(),
        1 => "+".to_string(),
        2 => format!("(m{}", rng.below(3000)),
        _ => format!("[m{}", rng.below(3000)),
    };
    for _ in 0..600 {
        let (lo, hi) = (
            rng.range(-1700, 1700).to_string(),
            rng.range(-1700, 1700).to_string(),
        );
        let (min, max) = (bound(&mut rng), bound(&mut rng));
        let (lmin, lmax) = (lex(&mut rng), lex(&mut rng));
        let limit = [
            rng.range(-1, 900).to_string(),
            rng.range(-1, 60).to_string(),
        ];
        let mut args: Vec<&str> = match rng.below(10) {
            0 => vec!["ZRANGE", "z", &lo, &hi],
            1 => vec!["ZREVRANGE", "z", &lo, &hi, "WITHSCORES"],
            2 => vec!["ZRANGEBYSCORE", "z", &min, &max, "WITHSCORES"],
            3 => vec!["ZREVRANGEBYSCORE", "z", &max, &min],
            4 => vec!["ZRANGE", "z", &min, &max, "BYSCORE", "REV"],
            5 => vec!["ZCOUNT", "z", &min, &max],
            6 => vec!["ZRANGEBYLEX", "lex", &lmin, &lmax],
            7 => vec!["ZREVRANGEBYLEX", "lex", &lmax, &lmin],
            8 => vec!["ZLEXCOUNT", "lex", &lmin, &lmax],
            _ => vec![],
        };
        if args.is_empty() {
            let m = member(rng.below(1600));
            pair.check_str(&["ZRANK", "z", &m]);
            pair.check_str(&["ZREVRANK", "z", &m]);
            pair.check_str(&["ZRANK", "lex", &m]);
            continue;
        }
        if matches!(
            args[0],
            "ZRANGEBYSCORE" | "ZREVRANGEBYSCORE" | "ZRANGEBYLEX"
        ) && rng.chance(40)
        {
            args.extend(["LIMIT", limit[0].as_str(), limit[1].as_str()]);
        }
        pair.check_str(&args);
    }
    for _ in 0..20 {
        pair.check_str(&["ZPOPMIN", "z", "7"]);
        pair.check_str(&["ZPOPMAX", "z"]);
        pair.check_str(&["ZRANGE", "z", "0", "2", "WITHSCORES"]);
    }
    pair.check_str(&["ZCARD", "z"]);
    pair.check_str(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]);
    pair.report();
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
