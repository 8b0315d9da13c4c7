//! Scripting (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL): replies compared with `redis-server`
//! over keys on different shards (no hash tags), scripts atomic across shards under
//! concurrent clients, a long script that leaves its shard serving (BUSY, SCRIPT KILL from
//! a connection on the same shard), and functions and script effects surviving a restart.

mod common;
mod diff;

use std::thread;
use std::time::{Duration, Instant};

use common::{Reply, Server, TempDir};
use diff::{args, Cmp, Pair};

const SHARDS: usize = 4;

/// Each request as the client sends it; replies must be identical (error texts too).
const SCRIPTS: &[&[&str]] = &[
    &["EVAL", "return 'hello'", "0"],
    &["EVAL", "return 100.5", "0"],
    &["EVAL", "return {1,2,3,'ciao',{1,2}}", "0"],
    &["EVAL", "return true", "0"],
    &["EVAL", "return false", "0"],
    &["EVAL", "return {ok='fine'}", "0"],
    &["EVAL", "return {err='ERR this is an error'}", "0"],
    &["EVAL", "return redis.error_reply('MY_CODE custom')", "0"],
    &["EVAL", "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}", "2", "a", "b", "c", "d"],
    &["SET", "mykey", "myval"],
    &["EVAL", "return redis.call('get',KEYS[1])", "1", "mykey"],
    &["EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"],
    &["EVALSHA", "FD758D1589D044DD850A6F05D52F2EEFD27F033F", "1", "mykey"],
    &["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"],
    &["EVAL", "local foo = redis.pcall('incr',KEYS[1]) return {type(foo),foo['err']}", "1", "mykey"],
    &["EVAL", "return redis.pcall('get',KEYS[1]) == false", "1", "nokey"],
    &["EVAL", "redis.call('lpush',KEYS[1],'val')", "1", "mykey"],
    &["EVAL", "return redis.call('nosuchcommand')", "0"],
    &["EVAL", "return redis.call('get','a','b','c')", "0"],
    &["EVAL", "return redis.call()", "0"],
    &["EVAL", "return a", "0"],
    &["EVAL", "a = 10", "0"],
    &["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"],
    &["EVAL", "return cjson.encode({1,2,'x'})", "0"],
    &["EVAL", "return cjson.decode('{\"a\":[1,2]}').a[2]", "0"],
    &["EVAL", "return cmsgpack.unpack(cmsgpack.pack({1,'two'}))[2]", "0"],
    &["EVAL", "return bit.band(0x12345678, 0xff)", "0"],
    &["EVAL", "return struct.unpack('>i2', struct.pack('>i2', 258))", "0"],
    &["EVAL", "return 1", "-1"],
    &["EVAL", "return 1", "3", "a"],
    &["EVAL", "syntax error here", "0"],
    // Standalone, SELECT out of range is Redis's range error, raised and caught.
    &["EVAL", "return redis.call('select',99)", "0"],
    &["EVAL", "return redis.pcall('select',99)['err']", "0"],
    &["EVAL", "return redis.call('select',0)", "0"],
    &["SELECT", "99"],
    // Writes over keys of different shards, read back by another script.
    &[
        "EVAL",
        "redis.call('set',KEYS[1],ARGV[1]); redis.call('rpush',KEYS[2],ARGV[1]); \
         return redis.call('sadd',KEYS[3],ARGV[1])",
        "3",
        "s:one",
        "s:two",
        "s:three",
        "v",
    ],
    &[
        "EVAL",
        "return {redis.call('get',KEYS[1]), redis.call('lrange',KEYS[2],0,-1), \
         redis.call('smembers',KEYS[3])}",
        "3",
        "s:one",
        "s:two",
        "s:three",
    ],
    // A multi-key command inside a script, over keys on different shards.
    &["EVAL", "return redis.call('smove',KEYS[1],KEYS[2],'v')", "2", "s:three", "s:four"],
    &["EVAL", "return redis.call('mset','u1','1','u2','2','u3','3')", "0"],
    &["EVAL", "return redis.call('mget','u1','u2','u3')", "0"],
    &["SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])"],
    &["SCRIPT", "EXISTS", "5a5a7b8bd4d8bd1e1f9ed5b4b2ee4a92b40b9e88", "0000000000000000000000000000000000000000"],
    &[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)\nredis.register_function{function_name='f2', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}",
    ],
    &["FCALL", "f1", "1", "counter", "5"],
    &["FCALL", "F1", "1", "counter", "5"],
    &["FCALL_RO", "f2", "1", "counter"],
    &["FCALL_RO", "f1", "1", "counter", "1"],
    &["FCALL", "nosuch", "0"],
    // Redis lists a library's functions in its hash table's order: one function here.
    &[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib2
redis.register_function{function_name='g', callback=function() return 1 end, flags={'no-writes', 'allow-oom'}, description='d'}",
    ],
    &["FUNCTION", "LIST", "LIBRARYNAME", "lib2"],
    &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "lib2"],
    &["FUNCTION", "DELETE", "lib1"],
    &["FUNCTION", "DELETE", "lib1"],
    &["SCRIPT", "FLUSH"],
    &["EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"],
];

#[test]
fn scripts_match_redis_over_shards() {
    let (oracle, server) = diff::servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "scripting");
    pair.check_str(&["FLUSHALL"]);
    pair.check_str(&["FUNCTION", "FLUSH"]);
    for request in SCRIPTS {
        pair.check(&args(request), Cmp::Exact);
    }
}

/// Transfers between accounts on different shards, each a script over two declared keys;
/// readers sum every account in one script (no keys: it holds every shard). The sum never
/// changes.
#[test]
fn scripts_are_atomic_across_shards() {
    let server = Server::start(&["--shards", "4"]);
    let accounts = ["acct:a", "acct:b", "acct:c", "acct:d", "acct:e"];
    let mut setup = server.connect();
    for account in accounts {
        assert_eq!(setup.call(&["SET", account, "1000"]), Reply::ok());
    }
    let port = server.port;
    let transfer = "local a = tonumber(redis.call('get', KEYS[1])) \
                    local n = tonumber(ARGV[1]) \
                    redis.call('set', KEYS[1], a - n) \
                    redis.call('incrby', KEYS[2], n) \
                    return a - n";
    let writers: Vec<_> = (0..3)
        .map(|w| {
            thread::spawn(move || {
                let mut conn = common::Resp::connect(port);
                for i in 0..300usize {
                    let from = accounts[(i + w) % accounts.len()];
                    let to = accounts[(i * 7 + w + 1) % accounts.len()];
                    if from == to {
                        continue;
                    }
                    let amount = ((i % 13) + 1).to_string();
                    let reply = conn.call(&["EVAL", transfer, "2", from, to, &amount]);
                    assert!(matches!(reply, Reply::Int(_)), "{reply:?}");
                }
            })
        })
        .collect();
    let sum = "local s = 0 for _, k in ipairs({'acct:a','acct:b','acct:c','acct:d','acct:e'}) \
               do s = s + tonumber(redis.call('get', k)) end return s";
    let mut reader = server.connect();
    for _ in 0..200 {
        assert_eq!(reader.call(&["EVAL", sum, "0"]), Reply::Int(5000));
    }
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(reader.call(&["EVAL", sum, "0"]), Reply::Int(5000));
}

/// A long script: its shard keeps answering (BUSY past the threshold, PING as BUSY), SCRIPT
/// KILL from a connection on the same shard ends it, and the script's client gets the error.
/// Also a script that catches the kill's error with `pcall` in a loop (Redis's "even when
/// use pcall" test): whatever the loop's length, the kill ends it.
#[test]
fn a_busy_script_is_killed_from_its_own_shard() {
    let scripts = [
        "local i = 0 while true do i = i + 1 end",
        "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
    ];
    for (shards, body) in [("1", scripts[0]), ("2", scripts[0]), ("1", scripts[1])] {
        let server = Server::start(&["--shards", shards]);
        let mut admin = server.connect();
        assert_eq!(
            admin.call(&["CONFIG", "SET", "busy-reply-threshold", "50"]),
            Reply::ok()
        );
        let port = server.port;
        let looping = thread::spawn(move || {
            let mut conn = common::Resp::connect(port);
            conn.call(&["EVAL", body, "0"])
        });
        let started = Instant::now();
        loop {
            match admin.call(&["PING"]) {
                Reply::Error(error) if error.starts_with("BUSY") => break,
                _ if started.elapsed() > Duration::from_secs(10) => {
                    panic!("the script never became busy")
                }
                _ => thread::sleep(Duration::from_millis(10)),
            }
        }
        assert!(matches!(admin.call(&["GET", "x"]), Reply::Error(e) if e.starts_with("BUSY")));
        assert_eq!(admin.call(&["SCRIPT", "KILL"]), Reply::ok());
        let Reply::Error(killed) = looping.join().unwrap() else {
            panic!("the killed script's client gets an error");
        };
        assert!(killed.contains("killed by user"), "{killed}");
        assert_eq!(admin.call(&["PING"]), Reply::Simple("PONG".into()));
        assert_eq!(
            admin.call(&["SCRIPT", "KILL"]),
            Reply::Error("NOTBUSY No scripts in execution right now.".into())
        );
    }
}

/// A script that wrote cannot be killed; it keeps running until it ends by itself.
#[test]
fn a_script_that_wrote_is_unkillable() {
    let server = Server::start(&["--shards", "2"]);
    let mut admin = server.connect();
    admin.call(&["CONFIG", "SET", "busy-reply-threshold", "50"]);
    let port = server.port;
    let script = thread::spawn(move || {
        let mut conn = common::Resp::connect(port);
        conn.call(&[
            "EVAL",
            // Busy for a second of the server's clock (TIME inside a script), however fast
            // the machine runs Lua: a fixed loop count ended before the threshold on some.
            "redis.call('set', KEYS[1], 'y') local t0 = redis.call('time') local n = 0 \
             while true do n = n + 1 local t = redis.call('time') \
             if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 1000000 then return n end end",
            "1",
            "x",
        ])
    });
    let started = Instant::now();
    let reply = loop {
        match admin.call(&["SCRIPT", "KILL"]) {
            Reply::Error(error) if error.starts_with("NOTBUSY") => {
                assert!(started.elapsed() < Duration::from_secs(10), "never busy");
                thread::sleep(Duration::from_millis(5));
            }
            other => break other,
        }
    };
    assert!(
        matches!(&reply, Reply::Error(e) if e.starts_with("UNKILLABLE")),
        "{reply:?}"
    );
    // It ran to its end: its own result, and its write stayed.
    assert!(
        matches!(script.join().unwrap(), Reply::Int(n) if n > 0),
        "the script did not finish by itself"
    );
    assert_eq!(admin.call(&["GET", "x"]), Reply::Bulk(Some(b"y".to_vec())));
}

#[test]
fn functions_and_script_effects_survive_a_restart() {
    let dir = TempDir::new("scripting-aof");
    let args = ["--shards", "2", "--aof", dir.arg(), "--fsync", "always"];
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    let library = "#!lua name=counters\nredis.register_function('bump', function(keys, args) \
                   return redis.call('incrby', keys[1], args[1]) end)";
    assert_eq!(
        conn.call(&["FUNCTION", "LOAD", library]),
        Reply::bulk("counters")
    );
    assert_eq!(conn.call(&["FCALL", "bump", "1", "c1", "5"]), Reply::Int(5));
    assert_eq!(
        conn.call(&[
            "EVAL",
            "redis.call('set', KEYS[1], ARGV[1]) redis.call('rpush', KEYS[2], ARGV[1]) return 1",
            "2",
            "k:a",
            "k:b",
            "v",
        ]),
        Reply::Int(1)
    );
    drop(conn);
    server.stop();

    let mut server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["FCALL", "bump", "1", "c1", "1"]), Reply::Int(6));
    assert_eq!(conn.call(&["GET", "k:a"]), Reply::bulk("v"));
    assert_eq!(
        conn.call(&["LRANGE", "k:b", "0", "-1"]),
        Reply::Array(Some(vec![Reply::bulk("v")]))
    );
    // A rewritten log keeps the libraries too.
    conn.call(&["BGREWRITEAOF"]);
    thread::sleep(Duration::from_millis(500));
    drop(conn);
    server.stop();
    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["FCALL", "bump", "1", "c1", "1"]), Reply::Int(7));
}

/// Cluster mode: a script's declared keys must share a slot (CROSSSLOT otherwise), and a key
/// it did not declare, on a shard it does not hold, gets Redis's "non local key" error.
#[test]
fn cluster_mode_keeps_redis_cluster_rules() {
    let dir = TempDir::new("scripting-cluster");
    let conf = dir.path().join("nodes.conf");
    let server = Server::start(&[
        "--shards",
        "2",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        conf.to_str().unwrap(),
        "--cluster-port",
        "0",
    ]);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        Reply::ok()
    );
    assert!(
        common::eventually(Duration::from_secs(10), || {
            matches!(conn.call(&["CLUSTER", "INFO"]), Reply::Bulk(Some(info))
                if String::from_utf8_lossy(&info).contains("cluster_state:ok"))
        }),
        "the one-node cluster never came up"
    );
    assert_eq!(
        conn.call(&["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "a"]),
        Reply::ok()
    );
    let Reply::Error(crossslot) = conn.call(&["EVAL", "return 1", "2", "a", "b"]) else {
        panic!("keys of two slots are refused");
    };
    assert!(crossslot.starts_with("CROSSSLOT"), "{crossslot}");
    // "b" lives on the other shard than "a" (slots 3300 and 15495, over 2 shards).
    let Reply::Error(non_local) = conn.call(&["EVAL", "return redis.call('get', 'b')", "1", "a"])
    else {
        panic!("an undeclared key elsewhere is refused");
    };
    assert!(non_local.contains("non local key"), "{non_local}");
    let Reply::Error(select) = conn.call(&["EVAL", "return redis.call('select', 1)", "0"]) else {
        panic!("SELECT 1 in a script is refused in cluster mode");
    };
    assert!(
        select.starts_with("ERR SELECT is not allowed in cluster mode"),
        "{select}"
    );
    assert_eq!(
        conn.call(&[
            "EVAL",
            "redis.call('set', KEYS[1], 1) return redis.call('incr', KEYS[2])",
            "2",
            "{t}a",
            "{t}b",
        ]),
        Reply::Int(1)
    );
}

/// Redis 7 refuses a script that declares flags without `no-writes` while
/// `min-replicas-to-write` is not met (it is a write command), and one without flags at its
/// first write; `maxmemory 1` refuses a script's write even on an empty shard. Compared with
/// `redis-server`, error texts included.
#[test]
fn scripts_meet_min_replicas_and_maxmemory_as_redis() {
    let (oracle, server) = diff::servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "script refusals");
    pair.check_str(&["SET", "x", "some value"]);
    pair.check_str(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    for script in [
        "#!lua flags=no-writes\nreturn redis.call('get','x')",
        "return redis.call('get','x')",
        "#!lua\nreturn redis.call('get','x')",
        "return redis.call('set','x', 1)",
        "#!lua flags=allow-oom\nreturn 1",
    ] {
        pair.check_str(&["EVAL", script, "1", "x"]);
    }
    pair.check_str(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    pair.check_str(&["FLUSHALL"]);
    pair.check_str(&["CONFIG", "SET", "maxmemory", "1"]);
    for (script, numkeys) in [
        ("return redis.call('set','x','y')", "1"),
        ("#!lua\nreturn 1", "0"),
        ("#!lua flags=no-writes\nreturn 1", "0"),
    ] {
        let mut request = vec!["EVAL", script, numkeys];
        if numkeys == "1" {
            request.push("x");
        }
        pair.check_str(&request);
    }
    pair.check_str(&["CONFIG", "SET", "maxmemory", "0"]);
    pair.check_str(&["EVAL", "return redis.call('set','x','y')", "1", "x"]);
    pair.report();
}

/// A script without flags runs under `maxmemory` and fails at its first write: EVAL counts
/// as called and failed (Redis's `Consistent eval error reporting`); a script that declares
/// its flags (without `allow-oom`) is refused before it runs: rejected.
#[test]
fn an_oom_inside_a_script_fails_the_eval_a_declared_script_is_rejected() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    let eval_stats = |conn: &mut common::Resp| {
        let Reply::Bulk(Some(text)) = conn.call(&["INFO", "commandstats"]) else {
            panic!("INFO commandstats");
        };
        let text = String::from_utf8(text).unwrap();
        (text.lines())
            .find_map(|l| l.strip_prefix("cmdstat_eval:").map(str::to_owned))
            .unwrap_or_default()
    };
    assert_eq!(conn.call(&["CONFIG", "SET", "maxmemory", "1"]), Reply::ok());
    assert_eq!(conn.call(&["CONFIG", "RESETSTAT"]), Reply::ok());
    let script = "return redis.call('set','x','y')";
    let reply = conn.call(&["EVAL", script, "1", "x"]);
    assert!(
        matches!(&reply, Reply::Error(e) if e.starts_with("OOM command not allowed")),
        "{reply:?}"
    );
    let stats = eval_stats(&mut conn);
    assert!(stats.starts_with("calls=1,"), "{stats}");
    assert!(
        stats.ends_with("rejected_calls=0,failed_calls=1"),
        "{stats}"
    );

    assert_eq!(conn.call(&["CONFIG", "RESETSTAT"]), Reply::ok());
    let declared = format!("#!lua\n{script}");
    let reply = conn.call(&["EVAL", &declared, "1", "x"]);
    assert!(
        matches!(&reply, Reply::Error(e) if e.starts_with("OOM")),
        "{reply:?}"
    );
    let stats = eval_stats(&mut conn);
    assert!(stats.starts_with("calls=0,"), "{stats}");
    assert!(
        stats.ends_with("rejected_calls=1,failed_calls=0"),
        "{stats}"
    );
}

/// A `redis.pcall` error counts in INFO errorstats once, when the call fails, also when the
/// script returns it as its reply (the EVAL then fails without counting it again), and a
/// script returning an error table of its own counts it: compared with `redis-server`
/// (Redis's `Consistent eval error reporting`).
#[test]
fn a_pcall_error_returned_by_its_script_counts_once_as_redis() {
    use diff::{Conn, V};
    let (oracle, server) = diff::servers(SHARDS, &[]);
    // What the stats say after each script: errorstats, the error total, EVAL's and the
    // inner command's call counts.
    let stats = |conn: &mut Conn, inner: &str| -> Vec<String> {
        let V::Bulk(text) = conn.call_str(&["INFO", "all"]) else {
            panic!("INFO all");
        };
        let text = String::from_utf8(text).unwrap();
        let mut lines: Vec<String> = (text.lines())
            .filter(|l| {
                l.starts_with("errorstat_")
                    || l.starts_with("total_error_replies:")
                    || l.starts_with("cmdstat_eval:")
                    || l.starts_with(&format!("cmdstat_{inner}:"))
            })
            // Call counts and outcomes, not durations.
            .map(|l| {
                (l.split(',').filter(|f| !f.starts_with("usec")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        lines.sort();
        lines
    };
    let cases: &[(&[&str], &str)] = &[
        (&["CONFIG", "SET", "maxmemory", "1"], "set"),
        (
            &["EVAL", "return redis.pcall('set','x','y')", "1", "x"],
            "set",
        ),
        (
            &[
                "EVAL",
                "local t = redis.pcall('set','x','y') return t['err']",
                "1",
                "x",
            ],
            "set",
        ),
        (&["CONFIG", "SET", "maxmemory", "0"], "set"),
        (&["SET", "n", "abc"], "set"),
        (
            &["EVAL", "return redis.pcall('incr',KEYS[1])", "1", "n"],
            "incr",
        ),
        (
            &[
                "EVAL",
                "local t = redis.pcall('incr',KEYS[1]) return {err=t['err']}",
                "1",
                "n",
            ],
            "incr",
        ),
        (
            &["EVAL", "return redis.call('incr',KEYS[1])", "1", "n"],
            "incr",
        ),
        (&["EVAL", "return {err='MY own'}", "0"], "incr"),
        // Refused before running (a read-only script's write): a rejected call of `set`.
        (
            &["EVAL_RO", "return redis.call('set','x','y')", "1", "x"],
            "set",
        ),
        (
            &[
                "EVAL_RO",
                "local t = redis.pcall('set','x','y') return t['err']",
                "1",
                "x",
            ],
            "set",
        ),
        // Failed while running: SELECT out of range.
        (&["EVAL", "return redis.call('select',99)", "0"], "select"),
    ];
    let mut oracle_conn = Conn::connect(oracle.port);
    let mut conn = Conn::connect(server.port);
    for (request, inner) in cases {
        for c in [&mut oracle_conn, &mut conn] {
            assert!(matches!(c.call_str(&["CONFIG", "RESETSTAT"]), V::Simple(_)));
        }
        let want = oracle_conn.call_str(request);
        let got = conn.call_str(request);
        assert_eq!(got, want, "{request:?}");
        assert_eq!(
            stats(&mut conn, inner),
            stats(&mut oracle_conn, inner),
            "stats after {request:?}"
        );
    }
}

/// A key a script did not declare, on a shard below the ones it holds (out of the lock
/// order), is taken when that shard is free: the script runs as on redis-server. While
/// another script holds that shard for longer than the bounded retries, it gets an error
/// instead of waiting (waiting there could close a cycle).
#[test]
fn undeclared_keys_below_the_held_shards_are_taken_when_free() {
    use corewire_kv::routing::shard_of;
    use diff::{Conn, V};
    let (oracle, server) = diff::servers(SHARDS, &[]);
    let on = |shard: usize, prefix: &str| -> String {
        (0..)
            .map(|i| format!("{prefix}{i}"))
            .find(|k| shard_of(k.as_bytes(), SHARDS) == shard)
            .unwrap()
    };
    let top = on(SHARDS - 1, "top:");
    let low: Vec<String> = (0..SHARDS - 1).map(|s| on(s, "low:")).collect();
    let body = "for i, k in ipairs(ARGV) do redis.call('set', k, i) end \
                return redis.call('mget', unpack(ARGV))";
    let mut request = vec!["EVAL", body, "1", top.as_str()];
    request.extend(low.iter().map(String::as_str));
    let mut oracle_conn = Conn::connect(oracle.port);
    let mut conn = Conn::connect(server.port);
    let want = oracle_conn.call_str(&request);
    assert!(matches!(want, V::Array(_)), "{want:?}");
    assert_eq!(conn.call_str(&request), want);

    // A script holding shard 0 for a while; meanwhile one declared on the top shard
    // touches shard 0's key.
    let busy = server.port;
    let low0 = low[0].clone();
    let holder = thread::spawn(move || {
        let mut c = Conn::connect(busy);
        let started = Instant::now();
        let reply = c.call_str(&[
            "EVAL",
            "local i = 0 while i < 20000000 do i = i + 1 end return 1",
            "1",
            &low0,
        ]);
        (reply, started.elapsed())
    });
    thread::sleep(Duration::from_millis(20));
    let started = Instant::now();
    let refused = conn.call_str(&[
        "EVAL",
        "return redis.call('get', ARGV[1])",
        "1",
        &top,
        &low[0],
    ]);
    let waited = started.elapsed();
    let (held, ran) = holder.join().unwrap();
    assert_eq!(held, V::Int(1));
    assert!(
        ran > Duration::from_millis(100),
        "the holder ran {ran:?}: too short to test"
    );
    let V::Error(text) = refused else {
        panic!("a script reaching a busy shard out of order is refused: {refused:?}");
    };
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("busy with another script"), "{text}");
    assert!(
        waited < ran,
        "refused after {waited:?}, not after the holder ({ran:?})"
    );
}
