//! Bitmaps, HyperLogLog, LCS and SORT against `redis-server` (the oracle, see `diff/`):
//! generated commands on 1 and 3 shards, every reply compared, values compared byte for byte
//! (an HLL's sparse and dense encodings included), and HLL values moved between the two
//! servers with GET/SET.
//!
//! Reproduce a failure with `DIFF_SEED=<seed> cargo test -p corewire-kv --test bitmaps_hll`.

mod common;
mod diff;

use diff::gen::{b, Gen, KEYS};
use diff::{args, servers, Cmp, Pair, Step, V};

fn num(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// Runs `steps` generated commands per seed on fresh servers of 1 and 3 shards, then
/// compares every pool key's value.
fn run_script(name: &str, seeds: &[u64], steps: usize, mut next: impl FnMut(&mut Gen) -> Step) {
    for shards in [1, 3] {
        let (oracle, server) = servers(shards, &[]);
        for seed in diff::seeds(seeds) {
            let mut pair = Pair::new(
                &oracle,
                &server,
                format!("{name} shards {shards} seed {seed}"),
            );
            pair.check_str(&["FLUSHALL"]);
            let mut gen = Gen::new(seed);
            for _ in 0..diff::steps(steps) {
                let step = next(&mut gen);
                pair.run(&step);
            }
            for &key in KEYS {
                pair.check(&[b("TYPE"), key.to_vec()], Cmp::Exact);
                pair.check(&[b("GET"), key.to_vec()], Cmp::Exact);
            }
            pair.report();
        }
    }
}

/// A bit offset: small, near a byte edge, large, or invalid.
fn offset(gen: &mut Gen) -> Vec<u8> {
    match gen.rng.weighted(&[8, 2, 1, 1]) {
        0 => num(gen.rng.range(0, 40)),
        1 => num(gen.rng.range(0, 4000)),
        // Past 512 MB (an error); 4294967295 would build a 512 MB string on both servers.
        2 => b(gen.rng.pick(&["-1", "x", "4294967296", "#3", ""])),
        _ => num(gen.rng.range(-3, 3)),
    }
}

fn index(gen: &mut Gen) -> Vec<u8> {
    if gen.rng.chance(5) {
        return b(gen
            .rng
            .pick(&["x", "1.5", "9223372036854775807", "-9223372036854775808"]));
    }
    num(gen.rng.range(-20, 40))
}

fn field_type(gen: &mut Gen) -> Vec<u8> {
    if gen.rng.chance(5) {
        return b(gen.rng.pick(&["u64", "i65", "x8", "u0", "I8", "i"]));
    }
    let signed = gen.rng.chance(50);
    let bits = if signed {
        gen.rng.range(1, 64)
    } else {
        gen.rng.range(1, 63)
    };
    format!("{}{bits}", if signed { 'i' } else { 'u' }).into_bytes()
}

fn field_offset(gen: &mut Gen) -> Vec<u8> {
    if gen.rng.chance(30) {
        return format!("#{}", gen.rng.range(0, 6)).into_bytes();
    }
    offset(gen)
}

fn bitmaps(gen: &mut Gen) -> Step {
    let key = gen.key();
    let exact = |parts: Vec<Vec<u8>>| Step::new(parts, Cmp::Exact);
    match gen.rng.weighted(&[6, 4, 4, 4, 3, 5, 2, 2, 1]) {
        0 => {
            let bit = b(gen.rng.pick(&["0", "1", "1", "2", "-1", "x"]));
            exact(vec![b("SETBIT"), key, offset(gen), bit])
        }
        1 => exact(vec![b("GETBIT"), key, offset(gen)]),
        2 => {
            let mut parts = vec![b("BITCOUNT"), key];
            if gen.rng.chance(70) {
                parts.push(index(gen));
                parts.push(index(gen));
                if gen.rng.chance(50) {
                    parts.push(b(gen.rng.pick(&["BIT", "BYTE", "bit", "bits"])));
                }
            } else if gen.rng.chance(20) {
                parts.push(index(gen));
            }
            exact(parts)
        }
        3 => {
            let bit = b(gen.rng.pick(&["0", "1", "1", "0", "2"]));
            let mut parts = vec![b("BITPOS"), key, bit];
            for _ in 0..gen.rng.below(3) {
                parts.push(index(gen));
            }
            if parts.len() == 5 && gen.rng.chance(50) {
                parts.push(b(gen.rng.pick(&["BIT", "BYTE", "x"])));
            }
            exact(parts)
        }
        4 => {
            let op = b(gen.rng.pick(&["AND", "or", "XOR", "NOT", "NOT", "nand"]));
            let mut parts = vec![b("BITOP"), op, gen.key()];
            parts.extend(gen.keys(3));
            exact(parts)
        }
        5 => {
            let read_only = gen.rng.chance(20);
            let mut parts = vec![b(if read_only { "BITFIELD_RO" } else { "BITFIELD" }), key];
            for _ in 0..1 + gen.rng.below(3) {
                match gen.rng.weighted(&[4, 3, 3, 2, 1]) {
                    0 => parts.extend([b("GET"), field_type(gen), field_offset(gen)]),
                    1 => {
                        parts.extend([b("SET"), field_type(gen), field_offset(gen), gen.int_arg()])
                    }
                    2 => parts.extend([
                        b("INCRBY"),
                        field_type(gen),
                        field_offset(gen),
                        gen.int_arg(),
                    ]),
                    3 => parts.extend([
                        b("OVERFLOW"),
                        b(gen.rng.pick(&["WRAP", "sat", "FAIL", "x"])),
                    ]),
                    _ => parts.push(b(gen.rng.pick(&["GET", "SET", "foo"]))),
                }
            }
            exact(parts)
        }
        6 => exact(vec![b("SET"), key, gen.value()]),
        7 => exact(vec![b("APPEND"), key, gen.value()]),
        _ => exact(vec![b("RPUSH"), key, b("x")]),
    }
}

#[test]
fn bitmap_commands() {
    run_script("bitmaps", &[21, 22], 2_000, bitmaps);
}

fn hll_elements(gen: &mut Gen, max: usize) -> Vec<Vec<u8>> {
    let n = gen.rng.below(max + 1);
    (0..n).map(|_| num(gen.rng.range(0, 5000))).collect()
}

fn hll(gen: &mut Gen) -> Step {
    let key = gen.key();
    let exact = |parts: Vec<Vec<u8>>| Step::new(parts, Cmp::Exact);
    match gen.rng.weighted(&[8, 4, 3, 2, 2, 1, 1, 3]) {
        0 => {
            let mut parts = vec![b("PFADD"), key];
            let max = if gen.rng.chance(10) { 400 } else { 8 };
            parts.extend(hll_elements(gen, max));
            exact(parts)
        }
        1 => {
            let mut parts = vec![b("PFCOUNT")];
            parts.extend(gen.keys(3));
            exact(parts)
        }
        2 => {
            let mut parts = vec![b("PFMERGE"), key];
            parts.extend(gen.keys(3).into_iter().take(gen.rng.below(4)));
            exact(parts)
        }
        3 => {
            let sub = b(gen
                .rng
                .pick(&["ENCODING", "DECODE", "TODENSE", "encoding", "nosuch"]));
            exact(vec![b("PFDEBUG"), sub, key])
        }
        4 => exact(vec![b("GET"), key]),
        5 => exact(vec![b("SET"), key, gen.value()]),
        6 => exact(vec![
            b("SETRANGE"),
            key,
            num(gen.rng.range(0, 20)),
            gen.bytes(2),
        ]),
        _ => exact(vec![b("DEL"), key]),
    }
}

#[test]
fn hyperloglog_commands() {
    run_script("hll", &[31, 32], 1_500, hll);
}

/// A value moves between the servers: redis-server's HLL bytes are an HLL here, and ours
/// there (GET, then SET on the other server).
#[test]
fn hll_values_are_interchangeable() {
    for shards in [1, 3] {
        let (oracle, server) = servers(shards, &[]);
        let mut pair = Pair::new(&oracle, &server, format!("hll interchange shards {shards}"));
        for (key, count) in [("small", 20), ("large", 3000)] {
            let mut add = vec![b("PFADD"), b(key)];
            add.extend((0..count).map(|i| format!("e{i}").into_bytes()));
            pair.check(&add, Cmp::Exact);
            pair.check_str(&["PFCOUNT", key]);
            pair.check_str(&["PFDEBUG", "ENCODING", key]);
            for (from, to) in [(0, 1), (1, 0)] {
                let value = conn(&mut pair, from).call(&args(&["GET", key]));
                let V::Bulk(value) = value else {
                    panic!("GET answered {value:?}")
                };
                assert_eq!(
                    conn(&mut pair, to).call(&[b("SET"), b("copied"), value.clone()]),
                    V::ok()
                );
                let mine = conn(&mut pair, to).call(&args(&["PFCOUNT", "copied"]));
                let theirs = conn(&mut pair, from).call(&args(&["PFCOUNT", key]));
                assert_eq!(mine, theirs, "{key} from {from}");
                // Both servers now hold the same bytes, and grow them the same way.
                assert_eq!(
                    conn(&mut pair, from).call(&[b("SET"), b("copied"), value]),
                    V::ok()
                );
                pair.check_str(&["PFADD", "copied", "more", "elements"]);
                pair.check_str(&["PFCOUNT", "copied"]);
                pair.check_str(&["GET", "copied"]);
            }
        }
    }
}

fn conn(pair: &mut Pair, which: usize) -> &mut diff::Conn {
    if which == 0 {
        &mut pair.redis
    } else {
        &mut pair.kv
    }
}

fn lcs_string(gen: &mut Gen) -> Vec<u8> {
    let len = gen.rng.below(14);
    (0..len).map(|_| gen.rng.pick(b"abcd")).collect()
}

#[test]
fn lcs_in_resp2_and_resp3() {
    for shards in [1, 3] {
        let (oracle, server) = servers(shards, &[]);
        for seed in diff::seeds(&[41]) {
            let mut pair = Pair::new(&oracle, &server, format!("lcs shards {shards} seed {seed}"));
            let mut gen = Gen::new(seed);
            for protocol in ["2", "3"] {
                pair.check(&args(&["HELLO", protocol]), Cmp::Ignore);
                for _ in 0..diff::steps(300) {
                    let (first, second) = (gen.key(), gen.key());
                    match gen.rng.weighted(&[3, 1]) {
                        0 => {
                            pair.check(&[b("SET"), first.clone(), lcs_string(&mut gen)], Cmp::Exact)
                        }
                        _ => pair.check(&[b("RPUSH"), first.clone(), b("x")], Cmp::Exact),
                    };
                    let mut parts = vec![b("LCS"), first, second];
                    for _ in 0..gen.rng.below(4) {
                        match gen.rng.weighted(&[2, 3, 2, 2, 1]) {
                            0 => parts.push(b("LEN")),
                            1 => parts.push(b("IDX")),
                            2 => parts.push(b("WITHMATCHLEN")),
                            3 => parts.extend([b("MINMATCHLEN"), num(gen.rng.range(-1, 4))]),
                            _ => parts.push(b(gen.rng.pick(&["MINMATCHLEN", "x"]))),
                        }
                    }
                    pair.check(&parts, Cmp::Exact);
                }
            }
            pair.report();
        }
    }
}

/// Elements of the sorted collections and the weight keys they name (`w_<elem>`, `h_<elem>`
/// hashes with field `f`, `o_<elem>` strings): spread over the shards.
const ELEMS: &[&str] = &["1", "2", "3", "10", "-1", "2.5", "a", "b", "ab", ""];

fn sort_step(gen: &mut Gen, key: &[u8], kind: u8) -> (Vec<Vec<u8>>, Cmp, bool) {
    let mut parts = vec![
        b(if gen.rng.chance(20) {
            "SORT_RO"
        } else {
            "SORT"
        }),
        key.to_vec(),
    ];
    let mut by_pattern = false;
    let mut alpha = false;
    let mut nosort = false;
    for _ in 0..gen.rng.below(5) {
        match gen.rng.weighted(&[3, 2, 2, 3, 3, 2, 1]) {
            0 => {
                let pattern = gen.rng.pick(&["w_*", "h_*->f", "nosort", "o_*", "w_*->f"]);
                by_pattern |= pattern.contains('*');
                nosort |= !pattern.contains('*');
                parts.extend([b("BY"), b(pattern)]);
            }
            1 => parts.push(b(gen.rng.pick(&["ASC", "DESC"]))),
            2 => {
                alpha = true;
                parts.push(b("ALPHA"));
            }
            3 => parts.extend([
                b("GET"),
                b(gen.rng.pick(&["#", "o_*", "h_*->f", "w_*", "const"])),
            ]),
            4 => parts.extend([
                b("LIMIT"),
                num(gen.rng.range(-2, 6)),
                num(gen.rng.range(-2, 6)),
            ]),
            5 => parts.extend([b("STORE"), b(gen.rng.pick(&["dest", "{t}dest", "w_1"]))]),
            _ => parts.push(b(gen.rng.pick(&["LIMIT", "x", "GET"]))),
        }
    }
    // Redis leaves these orders undefined: ties among ALPHA weights, a set's own order.
    let ordered = !((alpha && by_pattern) || (kind == b's' && nosort));
    let stores = parts.iter().any(|p| p.eq_ignore_ascii_case(b"store"));
    let limited = parts.iter().any(|p| p.eq_ignore_ascii_case(b"limit"));
    let cmp = match (ordered, limited) {
        (true, _) => Cmp::Exact,
        (false, false) => Cmp::Unordered,
        // Which elements an undefined order puts in the range is undefined too.
        (false, true) => Cmp::SameShape,
    };
    (parts, cmp, stores)
}

#[test]
fn sort_by_and_get_patterns_across_shards() {
    for shards in [1, 3] {
        let (oracle, server) = servers(shards, &[]);
        for seed in diff::seeds(&[51, 52]) {
            let mut pair = Pair::new(
                &oracle,
                &server,
                format!("sort shards {shards} seed {seed}"),
            );
            pair.check_str(&["FLUSHALL"]);
            let mut gen = Gen::new(seed);
            for _ in 0..diff::steps(600) {
                let elem = gen.rng.pick(ELEMS);
                match gen.rng.weighted(&[3, 2, 2, 2, 1, 1, 4]) {
                    0 => pair.check_str(&["RPUSH", "list", elem]),
                    1 => pair.check_str(&["SADD", "set", elem]),
                    2 => {
                        let score = gen.rng.range(-3, 3).to_string();
                        pair.check_str(&["ZADD", "zset", &score, elem])
                    }
                    3 => {
                        let weight = gen
                            .rng
                            .pick(&["1", "2", "-5", "3.5", "x", "10", "1e400", ""]);
                        pair.check_str(&["SET", &format!("w_{elem}"), weight])
                    }
                    4 => pair.check_str(&[
                        "HSET",
                        &format!("h_{elem}"),
                        "f",
                        gen.rng.pick(&["7", "0", "zz"]),
                    ]),
                    5 => pair.check_str(&["SET", &format!("o_{elem}"), &format!("v{elem}")]),
                    _ => {
                        let (key, kind) = gen.rng.pick(&[
                            ("list", b'l'),
                            ("set", b's'),
                            ("zset", b'z'),
                            ("nokey", b'l'),
                            ("w_1", b'l'),
                        ]);
                        let (parts, cmp, stores) = sort_step(&mut gen, key.as_bytes(), kind);
                        let reply = pair.check(&parts, cmp);
                        if stores && !reply.is_error() {
                            for dest in ["dest", "{t}dest", "w_1"] {
                                pair.check(&args(&["LRANGE", dest, "0", "-1"]), cmp);
                                pair.check_str(&["TYPE", dest]);
                            }
                        }
                        reply
                    }
                };
            }
            pair.report();
        }
    }
}

/// The keyspace events of these commands, as redis-server publishes them (setbit, set or
/// del for BITOP, setbit for BITFIELD, pfadd for PFADD and PFMERGE, sortstore), on 1 and 3
/// shards; the multi-key ones with keys on one shard and on several.
#[test]
fn keyspace_events_match_redis() {
    let script: &[&[&str]] = &[
        &["SETBIT", "b1", "7", "1"],
        &["SETBIT", "b1", "7", "1"],
        &["SETBIT", "b2", "100", "0"],
        &["BITOP", "OR", "{t}d", "{t}s1", "{t}s2"],
        &["SET", "{t}s1", "abc"],
        &["BITOP", "AND", "{t}d", "{t}s1", "{t}s2"],
        &["BITOP", "XOR", "{t}d", "{t}nosuch"],
        &["BITFIELD", "f", "SET", "u8", "0", "1", "GET", "u8", "0"],
        &["BITFIELD", "f", "GET", "u8", "0"],
        &["BITFIELD", "f", "SET", "u8", "0", "1"],
        &["PFADD", "h1", "a", "b"],
        &["PFADD", "h1", "a"],
        &["PFADD", "{t}h2", "c"],
        &["PFMERGE", "{t}h3", "{t}h2"],
        &["PFCOUNT", "h1"],
        &["RPUSH", "{t}l", "3", "1", "2"],
        &["SORT", "{t}l", "STORE", "{t}sorted"],
        &["SORT", "{t}nosuch", "STORE", "{t}sorted"],
        &["SORT", "{t}l", "LIMIT", "0", "1"],
        &["FLUSHALL"],
    ];
    for shards in [1, 3] {
        let (oracle, server) = servers(shards, &[]);
        let mut transcripts = Vec::new();
        for port in [oracle.port, server.port] {
            let mut admin = diff::Conn::connect(port);
            admin.call_str(&["FLUSHALL"]);
            assert_eq!(
                admin.call_str(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
                V::ok()
            );
            let mut sub = diff::Conn::connect(port);
            sub.send(&args(&["PSUBSCRIBE", "__key*__:*"]));
            sub.read();
            let mut by_key: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for step in script {
                admin.call_str(step);
            }
            admin.call_str(&["PUBLISH", "__marker__", "x"]);
            while let Ok(message) = sub.try_read(std::time::Duration::from_millis(500)) {
                let items = message.items().expect("a message").to_vec();
                let text =
                    |v: &V| String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
                let (channel, payload) = (text(&items[2]), text(&items[3]));
                let (key, what) = match channel.strip_prefix("__keyspace@0__:") {
                    Some(key) => (key.to_owned(), format!("space {payload}")),
                    None => (payload, format!("event {channel}")),
                };
                by_key.entry(key).or_default().push(what);
            }
            admin.call_str(&["CONFIG", "SET", "notify-keyspace-events", ""]);
            transcripts.push(by_key);
        }
        assert!(transcripts[0].len() > 8, "{:?}", transcripts[0]);
        assert_eq!(
            transcripts[1], transcripts[0],
            "corewire-kv ({shards} shards) vs redis-server"
        );
    }
}

/// The multi-key forms inside MULTI and a script, on keys of several shards.
#[test]
fn multi_key_forms_in_transactions_and_scripts() {
    for shards in [1, 3] {
        let (oracle, server) = servers(shards, &[]);
        let mut pair = Pair::new(&oracle, &server, format!("multi shards {shards}"));
        for step in [
            &["SET", "a", "abc"][..],
            &["SET", "b", "xyz"],
            &["PFADD", "c", "1", "2"],
            &["PFADD", "d", "3"],
            &["RPUSH", "l", "2", "1", "3"],
            &[
                "MSET", "w_1", "3", "w_2", "2", "w_3", "1", "o_1", "x", "o_3", "z",
            ],
        ] {
            pair.check_str(step);
        }
        pair.check_str(&["MULTI"]);
        for step in [
            &["BITOP", "XOR", "k:1", "a", "b"][..],
            &["PFMERGE", "k:2", "c", "d"],
            &["PFCOUNT", "c", "d", "k:2"],
            &["SORT", "l", "BY", "w_*", "GET", "o_*", "GET", "#"],
            &["SORT", "l", "BY", "w_*", "STORE", "{t}x"],
            &["LCS", "a", "b"],
        ] {
            pair.check_str(step);
        }
        pair.check_str(&["EXEC"]);
        pair.check_str(&["GET", "k:1"]);
        pair.check_str(&["LRANGE", "{t}x", "0", "-1"]);
        // A script holds the shards of the keys it declares: SORT's patterns may read any
        // shard, so the weight keys are declared too.
        pair.check_str(&[
            "EVAL",
            "return {redis.call('sort', KEYS[1], 'by', 'w_*', 'get', 'o_*'), redis.call('pfcount', KEYS[2], KEYS[3]), redis.call('bitop', 'or', KEYS[4], KEYS[5], KEYS[6])}",
            "12", "l", "c", "d", "k:1", "a", "b", "w_1", "w_2", "w_3", "o_1", "o_2", "o_3",
        ]);
        pair.check_str(&["GET", "k:1"]);
        pair.check_str(&[
            "EVAL",
            "return redis.call('sort', KEYS[1], 'by', 'nosort')",
            "1",
            "l",
        ]);
    }
}

/// Every write of these commands survives a restart through the AOF, replayed and
/// rewritten (BGREWRITEAOF between writes), with keys on one shard and on several. An HLL's
/// cached cardinality is not logged (replay recomputes it on demand), so HLLs are compared by
/// their counts and registers, everything else by its bytes.
#[test]
fn writes_survive_aof_replay_and_rewrite() {
    use common::{Reply, Server, TempDir};
    let dir = TempDir::new("bits-aof");
    let args = ["--shards", "3", "--aof", dir.arg(), "--fsync", "always"];
    let writes: &[&[&str]] = &[
        &["SETBIT", "b1", "77", "1"],
        &[
            "BITFIELD", "b2", "SET", "i8", "#2", "-7", "INCRBY", "u4", "3", "9",
        ],
        &["SET", "s1", "hello"],
        &["BITOP", "XOR", "b3", "b1", "b2", "s1"],
        &["PFADD", "h1", "a", "b", "c"],
        &["PFADD", "h2", "c", "d"],
        &["PFMERGE", "h3", "h1", "h2"],
        &["PFCOUNT", "h3"],
        &["RPUSH", "l", "3", "1", "2"],
        &[
            "MSET", "w_1", "9", "w_2", "8", "w_3", "7", "o_1", "x", "o_2", "y",
        ],
        &[
            "SORT", "l", "BY", "w_*", "GET", "o_*", "GET", "#", "STORE", "sorted",
        ],
        &["BGREWRITEAOF"],
        &["SETBIT", "b1", "3", "1"],
        &["PFADD", "h1", "e"],
        &["PFDEBUG", "TODENSE", "h2"],
        &["PFMERGE", "h4", "h2", "h3"],
        &["BITOP", "NOT", "b4", "b2"],
        &["SORT", "l", "BY", "w_*", "STORE", "sorted2"],
        &["SORT", "nosuch", "STORE", "b3"],
    ];
    let checks: &[&[&str]] = &[
        &["GET", "b1"],
        &["GET", "b2"],
        &["GET", "b3"],
        &["GET", "b4"],
        &["PFCOUNT", "h1"],
        &["PFCOUNT", "h2"],
        &["PFCOUNT", "h3"],
        &["PFCOUNT", "h4"],
        &["PFCOUNT", "h1", "h2", "h3", "h4"],
        &["PFDEBUG", "ENCODING", "h2"],
        &["PFDEBUG", "ENCODING", "h4"],
        &["LRANGE", "sorted", "0", "-1"],
        &["LRANGE", "sorted2", "0", "-1"],
        &["DBSIZE"],
    ];
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    for step in writes {
        let reply = conn.call(step);
        assert!(!matches!(reply, Reply::Error(_)), "{step:?}: {reply:?}");
        if step[0] == "BGREWRITEAOF" {
            // The later writes go to the logs after the rewritten images.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let Reply::Bulk(Some(info)) = conn.call(&["INFO", "persistence"]) else {
                    panic!("INFO is a bulk string");
                };
                let info = String::from_utf8_lossy(&info).into_owned();
                if info.contains("aof_rewrite_in_progress:0") && !info.contains("aof_rewrites:0") {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the rewrite did not finish: {info}"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    let before: Vec<Reply> = checks.iter().map(|step| conn.call(step)).collect();
    let registers = |conn: &mut common::Resp| conn.call(&["PFDEBUG", "GETREG", "h4"]);
    let registers_before = registers(&mut conn);
    // By weight: 3, 2, 1; a missing o_3 is stored as "".
    let expected = ["", "3", "y", "2", "x", "1"].map(Reply::bulk).to_vec();
    assert_eq!(before[11], Reply::Array(Some(expected)));
    drop(conn);
    server.stop();
    let server = Server::start(&args);
    let mut conn = server.connect();
    let after: Vec<Reply> = checks.iter().map(|step| conn.call(step)).collect();
    assert_eq!(after, before);
    assert_eq!(registers(&mut conn), registers_before);
}

/// `hll-sparse-max-bytes` (CONFIG SET) decides when a sparse HLL turns dense, also for a
/// PFMERGE whose keys live on several shards.
#[test]
fn sparse_limit_applies_across_shards() {
    let (oracle, server) = servers(3, &[]);
    let mut pair = Pair::new(&oracle, &server, "hll-sparse-max-bytes");
    for (key, from) in [("a", 0), ("b", 100)] {
        let mut add = vec![b("PFADD"), b(key)];
        add.extend((from..from + 12).map(num));
        pair.check(&add, Cmp::Exact);
    }
    for step in [
        &["PFDEBUG", "ENCODING", "a"][..],
        &["CONFIG", "SET", "hll-sparse-max-bytes", "40"],
        // Sparse sources whose union needs more than 40 bytes.
        &["PFMERGE", "k:1", "a", "b"],
        &["PFDEBUG", "ENCODING", "k:1"],
        &["GET", "k:1"],
        &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"],
        &["PFMERGE", "k:2", "a", "b"],
        &["PFDEBUG", "ENCODING", "k:2"],
        &["GET", "k:2"],
    ] {
        pair.check_str(step);
    }
}
