//! AOF rewrite with real processes and files: BGREWRITEAOF compacts every shard's log and
//! loses nothing, writes made while a (slowed) rewrite runs are kept, growth starts a rewrite
//! by itself, INFO reports it as Redis does, and `kill -9` at each step of a rewrite (the
//! server's test hooks stop the rewrite there while the shard keeps serving) loses no
//! acknowledged write.
//!
//! Values are built with APPEND, so a write replayed twice (once inside the rewrite's image,
//! once from the log after it) would show as a wrong value, not just pass unnoticed.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::{eventually, Reply, Resp, Server, TempDir};

const PAUSE: &str = "COREWIRE_KV_TEST_REWRITE_PAUSE";
const STEP_KEYS: &str = "COREWIRE_KV_TEST_REWRITE_STEP_KEYS";
const STEP_DELAY: &str = "COREWIRE_KV_TEST_REWRITE_STEP_DELAY_MS";
const RESUME_FILE: &str = "COREWIRE_KV_TEST_REWRITE_RESUME_FILE";
const STARTED: &str = "Background append only file rewriting started";
const WAIT: Duration = Duration::from_secs(60);

fn args<'a>(dir: &'a TempDir, shards: &'a str, fsync: &'a str) -> Vec<&'a str> {
    vec!["--shards", shards, "--aof", dir.arg(), "--fsync", fsync]
}

/// A field of INFO's persistence section.
fn info(conn: &mut Resp, field: &str) -> String {
    let Reply::Bulk(Some(text)) = conn.call(&["INFO", "persistence"]) else {
        panic!("INFO is a bulk string");
    };
    let text = String::from_utf8(text).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .trim()
        .to_owned()
}

fn info_u64(conn: &mut Resp, field: &str) -> u64 {
    info(conn, field).parse().unwrap()
}

/// Waits until no shard is rewriting and `rewrites` rewrites were completed in all.
fn wait_for_rewrites(conn: &mut Resp, rewrites: u64) {
    let done = eventually(WAIT, || {
        info(conn, "aof_rewrite_in_progress") == "0" && info_u64(conn, "aof_rewrites") >= rewrites
    });
    assert!(
        done,
        "rewrites did not finish: {}",
        info(conn, "aof_rewrites")
    );
    assert_eq!(info(conn, "aof_last_bgrewrite_status"), "ok");
}

/// What the keyspace must hold, kept by the test as it writes.
#[derive(Default)]
struct Model(BTreeMap<String, String>);

impl Model {
    fn append(&mut self, conn: &mut Resp, key: &str, piece: &str) {
        let value = self.0.entry(key.to_owned()).or_default();
        value.push_str(piece);
        assert_eq!(
            conn.call(&["APPEND", key, piece]),
            Reply::Int(value.len() as i64),
            "APPEND {key}"
        );
    }

    fn set(&mut self, conn: &mut Resp, key: &str, value: &str) {
        assert_eq!(conn.call(&["SET", key, value]), Reply::ok());
        self.0.insert(key.to_owned(), value.to_owned());
    }

    fn del(&mut self, conn: &mut Resp, key: &str) {
        let existed = self.0.remove(key).is_some();
        assert_eq!(conn.call(&["DEL", key]), Reply::Int(existed.into()));
    }

    fn incr(&mut self, conn: &mut Resp, key: &str) {
        let next = self.0.get(key).map_or(0, |v| v.parse::<i64>().unwrap()) + 1;
        assert_eq!(conn.call(&["INCR", key]), Reply::Int(next));
        self.0.insert(key.to_owned(), next.to_string());
    }

    /// Every key has exactly its value, and there are no others.
    fn check(&self, conn: &mut Resp) {
        let keys: Vec<&String> = self.0.keys().collect();
        for chunk in keys.chunks(200) {
            let mut mget = vec!["MGET"];
            mget.extend(chunk.iter().map(|k| k.as_str()));
            let Reply::Array(Some(values)) = conn.call(&mget) else {
                panic!("MGET returns an array");
            };
            for (key, value) in chunk.iter().zip(values) {
                assert_eq!(value, Reply::bulk(&self.0[*key]), "{key}");
            }
        }
        assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(self.0.len() as i64));
    }
}

/// Keys written before a rewrite: appended in two pieces, some with a TTL.
fn fill(conn: &mut Resp, model: &mut Model, keys: usize) {
    for i in 0..keys {
        let key = format!("k{i}");
        model.append(conn, &key, "a");
        model.append(conn, &key, &format!("-{i}"));
        if i % 10 == 0 {
            assert_eq!(conn.call(&["EXPIRE", &key, "100000"]), Reply::Int(1));
        }
    }
    for i in 0..20 {
        model.incr(conn, "counter");
        model.set(conn, &format!("overwritten{}", i % 3), &format!("v{i}"));
    }
}

/// Writes of every kind that touch keys a rewrite's walk may not have reached yet.
fn more_writes(conn: &mut Resp, model: &mut Model, keys: usize, round: usize) {
    for i in (round % 3..keys).step_by(3) {
        let key = format!("k{i}");
        if i % 13 == 0 {
            model.del(conn, &key);
        } else {
            model.append(conn, &key, &format!("+{round}"));
        }
    }
    model.set(conn, &format!("new{round}"), "n");
    model.incr(conn, "counter");
}

/// The shard log files in `dir`.
fn log_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("shard-"))
        .collect();
    names.sort();
    names
}

#[test]
fn bgrewriteaof_compacts_every_shard_and_loses_nothing() {
    let dir = TempDir::new("compact");
    let args = args(&dir, "2", "everysec");
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    let mut model = Model::default();
    fill(&mut conn, &mut model, 200);
    for round in 0..5 {
        more_writes(&mut conn, &mut model, 200, round);
    }
    let before = info_u64(&mut conn, "aof_current_size");
    assert_eq!(info(&mut conn, "aof_rewrite_in_progress"), "0");
    assert_eq!(info(&mut conn, "aof_rewrites"), "0");

    assert_eq!(conn.call(&["BGREWRITEAOF"]), Reply::Simple(STARTED.into()));
    wait_for_rewrites(&mut conn, 2);
    let after = info_u64(&mut conn, "aof_current_size");
    assert!(
        after < before,
        "the log grew from {before} to {after} bytes"
    );
    assert_eq!(info_u64(&mut conn, "aof_base_size"), after);
    assert_ne!(info(&mut conn, "aof_last_rewrite_time_sec"), "-1");
    assert_eq!(
        log_files(dir.path()),
        [
            "shard-0.1.base.aof",
            "shard-0.1.incr.aof",
            "shard-0.manifest",
            "shard-1.1.base.aof",
            "shard-1.1.incr.aof",
            "shard-1.manifest"
        ]
    );
    model.check(&mut conn);

    // Writes after the rewrite go to the new incremental files; all of it replays.
    more_writes(&mut conn, &mut model, 200, 7);
    drop(conn);
    server.stop();
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    model.check(&mut conn);
    let Reply::Int(ttl) = conn.call(&["TTL", "k10"]) else {
        panic!("TTL is an integer");
    };
    assert!(ttl > 99_000, "TTL after the rewrite: {ttl}");

    // A second rewrite replaces the first one's files.
    assert_eq!(conn.call(&["BGREWRITEAOF"]), Reply::Simple(STARTED.into()));
    wait_for_rewrites(&mut conn, 2);
    assert!(log_files(dir.path()).contains(&"shard-1.2.base.aof".to_owned()));
    assert!(!log_files(dir.path()).contains(&"shard-1.1.base.aof".to_owned()));
    drop(conn);
    server.stop();
    let server = Server::start(&args);
    model.check(&mut server.connect());
}

/// Writes of every kind land while the rewrite's walk is half done (it is held after its
/// first piece until the test has written), on keys it has passed and keys it has not
/// reached; then it goes on, slowed down, while more writes arrive.
#[test]
fn writes_made_during_a_rewrite_are_kept() {
    let dir = TempDir::new("during");
    let args = args(&dir, "2", "always");
    let resume = dir.path().join("resume");
    let env = [
        (PAUSE, "walking"),
        (RESUME_FILE, resume.to_str().unwrap()),
        (STEP_KEYS, "8"),
        (STEP_DELAY, "5"),
    ];
    let mut server = Server::start_with_env(&args, &env);
    let mut conn = server.connect();
    let mut model = Model::default();
    fill(&mut conn, &mut model, 300);

    assert_eq!(conn.call(&["BGREWRITEAOF"]), Reply::Simple(STARTED.into()));
    assert!(
        eventually(WAIT, || server
            .stderr()
            .matches("AOF rewrite paused at walking")
            .count()
            == 2),
        "the rewrites did not reach their walk:\n{}",
        server.stderr()
    );
    for round in 0..3 {
        more_writes(&mut conn, &mut model, 300, round);
    }
    std::fs::write(&resume, b"").unwrap();
    let mut round = 3;
    while info(&mut conn, "aof_rewrite_in_progress") == "1" {
        more_writes(&mut conn, &mut model, 300, round);
        round += 1;
        assert!(round < 10_000, "the rewrite never ends");
    }
    wait_for_rewrites(&mut conn, 2);
    model.check(&mut conn);
    drop(conn);
    server.kill9();

    let server = Server::start(&args);
    model.check(&mut server.connect());
}

#[test]
fn growth_starts_a_rewrite_by_itself() {
    let dir = TempDir::new("auto");
    let mut args = args(&dir, "1", "everysec");
    args.extend([
        "--aof-rewrite-percentage",
        "100",
        "--aof-rewrite-min-size",
        "16kb",
    ]);
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    let mut model = Model::default();
    let value = "x".repeat(100);
    // ~40 KiB of log for 8 keys.
    for i in 0..300 {
        model.set(&mut conn, &format!("key{}", i % 8), &format!("{value}{i}"));
    }
    // Writes that went on during a rewrite may start another; it settles below the minimum.
    assert!(
        eventually(WAIT, || info_u64(&mut conn, "aof_rewrites") >= 1
            && info(&mut conn, "aof_rewrite_in_progress") == "0"
            && info_u64(&mut conn, "aof_current_size") < 16 << 10),
        "no automatic rewrite brought the log below 16 KiB: {} bytes, {} rewrites",
        info(&mut conn, "aof_current_size"),
        info(&mut conn, "aof_rewrites")
    );
    assert_eq!(info(&mut conn, "aof_last_bgrewrite_status"), "ok");
    model.check(&mut conn);
    assert!(server.stderr().contains("--aof-rewrite-percentage"));
    drop(conn);
    server.stop();
    let server = Server::start(&args);
    model.check(&mut server.connect());
}

#[test]
fn bgrewriteaof_needs_the_log() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    let Reply::Error(error) = conn.call(&["BGREWRITEAOF"]) else {
        panic!("BGREWRITEAOF without --aof succeeded");
    };
    assert!(error.contains("--aof"), "{error}");
    assert_eq!(info(&mut conn, "aof_enabled"), "0");
}

/// `kill -9` while a rewrite is stopped at each of its steps, with acknowledged
/// `--fsync always` writes made while it was stopped: after a restart every write is there,
/// exactly once, and the files the interrupted rewrite left are gone.
#[test]
fn kill_9_at_each_step_of_a_rewrite_loses_no_acknowledged_write() {
    for step in ["created", "manifest", "walking", "synced", "switched"] {
        let dir = TempDir::new(step);
        let args = args(&dir, "2", "always");
        let env = [(PAUSE, step), (STEP_KEYS, "16")];
        let mut server = Server::start_with_env(&args, &env);
        let mut conn = server.connect();
        let mut model = Model::default();
        fill(&mut conn, &mut model, 150);

        assert_eq!(conn.call(&["BGREWRITEAOF"]), Reply::Simple(STARTED.into()));
        let paused = format!("AOF rewrite paused at {step}");
        assert!(
            eventually(WAIT, || server.stderr().matches(&paused).count() == 2),
            "{step}: both shards should pause there:\n{}",
            server.stderr()
        );
        // The rewrite is stuck, the shards are not.
        assert_eq!(info(&mut conn, "aof_rewrite_in_progress"), "1", "{step}");
        let Reply::Error(error) = conn.call(&["BGREWRITEAOF"]) else {
            panic!("{step}: a second BGREWRITEAOF started");
        };
        assert_eq!(
            error,
            "ERR Background append only file rewriting already in progress"
        );
        for round in 0..4 {
            more_writes(&mut conn, &mut model, 150, round);
        }
        model.check(&mut conn);
        drop(conn);
        server.kill9();

        let mut server = Server::start(&args);
        let mut conn = server.connect();
        model.check(&mut conn);
        // Only the files a manifest names are left (no manifest: the single log).
        for shard in 0..2 {
            let named: Vec<String> =
                match std::fs::read_to_string(dir.path().join(format!("shard-{shard}.manifest"))) {
                    Ok(text) => text
                        .lines()
                        .filter_map(|l| l.strip_prefix("base ").or(l.strip_prefix("incr ")))
                        .map(str::to_owned)
                        .collect(),
                    Err(_) => vec![format!("shard-{shard}.aof")],
                };
            let files: Vec<String> = log_files(dir.path())
                .into_iter()
                .filter(|f| f.starts_with(&format!("shard-{shard}.")) && f.ends_with(".aof"))
                .collect();
            let mut named_sorted = named.clone();
            named_sorted.sort();
            assert_eq!(files, named_sorted, "{step}: shard {shard}");
        }

        // And the log carries on: more writes, a full rewrite, another restart.
        more_writes(&mut conn, &mut model, 150, 9);
        assert_eq!(conn.call(&["BGREWRITEAOF"]), Reply::Simple(STARTED.into()));
        wait_for_rewrites(&mut conn, 2);
        drop(conn);
        server.kill9();
        let server = Server::start(&args);
        model.check(&mut server.connect());
    }
}
