//! Introspection against `redis-server` (the oracle): COMMAND's metadata for every command
//! this server has (generated from Redis 7.0's command tables), COMMAND GETKEYS, the HELP
//! texts and the argument errors of the introspection, CLIENT, CONFIG and OBJECT commands,
//! and the deterministic replies of SLOWLOG, LATENCY, OBJECT and SELECT. (MOVE and SWAPDB
//! answer as Redis Cluster does: one keyspace here.)
//! corewire-kv runs with 3 shards: the node-wide commands merge what every shard answers.

mod common;
mod diff;

use diff::{servers, Cmp, Pair, V};

const SHARDS: usize = 3;

/// A COMMAND INFO / DOCS reply with every `subcommands` list sorted (Redis keeps them in a
/// hash table whose order is per process) and limited to the subcommands in `listed` (this
/// server lists the subcommands it has, Redis all of its own).
fn sorted_subcommands(reply: V, listed: &[String]) -> V {
    let known = |name: &V| {
        name.as_bytes()
            .is_some_and(|name| listed.iter().any(|l| l.as_bytes() == name))
    };
    match reply {
        V::Array(items) => {
            // A COMMAND INFO entry: its 10th field lists the subcommands' entries.
            let is_info_entry = items.len() == 10 && matches!(items[0], V::Bulk(_));
            let mut items: Vec<V> = items
                .into_iter()
                .map(|item| sorted_subcommands(item, listed))
                .collect();
            if is_info_entry {
                if let V::Array(subs) = &mut items[9] {
                    subs.retain(|sub| sub.items().and_then(<[V]>::first).is_some_and(known));
                    subs.sort_by_key(|sub| sub.show());
                }
            }
            // A COMMAND DOCS map (flat in RESP2): the value after "subcommands" is itself a
            // flat map, sorted as pairs.
            if let Some(at) = items
                .iter()
                .position(|item| *item == V::bulk("subcommands"))
            {
                if let Some(V::Array(subs)) = items.get_mut(at + 1) {
                    let mut pairs: Vec<(V, V)> = subs
                        .chunks(2)
                        .map(|pair| (pair[0].clone(), pair[1].clone()))
                        .filter(|(name, _)| known(name))
                        .collect();
                    pairs.sort_by_key(|(name, _)| name.show());
                    *subs = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
                }
            }
            V::Array(items)
        }
        other => other,
    }
}

fn names(reply: &V) -> Vec<String> {
    reply
        .items()
        .expect("an array of names")
        .iter()
        .map(|name| match name {
            V::Bulk(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("a name: {}", other.show()),
        })
        .collect()
}

/// Every command and subcommand this server lists has Redis 7.0's COMMAND INFO and DOCS.
#[test]
fn command_metadata_matches_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "command metadata");
    let listed = names(&pair.kv.call_str(&["COMMAND", "LIST"]));
    assert!(listed.len() > 150, "{} commands", listed.len());
    for name in &listed {
        for query in ["INFO", "DOCS"] {
            let args = diff::args(&["COMMAND", query, name]);
            let expected = sorted_subcommands(pair.redis.call(&args), &listed);
            let actual = sorted_subcommands(pair.kv.call(&args), &listed);
            assert!(
                expected == actual,
                "COMMAND {query} {name}: redis-server vs corewire-kv\n{}\n{}",
                expected.show(),
                actual.show()
            );
        }
    }
    // Every name COMMAND LIST gives, COMMAND INFO knows (and COMMAND COUNT counts, and
    // COMMAND INFO without names lists).
    let count = pair.kv.call_str(&["COMMAND", "COUNT"]);
    let top_level = listed.iter().filter(|name| !name.contains('|')).count();
    assert_eq!(count, V::Int(top_level as i64));
    let all = pair.kv.call_str(&["COMMAND", "INFO"]);
    assert_eq!(all.items().map(<[V]>::len), Some(top_level));
    for args in [
        &["COMMAND", "INFO", "nosuch", "get"][..],
        &["COMMAND", "INFO", "config|get"],
        &["COMMAND", "DOCS", "nosuch"],
        &["COMMAND", "LIST", "FILTERBY", "MODULE", "nosuch"],
        &["COMMAND", "LIST", "FILTERBY", "NOPE", "x"],
        &["COMMAND", "LIST", "FILTERBY"],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "x", "extra"],
        &["COMMAND", "NOPE"],
        &["COMMAND", "COUNT", "extra"],
    ] {
        pair.check_str(args);
    }
    // Filters over the commands both have.
    for filter in [&["ACLCAT", "connection"][..], &["PATTERN", "*ubscribe"]] {
        let mut args = vec!["COMMAND", "LIST", "FILTERBY"];
        args.extend_from_slice(filter);
        let mut expected = names(&pair.redis.call_str(&args));
        let mut actual = names(&pair.kv.call_str(&args));
        expected.retain(|name| listed.contains(name));
        expected.sort();
        actual.sort();
        assert_eq!(expected, actual, "COMMAND LIST FILTERBY {filter:?}");
    }
    pair.report();
}

/// COMMAND GETKEYS and GETKEYSANDFLAGS, keys found by the key specs (and by the commands
/// that find their own), and their errors.
#[test]
fn command_getkeys_matches_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "command getkeys");
    for args in [
        &["COMMAND", "GETKEYS", "get", "k"][..],
        &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"],
        &["COMMAND", "GETKEYS", "mset", "a", "1", "b"],
        &["COMMAND", "GETKEYS", "lmove", "a", "b", "left", "right"],
        &[
            "COMMAND",
            "GETKEYS",
            "zunionstore",
            "d",
            "2",
            "a",
            "b",
            "weights",
            "1",
            "2",
        ],
        &["COMMAND", "GETKEYS", "zunionstore", "d", "x", "a"],
        &["COMMAND", "GETKEYS", "memory", "usage", "k"],
        &["COMMAND", "GETKEYS", "object", "encoding", "k"],
        &["COMMAND", "GETKEYS", "ping"],
        &["COMMAND", "GETKEYS", "nosuch", "k"],
        &["COMMAND", "GETKEYS", "get"],
        &["COMMAND", "GETKEYS", "config", "nosuch"],
        &["COMMAND", "GETKEYS"],
        &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v", "get"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "lmove",
            "a",
            "b",
            "left",
            "right",
        ],
        &["COMMAND", "GETKEYSANDFLAGS", "del", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b"],
        &["COMMAND", "GETKEYS", "migrate", "h", "1", "k", "0", "10"],
        &[
            "COMMAND", "GETKEYS", "migrate", "h", "1", "", "0", "10", "KEYS", "a", "b",
        ],
        // Commands of other families too: GETKEYS reads Redis's table.
        &[
            "COMMAND", "GETKEYS", "eval", "return 1", "2", "k1", "k2", "a",
        ],
        &["COMMAND", "GETKEYS", "eval", "return 1", "0"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "sort",
            "k",
            "by",
            "w*",
            "store",
            "d",
        ],
        &[
            "COMMAND", "GETKEYS", "xread", "count", "1", "streams", "a", "b", "0", "0",
        ],
        &[
            "COMMAND", "GETKEYS", "xgroup", "create", "key", "group", "$",
        ],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "bitfield",
            "k",
            "get",
            "u8",
            "0",
        ],
        &["COMMAND", "GETKEYS", "lcs", "a", "b"],
    ] {
        pair.check_str(args);
    }
    pair.report();
}

/// The HELP text of every container this server has, and subcommand/arity errors.
#[test]
fn help_texts_and_argument_errors_match_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "help and errors");
    for container in [
        "COMMAND", "CONFIG", "CLIENT", "OBJECT", "MEMORY", "SLOWLOG", "LATENCY", "PUBSUB",
    ] {
        if container != "CLIENT" {
            pair.check_str(&[container, "HELP"]);
            pair.check_str(&[container, "help"]);
        }
        pair.check_str(&[container, "NOSUCH"]);
        pair.check_str(&[container, "HELP", "extra"]);
    }
    // CLIENT HELP: Redis 7.0's lines, and CLIENT SETINFO's (a Redis 7.2 command this server
    // has).
    let help = diff::args(&["CLIENT", "HELP"]);
    let expected = pair.redis.call(&help);
    let mut actual = pair.kv.call(&help).items().expect("lines").to_vec();
    let setinfo = (actual.iter())
        .position(|line| line.show().starts_with("+SETINFO"))
        .expect("SETINFO's lines");
    let removed: Vec<V> = actual.drain(setinfo..setinfo + 4).collect();
    assert!(
        removed[3].show().contains("LIB-VER"),
        "{}",
        removed[3].show()
    );
    assert_eq!(expected, V::Array(actual), "CLIENT HELP but SETINFO");
    for args in [
        &["SLOWLOG", "GET", "x"][..],
        &["SLOWLOG", "GET", "-2"],
        &["SLOWLOG", "LEN", "x"],
        &["SLOWLOG", "RESET", "x"],
        &["LATENCY", "HISTORY"],
        &["LATENCY", "HISTORY", "nosuch-event"],
        &["LATENCY", "LATEST", "x"],
        &["LATENCY", "RESET", "nosuch-event"],
        &["LATENCY", "HISTOGRAM", "nosuch"],
        &["LATENCY", "GRAPH", "nosuch-event"],
        &["OBJECT", "ENCODING", "missing"],
        &["OBJECT", "REFCOUNT", "missing"],
        &["OBJECT", "IDLETIME", "missing"],
        &["OBJECT", "FREQ", "missing"],
        &["OBJECT", "ENCODING"],
        &["MEMORY", "USAGE", "missing"],
        &["MEMORY", "USAGE", "missing", "SAMPLES"],
        &["MEMORY", "USAGE", "missing", "SAMPLES", "x"],
        &["MEMORY", "USAGE", "missing", "NOPE", "1"],
        &["MEMORY", "PURGE"],
        &["MEMORY", "MALLOC-STATS", "x"],
        &["SELECT", "0"],
        &["SELECT", "x"],
        &["SELECT", "-1"],
        &["SELECT", "16"],
        &["SELECT", "100000"],
        &["SWAPDB", "0"],
        &["MOVE", "k"],
        &["DEBUG"],
        // Protected: refused while `enable-debug-command` is `no` (the default).
        &["DEBUG", "SLEEP", "0"],
        &["DEBUG", "NOSUCH"],
        &["TIME", "x"],
        &["LASTSAVE", "x"],
        &["SHUTDOWN", "NOPE"],
        &["SHUTDOWN", "SAVE", "NOSAVE"],
        &["INFO", "nosuchsection"],
    ] {
        pair.check_str(args);
    }
    pair.report();
}

/// OBJECT ENCODING for each type across Redis's size thresholds (with its default
/// `*-max-*` settings, and after CONFIG SET lowers them), REFCOUNT of shared integers, and
/// the LFU policy's FREQ.
#[test]
fn object_encodings_match_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "object encodings");
    let run = |pair: &mut Pair, parts: &[&str]| {
        pair.check_str(parts);
    };
    let long = "x".repeat(100);
    let big_member = "m".repeat(70);
    for args in [
        &["SET", "int", "12345"][..],
        &["SET", "neg", "-1"],
        &["SET", "big", "12345678901234567890"],
        &["SET", "short", "hello"],
        &["SET", "long", &long],
        &["RPUSH", "list", "a", "b"],
        &["SADD", "ints", "1", "2", "3"],
        &["SADD", "strs", "a", "b"],
        &["HSET", "hash", "f", "v"],
        &["HSET", "bighash", "f", &big_member],
        &["ZADD", "zset", "1", "a"],
        &["ZADD", "bigzset", "1", &big_member],
    ] {
        run(&mut pair, args);
    }
    for key in [
        "int", "neg", "big", "short", "long", "list", "ints", "strs", "hash", "bighash", "zset",
        "bigzset",
    ] {
        run(&mut pair, &["OBJECT", "ENCODING", key]);
    }
    run(&mut pair, &["OBJECT", "REFCOUNT", "short"]);
    run(&mut pair, &["SET", "shared", "100"]);
    run(&mut pair, &["OBJECT", "REFCOUNT", "shared"]);
    // Past the thresholds, by count.
    for i in 0..600 {
        let i = i.to_string();
        run(&mut pair, &["SADD", "ints", &i]);
        run(&mut pair, &["SADD", "strs", &i]);
        run(&mut pair, &["RPUSH", "list", &i]);
        run(&mut pair, &["HSET", "hash", &i, "v"]);
        run(&mut pair, &["ZADD", "zset", "1", &i]);
    }
    for key in ["list", "ints", "strs", "hash", "zset"] {
        run(&mut pair, &["OBJECT", "ENCODING", key]);
    }
    // Lowered thresholds apply to what is written next.
    for args in [
        &["CONFIG", "SET", "set-max-intset-entries", "2"][..],
        &["CONFIG", "SET", "hash-max-listpack-entries", "1"],
        &["CONFIG", "SET", "zset-max-listpack-entries", "1"],
        &["SADD", "s2", "1", "2", "3"],
        &["HSET", "h2", "a", "1", "b", "2"],
        &["ZADD", "z2", "1", "a", "2", "b"],
        &["OBJECT", "ENCODING", "s2"],
        &["OBJECT", "ENCODING", "h2"],
        &["OBJECT", "ENCODING", "z2"],
        &["OBJECT", "FREQ", "short"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        &["OBJECT", "IDLETIME", "short"],
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    ] {
        run(&mut pair, args);
    }
    pair.report();
}

/// CONFIG GET of the parameters Redis's suite reads and sets, their CONFIG SET errors, and
/// patterns and several names at once (replies as unordered pairs).
#[test]
fn config_get_and_set_match_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "config");
    for name in [
        "maxmemory",
        "maxmemory-policy",
        "maxmemory-samples",
        "notify-keyspace-events",
        "slowlog-log-slower-than",
        "slowlog-max-len",
        "latency-monitor-threshold",
        "latency-tracking",
        "latency-tracking-info-percentiles",
        "tracking-table-max-keys",
        "timeout",
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        "set-max-intset-entries",
        "zset-max-listpack-value",
        "list-max-listpack-size",
        "list-compress-depth",
        "lazyfree-lazy-user-del",
        "lfu-log-factor",
        "lfu-decay-time",
        "active-expire-effort",
        "client-output-buffer-limit",
        "proto-max-bulk-len",
        "client-query-buffer-limit",
        "busy-reply-threshold",
        "lua-time-limit",
        "appendfsync",
        "requirepass",
        "save",
    ] {
        pair.check(&diff::args(&["CONFIG", "GET", name]), Cmp::UnorderedPairs);
    }
    for args in [
        &["CONFIG", "GET", "maxmemory*"][..],
        &["CONFIG", "GET", "slowlog-*", "latency-monitor-threshold"],
        &["CONFIG", "GET", "nosuch"],
        &["CONFIG", "GET", "*max-*-entries*"],
    ] {
        pair.check(&diff::args(args), Cmp::UnorderedPairs);
    }
    for args in [
        &["CONFIG", "SET", "maxmemory", "10mb"][..],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory", "1.5gb"],
        &["CONFIG", "SET", "maxmemory", "-1"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["CONFIG", "SET", "maxmemory-policy", "nosuch"],
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        &["CONFIG", "GET", "notify-keyspace-events"],
        &["CONFIG", "SET", "notify-keyspace-events", "Kz$x"],
        &["CONFIG", "SET", "notify-keyspace-events", "Q"],
        &["CONFIG", "SET", "notify-keyspace-events", ""],
        &["CONFIG", "SET", "slowlog-log-slower-than", "abc"],
        &["CONFIG", "SET", "slowlog-max-len", "-1"],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 99.9",
        ],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "101"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", ""],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &["CONFIG", "SET", "hash-max-ziplist-entries", "100"],
        &["CONFIG", "GET", "hash-max-listpack-entries"],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 512kb 10",
        ],
        &["CONFIG", "GET", "client-output-buffer-limit"],
        &["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 2"],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "nosuch 1 2 3",
        ],
        &["CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"],
        &["CONFIG", "SET", "maxmemory", "1mb", "nosuch", "2"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "daemonize", "yes"],
        &["CONFIG", "SET", "nosuch", "1"],
        &["CONFIG", "SET", "maxmemory"],
        &["CONFIG", "SET", "timeout", "0"],
        &["CONFIG", "SET", "lfu-log-factor", "20"],
        &["CONFIG", "SET", "tracking-table-max-keys", "10"],
        &["CONFIG", "SET", "maxmemory-samples", "0"],
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "0",
            "maxmemory-policy",
            "allkeys-lru",
        ],
        &["CONFIG", "RESETSTAT", "x"],
    ] {
        pair.check(&diff::args(args), Cmp::UnorderedPairs);
    }
    pair.report();
}

/// CLIENT TRACKING's argument checks and TRACKINGINFO/GETREDIR/CACHING on one connection;
/// CLIENT REPLY OFF and SKIP; CLIENT NO-EVICT; CLIENT PAUSE and UNBLOCK errors.
#[test]
fn client_modes_match_redis() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "client modes");
    for args in [
        &["CLIENT", "TRACKINGINFO"][..],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKING", "on", "prefix", "a"],
        &["CLIENT", "TRACKING", "on", "optin", "optout"],
        &["CLIENT", "TRACKING", "on", "bcast", "optin"],
        &["CLIENT", "TRACKING", "on", "redirect", "999999"],
        &["CLIENT", "TRACKING", "on", "redirect", "x"],
        &["CLIENT", "TRACKING", "on", "nosuch"],
        &["CLIENT", "TRACKING", "maybe"],
        &["CLIENT", "TRACKING", "on", "optin", "noloop"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "CACHING", "maybe"],
        &["CLIENT", "TRACKING", "on", "optout"],
        &["CLIENT", "TRACKING", "on", "bcast"],
        &["CLIENT", "TRACKING", "off"],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "ab",
        ],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "b",
        ],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "ax"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "NO-EVICT", "on"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "NO-EVICT", "off"],
        &["CLIENT", "PAUSE", "x"],
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "10", "NOPE"],
        &["CLIENT", "PAUSE", "0", "WRITE"],
        &["CLIENT", "UNPAUSE"],
        &["CLIENT", "UNBLOCK", "x"],
        &["CLIENT", "UNBLOCK", "999999"],
        &["CLIENT", "UNBLOCK", "999999", "NOPE"],
        &["CLIENT", "UNBLOCK", "999999", "ERROR"],
        &["CLIENT", "REPLY", "maybe"],
    ] {
        pair.check_str(args);
    }
    // REPLY SKIP: neither it nor the next command is answered.
    for conn in [&mut pair.redis, &mut pair.kv] {
        conn.send(&diff::args(&["CLIENT", "REPLY", "SKIP"]));
        conn.send(&diff::args(&["SET", "skipped", "1"]));
    }
    pair.check_str(&["GET", "skipped"]);
    // REPLY OFF: nothing comes back until REPLY ON's OK.
    for conn in [&mut pair.redis, &mut pair.kv] {
        conn.send(&diff::args(&["CLIENT", "REPLY", "OFF"]));
        conn.send(&diff::args(&["SET", "quiet", "1"]));
        conn.send(&diff::args(&["NOSUCH"]));
        conn.send(&diff::args(&["CLIENT", "REPLY", "ON"]));
    }
    let expected = pair.redis.read();
    assert_eq!(expected, V::ok());
    assert_eq!(pair.kv.read(), expected);
    pair.check_str(&["GET", "quiet"]);
    pair.report();
}

/// The commands SLOWLOG GET lists, newest first (the rest of each entry is timing).
fn slowlog_commands(conn: &mut diff::Conn) -> Vec<V> {
    let V::Array(entries) = conn.call_str(&["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET did not answer an array");
    };
    (entries.into_iter())
        .map(|entry| match entry {
            V::Array(mut fields) if fields.len() > 3 => fields.swap_remove(3),
            other => panic!("a SLOWLOG entry of another shape: {}", other.show()),
        })
        .collect()
}

#[test]
fn slowlog_reset_inside_multi_clears_what_ran_before_it() {
    let (oracle, server) = servers(SHARDS, &[]);
    let mut pair = Pair::new(&oracle, &server, "slowlog in multi");
    pair.check_str(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    pair.check_str(&["SLOWLOG", "RESET"]);
    pair.check_str(&["MULTI"]);
    for args in [
        &["SET", "before", "1"][..],
        &["SLOWLOG", "RESET"],
        &["SET", "after", "2"],
    ] {
        pair.check_str(args);
    }
    pair.check_str(&["EXEC"]);
    let expected = slowlog_commands(&mut pair.redis);
    assert_eq!(expected.len(), 2, "redis-server's entries: {expected:?}");
    assert_eq!(slowlog_commands(&mut pair.kv), expected);
    pair.report();
}
