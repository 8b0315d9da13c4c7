//! Helpers for `tests/replication.rs`: INFO fields, waiting for a redis-server replica's
//! link, and comparing a master's and a replica's content.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use super::common::{eventually, Reply, Resp};
use super::rdb_util::{contents, KeyContent};

/// INFO `section`'s text.
pub fn info(conn: &mut Resp, section: &str) -> String {
    match conn.call(&["INFO", section]) {
        Reply::Bulk(Some(text)) => String::from_utf8(text).unwrap(),
        other => panic!("INFO {section}: {other:?}"),
    }
}

/// One `name:value` field of INFO `section`.
pub fn info_field(conn: &mut Resp, section: &str, name: &str) -> Option<String> {
    let text = info(conn, section);
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")).map(str::to_owned))
}

/// Waits until a redis-server replica reports its link to the master up.
pub fn wait_link_up(replica: &mut Resp) {
    let up = eventually(Duration::from_secs(30), || {
        info_field(replica, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert!(
        up,
        "the replica's link never came up:\n{}",
        info(replica, "replication")
    );
}

/// Content with TTLs compared to the minute (the two servers read them at different times).
pub fn same_content(master: &mut Resp, replica: &mut Resp) -> bool {
    content(master) == content(replica)
}

pub fn content(conn: &mut Resp) -> BTreeMap<Vec<u8>, KeyContent> {
    contents(conn)
}

/// Waits until both hold the same keys and values; panics showing the first difference.
pub fn assert_converges(master: &mut Resp, replica: &mut Resp) {
    // Keys written with a short TTL are gone on both sides by then (a listing never races
    // their expiry).
    std::thread::sleep(Duration::from_millis(150));
    let same = eventually(Duration::from_secs(20), || same_content(master, replica));
    if !same {
        let (m, r) = (content(master), content(replica));
        for (key, value) in &m {
            if r.get(key) != Some(value) {
                panic!(
                    "key {:?}: master {value:?}, replica {:?}",
                    String::from_utf8_lossy(key),
                    r.get(key)
                );
            }
        }
        for key in r.keys() {
            assert!(
                m.contains_key(key),
                "key {:?} only on the replica",
                String::from_utf8_lossy(key)
            );
        }
        panic!("contents differ");
    }
}

pub fn ok(conn: &mut Resp, args: &[&str]) {
    let reply = conn.call(args);
    assert!(!matches!(reply, Reply::Error(_)), "{args:?}: {reply:?}");
}

/// Writes after the sync: every type, TTLs, deletions, a transaction, a script, and a key
/// that expires on the master.
pub fn write_stream(conn: &mut Resp, round: usize) {
    let r = round.to_string();
    ok(conn, &["SET", &format!("w:s{r}"), "value"]);
    ok(conn, &["SET", &format!("w:ex{r}"), "v", "EX", "5000"]);
    ok(conn, &["INCRBY", &format!("w:n{r}"), "41"]);
    ok(conn, &["INCR", &format!("w:n{r}")]);
    ok(conn, &["APPEND", &format!("w:s{r}"), "-more"]);
    ok(conn, &["RPUSH", &format!("w:l{r}"), "a", "b", "c"]);
    ok(conn, &["LPOP", &format!("w:l{r}")]);
    ok(conn, &["HSET", &format!("w:h{r}"), "f", "1", "g", "2"]);
    ok(conn, &["HINCRBY", &format!("w:h{r}"), "f", "10"]);
    ok(conn, &["SADD", &format!("w:set{r}"), "x", "y", "z"]);
    ok(conn, &["SREM", &format!("w:set{r}"), "y"]);
    ok(conn, &["ZADD", &format!("w:z{r}"), "1", "a", "2", "b"]);
    ok(conn, &["ZINCRBY", &format!("w:z{r}"), "5", "a"]);
    // Mid-way between two 10-minute TTL buckets (see `rdb_util::ttl_bucket`).
    ok(conn, &["PEXPIRE", &format!("w:h{r}"), "9300000"]);
    ok(conn, &["SET", &format!("w:gone{r}"), "x"]);
    ok(conn, &["DEL", &format!("w:gone{r}")]);
    ok(
        conn,
        &["MSET", &format!("w:m1{r}"), "1", &format!("w:m2{r}"), "2"],
    );
    ok(conn, &["MULTI"]);
    ok(conn, &["SET", &format!("w:tx{r}"), "in-multi"]);
    ok(conn, &["LPUSH", &format!("w:txl{r}"), "q"]);
    assert_eq!(
        conn.call(&["EXEC"]),
        Reply::Array(Some(vec![Reply::ok(), Reply::Int(1)]))
    );
    ok(
        conn,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]) return 1",
            "1",
            &format!("w:lua{r}"),
            "from-lua",
        ],
    );
    // Expires on the master; its deletion is streamed.
    ok(conn, &["SET", &format!("w:short{r}"), "x", "PX", "50"]);
    // Overwrites of keys the RDB carried.
    ok(conn, &["SET", "s:text", &format!("rewritten {r}")]);
    ok(conn, &["RPUSH", "l:small", &r]);
    ok(conn, &["DEL", "z:inf"]);
}

/// A function library with a read-only function (`get1`, allowed on a replica) and a
/// writing one (`set1`).
pub const LIB1: &str = "#!lua name=lib1\n\
    redis.register_function{function_name='get1', flags={'no-writes'}, \
    callback=function(keys) return redis.call('GET', keys[1]) end}\n\
    redis.register_function('set1', function(keys, args) \
    return redis.call('SET', keys[1], args[1]) end)";
/// LIB1 replaced: `get1` renamed.
pub const LIB1_NEW: &str = "#!lua name=lib1\n\
    redis.register_function{function_name='get1b', flags={'no-writes'}, \
    callback=function(keys) return redis.call('GET', keys[1]) end}";
pub const LIB2: &str = "#!lua name=lib2\n\
    redis.register_function{function_name='ping2', flags={'no-writes'}, \
    callback=function() return 'pong2' end}";

/// The function libraries (FUNCTION LIST WITHCODE): name → (code, function names sorted),
/// independent of the order the server lists them in.
pub fn libraries(conn: &mut Resp) -> BTreeMap<String, (Vec<u8>, Vec<String>)> {
    let text = |r: &Reply| match r {
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        Reply::Simple(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    };
    let field = |pairs: &[Reply], name: &str| -> Reply {
        (pairs.chunks(2))
            .find(|kv| text(&kv[0]) == name)
            .map(|kv| kv[1].clone())
            .unwrap_or_else(|| panic!("no {name} in {pairs:?}"))
    };
    let Reply::Array(Some(list)) = conn.call(&["FUNCTION", "LIST", "WITHCODE"]) else {
        panic!("FUNCTION LIST");
    };
    let mut all = BTreeMap::new();
    for library in list {
        let Reply::Array(Some(pairs)) = library else {
            panic!("a library: {library:?}");
        };
        let Reply::Array(Some(functions)) = field(&pairs, "functions") else {
            panic!("functions");
        };
        let mut names: Vec<String> = (functions.iter())
            .map(|f| match f {
                Reply::Array(Some(f)) => text(&field(f, "name")),
                other => panic!("a function: {other:?}"),
            })
            .collect();
        names.sort();
        let Reply::Bulk(Some(code)) = field(&pairs, "library_code") else {
            panic!("library_code");
        };
        all.insert(text(&field(&pairs, "library_name")), (code, names));
    }
    all
}

/// Waits until the replica has the master's function libraries (`count` of them).
pub fn assert_same_libraries(master: &mut Resp, replica: &mut Resp, count: usize) {
    let want = libraries(master);
    assert_eq!(want.len(), count, "{want:?}");
    let same = eventually(Duration::from_secs(20), || libraries(replica) == want);
    assert!(same, "master {want:?}\nreplica {:?}", libraries(replica));
}

/// Changes the master's libraries by every FUNCTION command (LOAD, LOAD REPLACE, DELETE,
/// FLUSH, RESTORE), checking the replica follows each (`wait` makes sure the master sent it).
pub fn function_commands(master: &mut Resp, replica: &mut Resp, mut wait: impl FnMut(&mut Resp)) {
    let step = |master: &mut Resp, replica: &mut Resp, wait: &mut dyn FnMut(&mut Resp), n| {
        wait(master);
        assert_same_libraries(master, replica, n);
    };
    assert_eq!(
        master.call(&["FUNCTION", "LOAD", LIB2]),
        Reply::bulk("lib2")
    );
    step(master, replica, &mut wait, 2);
    assert_eq!(
        master.call(&["FUNCTION", "LOAD", "REPLACE", LIB1_NEW]),
        Reply::bulk("lib1")
    );
    step(master, replica, &mut wait, 2);
    ok(master, &["FUNCTION", "DELETE", "lib1"]);
    step(master, replica, &mut wait, 1);
    let Reply::Bulk(Some(dump)) = master.call(&["FUNCTION", "DUMP"]) else {
        panic!("FUNCTION DUMP");
    };
    ok(master, &["FUNCTION", "FLUSH"]);
    step(master, replica, &mut wait, 0);
    // The payload is binary: the request is framed here.
    let mut restore = b"*3\r\n$8\r\nFUNCTION\r\n$7\r\nRESTORE\r\n".to_vec();
    restore.extend_from_slice(format!("${}\r\n", dump.len()).as_bytes());
    restore.extend_from_slice(&dump);
    restore.extend_from_slice(b"\r\n");
    master.send(&restore).unwrap();
    assert_eq!(master.read().unwrap(), Reply::ok());
    step(master, replica, &mut wait, 1);
    assert_eq!(
        replica.call(&["FCALL_RO", "ping2", "0"]),
        Reply::bulk("pong2")
    );
}
