//! Lists, hashes, sets and sorted sets with real processes: they survive a restart (AOF
//! replay), an AOF rewrite followed by `kill -9` (the rewrite's image plus the records after
//! it), and DUMP/RESTORE; keys spread over shards are refused with a reason, hash-tagged ones
//! work.

mod common;

use std::time::Duration;

use common::{eventually, Reply, Resp, Server, TempDir};

/// Keys the script writes, with their types.
const KEYS: &[&str] = &[
    "list", "{t}list2", "{t}list", "hash", "set", "{t}s1", "{t}s2", "{t}inter", "zset", "{t}z1",
    "{t}union", "popped",
];

fn show(reply: &Reply) -> String {
    match reply {
        Reply::Simple(s) => format!("+{s}"),
        Reply::Error(e) => format!("-{e}"),
        Reply::Int(i) => format!(":{i}"),
        Reply::Bulk(None) | Reply::Array(None) => "nil".into(),
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        Reply::Array(Some(items)) => {
            format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(","))
        }
    }
}

fn sorted(reply: &Reply) -> String {
    let Reply::Array(Some(items)) = reply else {
        return show(reply);
    };
    let mut items: Vec<String> = items.iter().map(show).collect();
    items.sort();
    format!("[{}]", items.join(","))
}

/// Every key's type and content, order-insensitive where Redis is.
fn state(conn: &mut Resp) -> Vec<String> {
    let mut out = vec![show(&conn.call(&["DBSIZE"]))];
    for key in KEYS {
        let kind = show(&conn.call(&["TYPE", key]));
        let content = match kind.as_str() {
            "+list" => show(&conn.call(&["LRANGE", key, "0", "-1"])),
            "+hash" => sorted(&conn.call(&["HGETALL", key])),
            "+set" => sorted(&conn.call(&["SMEMBERS", key])),
            "+zset" => show(&conn.call(&["ZRANGE", key, "0", "-1", "WITHSCORES"])),
            "+string" => show(&conn.call(&["GET", key])),
            _ => String::new(),
        };
        let ttl = match conn.call(&["TTL", key]) {
            Reply::Int(t) if t > 0 => "ttl".to_string(),
            other => show(&other),
        };
        out.push(format!("{key} {kind} {content} {ttl}"));
    }
    out
}

fn write_round(conn: &mut Resp, round: usize) {
    let r = round.to_string();
    let calls: Vec<Vec<String>> = vec![
        vec![
            "RPUSH".into(),
            "list".into(),
            format!("a{r}"),
            format!("b{r}"),
            "c".into(),
        ],
        vec![
            "LPUSH".into(),
            "{t}list".into(),
            format!("x{r}"),
            "y".into(),
        ],
        vec![
            "LMOVE".into(),
            "{t}list".into(),
            "{t}list2".into(),
            "LEFT".into(),
            "RIGHT".into(),
        ],
        vec!["LREM".into(), "list".into(), "1".into(), "c".into()],
        vec![
            "HSET".into(),
            "hash".into(),
            format!("f{r}"),
            r.clone(),
            "n".into(),
            "1".into(),
        ],
        vec!["HINCRBY".into(), "hash".into(), "n".into(), "5".into()],
        vec![
            "HINCRBYFLOAT".into(),
            "hash".into(),
            "fl".into(),
            "0.5".into(),
        ],
        vec![
            "HDEL".into(),
            "hash".into(),
            format!("f{}", round.saturating_sub(2)),
        ],
        vec![
            "SADD".into(),
            "set".into(),
            format!("m{r}"),
            "shared".into(),
        ],
        vec![
            "SADD".into(),
            "{t}s1".into(),
            format!("m{r}"),
            "both".into(),
        ],
        vec![
            "SADD".into(),
            "{t}s2".into(),
            "both".into(),
            format!("o{r}"),
        ],
        vec![
            "SINTERSTORE".into(),
            "{t}inter".into(),
            "{t}s1".into(),
            "{t}s2".into(),
        ],
        vec![
            "SADD".into(),
            "popped".into(),
            "p1".into(),
            "p2".into(),
            "p3".into(),
        ],
        vec!["SPOP".into(), "popped".into()],
        vec![
            "ZADD".into(),
            "zset".into(),
            r.clone(),
            format!("z{r}"),
            "1.5".into(),
            "w".into(),
        ],
        vec!["ZINCRBY".into(), "zset".into(), "0.25".into(), "w".into()],
        vec!["ZADD".into(), "{t}z1".into(), "2".into(), format!("q{r}")],
        vec![
            "ZUNIONSTORE".into(),
            "{t}union".into(),
            "2".into(),
            "{t}z1".into(),
            "{t}s1".into(),
            "AGGREGATE".into(),
            "MAX".into(),
        ],
        vec!["ZPOPMIN".into(), "{t}z1".into()],
        vec!["EXPIRE".into(), "hash".into(), "10000".into()],
    ];
    for call in calls {
        let args: Vec<&str> = call.iter().map(String::as_str).collect();
        let reply = conn.call(&args);
        assert!(
            !matches!(reply, Reply::Error(_)),
            "{args:?}: {}",
            show(&reply)
        );
    }
}

fn aof_args(dir: &TempDir) -> Vec<&str> {
    vec!["--shards", "3", "--aof", dir.arg(), "--fsync", "always"]
}

#[test]
fn collections_survive_restart_rewrite_and_kill_9() {
    let dir = TempDir::new("collections");
    let mut server = Server::start(&aof_args(&dir));
    let mut conn = server.connect();
    for round in 0..20 {
        write_round(&mut conn, round);
    }
    let before = state(&mut conn);
    assert!(
        before.iter().any(|line| line.starts_with("{t}union +zset")),
        "{before:?}"
    );
    drop(conn);
    server.stop();

    // Replay of the log as written.
    let mut server = Server::start(&aof_args(&dir));
    let mut conn = server.connect();
    assert_eq!(state(&mut conn), before);

    // A rewrite turns every collection into the emitters' records; more writes follow it;
    // then the process dies without a clean stop.
    assert!(matches!(conn.call(&["BGREWRITEAOF"]), Reply::Simple(_)));
    let rewritten = eventually(Duration::from_secs(60), || {
        let Reply::Bulk(Some(info)) = conn.call(&["INFO", "persistence"]) else {
            return false;
        };
        let info = String::from_utf8_lossy(&info).into_owned();
        info.contains("aof_rewrite_in_progress:0") && !info.contains("aof_rewrites:0")
    });
    assert!(rewritten, "the rewrite did not finish");
    for round in 20..30 {
        write_round(&mut conn, round);
    }
    let after = state(&mut conn);
    drop(conn);
    server.kill9();

    let server = Server::start(&aof_args(&dir));
    let mut conn = server.connect();
    assert_eq!(state(&mut conn), after);
}

#[test]
fn dump_and_restore_carry_every_type() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    write_round(&mut conn, 1);
    // RESTORE with TTL 0 makes a key persistent: start from persistent keys.
    assert_eq!(conn.call(&["PERSIST", "hash"]), Reply::Int(1));
    for key in ["list", "hash", "set", "zset", "{t}union"] {
        let before = state(&mut conn);
        let Reply::Bulk(Some(payload)) = conn.call(&["DUMP", key]) else {
            panic!("DUMP {key}");
        };
        assert_eq!(conn.call(&["DEL", key]), Reply::Int(1));
        // The payload is binary: frame the request by hand.
        let mut request = format!(
            "*4\r\n$7\r\nRESTORE\r\n${}\r\n{key}\r\n$1\r\n0\r\n",
            key.len()
        )
        .into_bytes();
        request.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
        request.extend_from_slice(&payload);
        request.extend_from_slice(b"\r\n");
        conn.send(&request).unwrap();
        let restored = conn.read().unwrap();
        assert_eq!(restored, Reply::ok(), "{key}");
        assert_eq!(state(&mut conn), before, "{key}");
    }
}

#[test]
fn set_commands_work_over_keys_of_several_shards() {
    let server = Server::start(&["--shards", "4"]);
    let mut conn = server.connect();
    // Plain keys land on various shards: SINTER / SUNION / SDIFF / SINTERCARD and the STORE
    // forms hold them all.
    for i in 0..64 {
        let (a, b) = (format!("a{i}"), format!("b{i}"));
        assert_eq!(conn.call(&["SADD", &a, "x", "y", "only-a"]), Reply::Int(3));
        assert_eq!(conn.call(&["SADD", &b, "x", "y", "only-b"]), Reply::Int(3));
        let missing = format!("missing{i}");
        assert_eq!(sorted(&conn.call(&["SINTER", &a, &b, &missing])), "[]");
        assert_eq!(sorted(&conn.call(&["SINTER", &a, &b])), "[x,y]");
        assert_eq!(sorted(&conn.call(&["SDIFF", &a, &b])), "[only-a]");
        assert_eq!(
            sorted(&conn.call(&["SUNION", &a, &b])),
            "[only-a,only-b,x,y]"
        );
        assert_eq!(
            conn.call(&["SINTERCARD", "2", &a, &b, "LIMIT", "1"]),
            Reply::Int(1)
        );
        assert_eq!(conn.call(&["SINTERSTORE", &a, &a, &b]), Reply::Int(2));
        assert_eq!(sorted(&conn.call(&["SMEMBERS", &a])), "[x,y]");
    }
    assert!(matches!(
        conn.call(&["SINTERSTORE", "{u}a", "{u}b"]),
        Reply::Int(_)
    ));
    assert_eq!(
        conn.call(&["LPUSH", "k", "v"]),
        Reply::Int(1),
        "single-key commands are unaffected"
    );
    assert_eq!(
        show(&conn.call(&["GET", "k"])),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}
