//! RDB snapshots against redis-server 7.0 itself: files redis-server writes (a workload over
//! every type, small and large) are read by our decoder and loaded by corewire-kv; files
//! corewire-kv writes pass `redis-check-rdb` and load into redis-server with the same keys,
//! values, types and TTLs. Fixtures are made here, at test time, by running redis-server.

mod common;
mod rdb_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use common::{require_tool, TempDir};
use corewire_kv::rdb::{
    self, crc64, encode, Decoder, Item, Limits, ObjectRef, RdbValue, RdbWriter,
};
use rdb_util::{contents, workload, KeyContent, Redis};

/// redis-server's own dump.rdb after the workload, and the content it had.
fn redis_fixture(dir: &Path) -> (Vec<u8>, BTreeMap<Vec<u8>, KeyContent>) {
    let redis = Redis::start(dir, &["--dbfilename", "redis.rdb"]);
    let mut conn = redis.connect();
    workload(&mut conn);
    let content = contents(&mut conn);
    assert_eq!(conn.call(&["SAVE"]), common::Reply::ok());
    let bytes = std::fs::read(dir.join("redis.rdb")).unwrap();
    (bytes, content)
}

fn decode_all(bytes: &[u8]) -> Vec<(Bytes, RdbValue, Option<u64>)> {
    let mut d = Decoder::new(bytes).unwrap();
    let mut keys = Vec::new();
    loop {
        match d.next_item().unwrap_or_else(|e| panic!("decoding: {e}")) {
            Item::Key {
                key,
                value,
                expire_at_ms,
            } => keys.push((key, value, expire_at_ms)),
            Item::End => return keys,
            _ => {}
        }
    }
}

/// A score compared as a number: redis prints `%.17g`.
fn normalise_scores(content: &mut KeyContent) {
    if content.kind == "zset" {
        for (i, item) in content.value.iter_mut().enumerate() {
            if i % 2 == 1 {
                let text = String::from_utf8(item.clone()).unwrap();
                *item = rdb::format_score(parse_score(&text)).into_bytes();
            }
        }
    }
}

fn parse_score(text: &str) -> f64 {
    match text {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse().unwrap(),
    }
}

/// The content a decoded value has, as [`contents`] would list it (TTL to within a minute).
fn content_of(value: &RdbValue, expire_at_ms: Option<u64>, now_ms: u64) -> KeyContent {
    let (kind, value) = match value {
        RdbValue::Commands(_) => panic!("redis-server wrote corewire's own value kind"),
        RdbValue::Stream(_) => panic!("the workload writes no stream (see rdb_streams.rs)"),
        RdbValue::String(s) => ("string", vec![s.to_vec()]),
        RdbValue::List(items) => ("list", items.iter().map(|b| b.to_vec()).collect()),
        RdbValue::Set(items) => {
            let mut m: Vec<Vec<u8>> = items.iter().map(|b| b.to_vec()).collect();
            m.sort();
            ("set", m)
        }
        RdbValue::Hash(pairs) => {
            let mut m: Vec<Vec<u8>> = pairs
                .iter()
                .map(|(f, v)| [&f[..], b"=", &v[..]].concat())
                .collect();
            m.sort();
            ("hash", m)
        }
        RdbValue::ZSet(pairs) => {
            let mut sorted = pairs.clone();
            sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let flat = sorted
                .iter()
                .flat_map(|(m, s)| [m.to_vec(), rdb::format_score(*s).into_bytes()])
                .collect();
            ("zset", flat)
        }
    };
    let ttl_minutes = expire_at_ms.map(|at| rdb_util::ttl_bucket(at as i64 - now_ms as i64));
    KeyContent {
        kind: kind.into(),
        value,
        ttl_minutes,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn normalised(mut map: BTreeMap<Vec<u8>, KeyContent>) -> BTreeMap<Vec<u8>, KeyContent> {
    map.values_mut().for_each(normalise_scores);
    map
}

fn check_rdb(path: &Path) {
    require_tool("redis-check-rdb");
    let out = Command::new("redis-check-rdb").arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RDB looks OK!"),
        "redis-check-rdb {}: {text}{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Our decoder reads every encoding redis-server 7.0 writes (intsets, listpacks, quicklists,
/// plain sets and hashes, ZSET_2, LZF and int-encoded strings, expiries); our encoder's
/// file of the same keys passes redis-check-rdb and loads into redis-server unchanged.
#[test]
fn codec_reads_redis_files_and_redis_reads_ours() {
    let dir = TempDir::new("rdb-codec");
    let (bytes, expected) = redis_fixture(dir.path());
    let keys = decode_all(&bytes);
    let now = now_ms();
    let decoded: BTreeMap<Vec<u8>, KeyContent> = keys
        .iter()
        .map(|(k, v, at)| (k.to_vec(), content_of(v, *at, now)))
        .collect();
    let expected = normalised(expected);
    assert_eq!(decoded, expected);

    // Re-encode with our writer.
    let limits = Limits::default();
    let mut file = Vec::new();
    RdbWriter::header(&mut file, now / 1000, 1 << 20);
    RdbWriter::select_db(&mut file, 0, keys.len() as u64, 0);
    for (key, value, at) in &keys {
        let owned;
        let object = match value {
            RdbValue::Commands(_) => panic!("redis-server wrote corewire's own value kind"),
            RdbValue::Stream(s) => ObjectRef::Stream(s.clone()),
            RdbValue::String(s) => ObjectRef::String(s),
            RdbValue::List(v) => ObjectRef::List(v.iter().map(|e| &e[..]).collect()),
            RdbValue::Set(v) => ObjectRef::Set(v.iter().map(|e| &e[..]).collect()),
            RdbValue::Hash(v) => ObjectRef::Hash(v.iter().map(|(f, x)| (&f[..], &x[..])).collect()),
            RdbValue::ZSet(v) => {
                owned = {
                    let mut s = v.clone();
                    s.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                    s
                };
                ObjectRef::ZSet(owned.iter().map(|(m, s)| (&m[..], *s)).collect())
            }
        };
        encode::write_key(&mut file, key, &object, *at, &limits);
    }
    let crc = crc64::crc64(&file);
    RdbWriter::finish(&mut file, crc);
    let ours = dir.path().join("ours.rdb");
    std::fs::write(&ours, &file).unwrap();
    check_rdb(&ours);
    let redis = Redis::start(dir.path(), &["--dbfilename", "ours.rdb"]);
    let loaded = normalised(contents(&mut redis.connect()));
    assert_eq!(loaded, expected);
}

// ---------------------------------------------------------------------------------------
// corewire-kv's SAVE/BGSAVE, start-up load, save points, DUMP/RESTORE.

use common::{eventually, Reply, Resp, Server};
use std::time::Duration;

fn kv(dir: &TempDir, shards: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--shards", shards, "--dir", dir.arg(), "--save", ""];
    args.extend_from_slice(extra);
    Server::start(&args)
}

fn info_field(conn: &mut Resp, field: &str) -> String {
    let Reply::Bulk(Some(text)) = conn.call(&["INFO", "persistence"]) else {
        panic!("INFO");
    };
    let text = String::from_utf8(text).unwrap();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .to_owned()
}

fn wait_bgsave_done(conn: &mut Resp) {
    assert!(
        eventually(Duration::from_secs(60), || info_field(
            conn,
            "rdb_bgsave_in_progress"
        ) == "0"),
        "BGSAVE did not finish"
    );
}

/// (a) Our SAVE passes redis-check-rdb, and redis-server started on it has the same keys,
/// values, types and TTLs, for every type in its small and large encodings; on 1 and 4
/// shards.
#[test]
fn our_save_loads_into_redis_server() {
    for shards in ["1", "4"] {
        let dir = TempDir::new("rdb-ours");
        let server = kv(&dir, shards, &["--dbfilename", "kv.rdb"]);
        let mut conn = server.connect();
        workload(&mut conn);
        let ours = normalised(contents(&mut conn));
        assert_eq!(conn.call(&["SAVE"]), Reply::ok());
        let path = dir.path().join("kv.rdb");
        check_rdb(&path);
        let redis = Redis::start(dir.path(), &["--dbfilename", "kv.rdb"]);
        let theirs = normalised(contents(&mut redis.connect()));
        assert_eq!(theirs, ours, "{shards} shards");
        assert!(ours.len() > 20);
    }
}

/// (b) redis-server's own dump (the workload over every type) loads into corewire-kv with
/// the same content, on 1 and 4 shards; INFO counts the keys loaded.
#[test]
fn redis_dump_loads_into_corewire_kv() {
    let dir = TempDir::new("rdb-theirs");
    let (bytes, expected) = redis_fixture(dir.path());
    std::fs::write(dir.path().join("dump.rdb"), &bytes).unwrap();
    let expected = normalised(expected);
    for shards in ["1", "4"] {
        let server = kv(&dir, shards, &[]);
        let mut conn = server.connect();
        assert_eq!(normalised(contents(&mut conn)), expected, "{shards} shards");
        assert_eq!(
            info_field(&mut conn, "rdb_last_load_keys_loaded"),
            expected.len().to_string()
        );
    }
}

/// (c) A torn or corrupt dump refuses start-up with the file and the byte offset, and is
/// left as it was.
#[test]
fn damaged_dump_refuses_to_start() {
    let dir = TempDir::new("rdb-damaged");
    let (bytes, _) = redis_fixture(dir.path());
    let path = dir.path().join("dump.rdb");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "torn",
            bytes[..bytes.len() / 2].to_vec(),
            "unexpected end of file",
        ),
        (
            "corrupt",
            {
                let mut b = bytes.clone();
                let at = b.len() / 2;
                b[at] ^= 0x5a;
                b
            },
            "",
        ),
        ("no checksum", bytes[..bytes.len() - 8].to_vec(), "checksum"),
    ];
    for (name, damaged, why) in cases {
        std::fs::write(&path, &damaged).unwrap();
        let args = ["--dir", dir.arg(), "--save", ""];
        let Err(error) = Server::try_start(&args) else {
            panic!("{name}: started on a damaged dump");
        };
        assert!(error.contains(path.to_str().unwrap()), "{name}: {error}");
        assert!(error.contains("at byte offset "), "{name}: {error}");
        assert!(error.contains(why), "{name}: {error}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            damaged,
            "{name}: the file changed"
        );
    }
}

/// (d) BGSAVE is point-in-time while writes keep coming: every key written before BGSAVE
/// was sent is in the file as it was, nothing written after its reply is; on 1 and 4
/// shards. The walk is slowed down (a test hook) so the writes overlap it.
#[test]
fn bgsave_is_point_in_time_under_writes() {
    for shards in ["1", "4"] {
        let dir = TempDir::new("rdb-pit");
        let args = ["--shards", shards, "--dir", dir.arg(), "--save", ""];
        // About 200 rounds of 10 ms whatever the shard count: the writes below take less.
        let step_keys = if shards == "1" { "20" } else { "5" };
        let env = [
            ("COREWIRE_KV_TEST_RDB_STEP_DELAY_MS", "10"),
            ("COREWIRE_KV_TEST_RDB_STEP_KEYS", step_keys),
        ];
        let server = Server::start_with_env(&args, &env);
        let mut conn = server.connect();
        let n = 4000;
        let mut pipeline = Vec::new();
        for i in 0..n {
            pipeline.extend(common::request(&["SET", &format!("k:{i}"), "before"]));
        }
        pipeline.extend(common::request(&["RPUSH", "list", "a", "b"]));
        pipeline.extend(common::request(&["HSET", "hash", "f", "before"]));
        conn.send(&pipeline).unwrap();
        for _ in 0..n + 2 {
            assert!(!matches!(conn.read().unwrap(), Reply::Error(_)));
        }
        assert_eq!(
            conn.call(&["BGSAVE"]),
            Reply::Simple("Background saving started".into())
        );
        assert_eq!(
            conn.call(&["BGSAVE"]),
            Reply::Error("ERR Background save already in progress".into())
        );
        // Overwrite, delete and add while the walk runs.
        let mut writes = 0;
        for i in (0..n).step_by(3) {
            let key = format!("k:{i}");
            let reply = match i % 9 {
                0 => conn.call(&["DEL", &key]),
                3 => conn.call(&["APPEND", &key, "-after"]),
                _ => conn.call(&["SET", &key, "after"]),
            };
            assert!(!matches!(reply, Reply::Error(_)), "{reply:?}");
            conn.call(&["SET", &format!("new:{i}"), "after"]);
            writes += 1;
        }
        conn.call(&["RPUSH", "list", "after"]);
        conn.call(&["HSET", "hash", "f", "after"]);
        assert_eq!(
            info_field(&mut conn, "rdb_bgsave_in_progress"),
            "1",
            "the writes did not overlap the save ({shards} shards); slow the walk down more"
        );
        // A flush during the save: the image keeps what it removes.
        assert_eq!(conn.call(&["FLUSHALL"]), Reply::ok());
        wait_bgsave_done(&mut conn);
        assert_eq!(info_field(&mut conn, "rdb_last_bgsave_status"), "ok");
        assert!(writes > 0);

        let bytes = std::fs::read(dir.path().join("dump.rdb")).unwrap();
        let keys = decode_all(&bytes);
        assert_eq!(keys.len(), n + 2, "{shards} shards");
        for (key, value, _) in keys {
            let key = String::from_utf8(key.to_vec()).unwrap();
            match (key.as_str(), value) {
                ("list", RdbValue::List(items)) => assert_eq!(items, vec!["a", "b"]),
                ("hash", RdbValue::Hash(pairs)) => {
                    assert_eq!(pairs, vec![(Bytes::from("f"), Bytes::from("before"))])
                }
                (k, RdbValue::String(v)) if k.starts_with("k:") => {
                    assert_eq!(v, "before", "{k} ({shards} shards)")
                }
                (k, v) => panic!("unexpected key {k} = {v:?}"),
            }
        }
    }
}

/// (e) Save points: `--save "1 5"` saves once 5 writes are older than a second; `CONFIG SET
/// save ""` stops that; CONFIG GET shows the points.
#[test]
fn save_points_trigger() {
    let dir = TempDir::new("rdb-points");
    // The point is crossed by the last write: the save it starts has all 10 keys (with a lower
    // count it could start between two writes, and the rest would wait for the next one).
    let server = Server::start(&["--shards", "2", "--dir", dir.arg(), "--save", "1 10"]);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["CONFIG", "GET", "save"]),
        Reply::Array(Some(vec![Reply::bulk("save"), Reply::bulk("1 10")]))
    );
    for i in 0..3 {
        conn.call(&["SET", &format!("k{i}"), "v"]);
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        info_field(&mut conn, "rdb_saves"),
        "0",
        "3 writes are below the point"
    );
    assert_eq!(info_field(&mut conn, "rdb_changes_since_last_save"), "3");
    for i in 3..10 {
        conn.call(&["SET", &format!("k{i}"), "v"]);
    }
    assert!(eventually(Duration::from_secs(10), || info_field(
        &mut conn,
        "rdb_saves"
    ) == "1"));
    assert_eq!(info_field(&mut conn, "rdb_changes_since_last_save"), "0");
    let keys = decode_all(&std::fs::read(dir.path().join("dump.rdb")).unwrap());
    assert_eq!(keys.len(), 10);
    let Reply::Int(lastsave) = conn.call(&["LASTSAVE"]) else {
        panic!("LASTSAVE");
    };
    assert!((lastsave as u64).abs_diff(now_ms() / 1000) < 30);

    assert_eq!(conn.call(&["CONFIG", "SET", "save", ""]), Reply::ok());
    for i in 0..10 {
        conn.call(&["SET", &format!("x{i}"), "v"]);
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        info_field(&mut conn, "rdb_saves"),
        "1",
        "save \"\" disables the points"
    );
    assert_eq!(info_field(&mut conn, "rdb_changes_since_last_save"), "10");
}

/// SHUTDOWN saves when save points are set (and not with NOSAVE); the next start loads the
/// dump; FLUSHALL with save points resets the changes and saves the empty dataset.
#[test]
fn shutdown_and_flushall_follow_redis() {
    let dir = TempDir::new("rdb-shutdown");
    let args = ["--shards", "2", "--dir", dir.arg(), "--save", "3600 1"];
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    conn.call(&["SET", "kept", "1"]);
    conn.call(&["SET", "ttl", "1", "EX", "1000"]);
    // The connection closes once the server stops (after it saved).
    conn.send(&common::request(&["SHUTDOWN"])).unwrap();
    assert!(!matches!(conn.read(), Ok(Reply::Error(_))));
    server.stop();
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["GET", "kept"]), Reply::bulk("1"));
    let Reply::Int(ttl) = conn.call(&["TTL", "ttl"]) else {
        panic!("TTL");
    };
    assert!((900..=1000).contains(&ttl), "{ttl}");
    conn.call(&["SET", "lost", "1"]);
    conn.send(&common::request(&["SHUTDOWN", "NOSAVE"]))
        .unwrap();
    assert!(!matches!(conn.read(), Ok(Reply::Error(_))));
    server.stop();
    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["GET", "lost"]), Reply::nil());

    assert_eq!(conn.call(&["FLUSHALL"]), Reply::ok());
    assert_eq!(info_field(&mut conn, "rdb_changes_since_last_save"), "0");
    assert!(eventually(Duration::from_secs(10), || {
        std::fs::read(dir.path().join("dump.rdb")).is_ok_and(|b| decode_all(&b).is_empty())
    }));
}

/// Redis 7: with appendonly yes the AOF is the dataset and the dump is not read.
#[test]
fn the_aof_wins_over_the_dump() {
    let dir = TempDir::new("rdb-aof");
    let server = kv(&dir, "1", &[]);
    let mut conn = server.connect();
    conn.call(&["SET", "from-dump", "1"]);
    assert_eq!(conn.call(&["SAVE"]), Reply::ok());
    drop(server);
    let server = kv(&dir, "1", &["--appendonly", "yes"]);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["GET", "from-dump"]), Reply::nil());
    drop(server);
    let server = kv(&dir, "1", &[]);
    assert_eq!(
        server.connect().call(&["GET", "from-dump"]),
        Reply::bulk("1")
    );
}

/// DUMP payloads move both ways between redis-server and corewire-kv (every type, small
/// and large encodings).
#[test]
fn dump_restore_interoperates_with_redis() {
    let dir = TempDir::new("rdb-dump");
    let redis = Redis::start(dir.path(), &[]);
    let mut theirs = redis.connect();
    workload(&mut theirs);
    let server = kv(&dir, "2", &[]);
    let mut ours = server.connect();
    let Reply::Array(Some(keys)) = theirs.call(&["KEYS", "*"]) else {
        panic!("KEYS");
    };
    for key in keys {
        let Reply::Bulk(Some(key)) = key else {
            panic!()
        };
        let key = String::from_utf8(key).unwrap();
        let Reply::Bulk(Some(payload)) = theirs.call(&["DUMP", &key]) else {
            panic!("DUMP {key}");
        };
        let Reply::Int(pttl) = theirs.call(&["PTTL", &key]) else {
            panic!()
        };
        let ttl = pttl.max(0).to_string();
        assert_eq!(
            call_bytes(
                &mut ours,
                &[b"RESTORE", key.as_bytes(), ttl.as_bytes(), &payload]
            ),
            Reply::ok(),
            "{key}"
        );
        // And back: our payload restored into redis-server under another name.
        let Reply::Bulk(Some(back)) = ours.call(&["DUMP", &key]) else {
            panic!("our DUMP {key}");
        };
        let copy = format!("copy:{key}");
        assert_eq!(
            call_bytes(
                &mut theirs,
                &[b"RESTORE", copy.as_bytes(), ttl.as_bytes(), &back]
            ),
            Reply::ok(),
            "{key}"
        );
    }
    let mut from_redis = normalised(contents(&mut theirs));
    let copies: BTreeMap<Vec<u8>, KeyContent> = from_redis
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(b"copy:").map(|k| (k.to_vec(), v.clone())))
        .collect();
    from_redis.retain(|k, _| !k.starts_with(b"copy:"));
    assert_eq!(normalised(contents(&mut ours)), from_redis);
    assert_eq!(copies, from_redis);
}

/// A request with binary arguments (DUMP payloads are not UTF-8).
fn call_bytes(conn: &mut Resp, args: &[&[u8]]) -> Reply {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    conn.send(&out).unwrap();
    conn.read().unwrap()
}

/// Function libraries travel in the dump (FUNCTION2 records) both ways: ours load into
/// redis-server and back into corewire-kv.
#[test]
fn function_libraries_are_saved_and_loaded() {
    let dir = TempDir::new("rdb-functions");
    let code =
        "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 42 end)";
    let server = kv(&dir, "2", &[]);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["FUNCTION", "LOAD", code]), Reply::bulk("mylib"));
    conn.call(&["SET", "k", "v"]);
    assert_eq!(conn.call(&["SAVE"]), Reply::ok());
    drop(server);
    check_rdb(&dir.path().join("dump.rdb"));
    let redis = Redis::start(dir.path(), &[]);
    assert_eq!(
        redis.connect().call(&["FCALL", "myfunc", "0"]),
        Reply::Int(42)
    );
    let server = kv(&dir, "2", &[]);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["FCALL", "myfunc", "0"]), Reply::Int(42));
    assert_eq!(conn.call(&["GET", "k"]), Reply::bulk("v"));
}

/// The AOF rewrite and a save take turns on a shard's snapshot: BGSAVE during a rewrite is
/// refused, BGSAVE SCHEDULE runs once the rewrite is over.
#[test]
fn bgsave_schedule_waits_for_the_aof_rewrite() {
    let dir = TempDir::new("rdb-schedule");
    let resume = dir.path().join("resume");
    let aof = dir.path().join("aof");
    let args = [
        "--shards",
        "2",
        "--dir",
        dir.arg(),
        "--save",
        "",
        "--aof",
        aof.to_str().unwrap(),
    ];
    let env = [
        ("COREWIRE_KV_TEST_REWRITE_PAUSE", "walking"),
        (
            "COREWIRE_KV_TEST_REWRITE_RESUME_FILE",
            resume.to_str().unwrap(),
        ),
        ("COREWIRE_KV_TEST_REWRITE_STEP_KEYS", "1"),
    ];
    let server = Server::start_with_env(&args, &env);
    let mut conn = server.connect();
    for i in 0..50 {
        conn.call(&["SET", &format!("k{i}"), "v"]);
    }
    assert!(matches!(conn.call(&["BGREWRITEAOF"]), Reply::Simple(_)));
    assert!(eventually(Duration::from_secs(10), || server
        .stderr()
        .contains("AOF rewrite paused at walking")));
    assert_eq!(
        conn.call(&["BGSAVE"]),
        Reply::Error(
            "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE \
             SCHEDULE in order to schedule a BGSAVE whenever possible."
                .into()
        )
    );
    assert_eq!(
        conn.call(&["BGSAVE", "SCHEDULE"]),
        Reply::Simple("Background saving scheduled".into())
    );
    assert_eq!(info_field(&mut conn, "rdb_saves"), "0");
    std::fs::write(&resume, b"").unwrap();
    assert!(eventually(Duration::from_secs(20), || info_field(
        &mut conn,
        "rdb_saves"
    ) == "1"));
    let keys = decode_all(&std::fs::read(dir.path().join("dump.rdb")).unwrap());
    assert_eq!(keys.len(), 50);
}
