//! Persistence with real processes and files: replay after a restart, a torn tail cut off
//! with a warning, corruption before the end refused (and cut only with `--aof-fix`, which
//! keeps the cut bytes), writes too large to log refused before they run, and a `kill -9` in
//! the middle of acknowledged `--fsync always` writes.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{request, Reply, Resp, Server, TempDir};

fn aof_args<'a>(dir: &'a TempDir, fsync: &'a str, shards: &'a str) -> Vec<&'a str> {
    vec!["--shards", shards, "--aof", dir.arg(), "--fsync", fsync]
}

#[test]
fn replay_after_restart() {
    let dir = TempDir::new("replay");
    let args = aof_args(&dir, "everysec", "2");
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    for i in 0..100 {
        let (key, value) = (format!("key:{i}"), format!("value:{i}"));
        assert_eq!(conn.call(&["SET", &key, &value]), Reply::ok());
    }
    assert_eq!(
        conn.call(&["MSET", "m1", "a", "m2", "b", "m3", "c"]),
        Reply::ok()
    );
    assert_eq!(conn.call(&["INCRBY", "counter", "40"]), Reply::Int(40));
    assert_eq!(conn.call(&["INCR", "counter"]), Reply::Int(41));
    assert_eq!(conn.call(&["APPEND", "m1", "bc"]), Reply::Int(3));
    assert_eq!(conn.call(&["EXPIRE", "key:1", "1000"]), Reply::Int(1));
    assert_eq!(conn.call(&["SET", "gone", "x", "PX", "20"]), Reply::ok());
    assert_eq!(conn.call(&["DEL", "key:2", "key:3", "m3"]), Reply::Int(3));
    drop(conn);
    // Let `gone` expire before the restart; replay must not resurrect it.
    std::thread::sleep(Duration::from_millis(50));
    server.stop();

    let server = Server::start(&args);
    let mut conn = server.connect();
    // 100 keys - 2 deleted + m1 + m2 + counter (+ gone, expired)
    assert_eq!(conn.call(&["GET", "gone"]), Reply::nil());
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(101));
    assert_eq!(conn.call(&["GET", "key:99"]), Reply::bulk("value:99"));
    assert_eq!(conn.call(&["GET", "key:2"]), Reply::nil());
    assert_eq!(conn.call(&["GET", "m1"]), Reply::bulk("abc"));
    assert_eq!(conn.call(&["GET", "m3"]), Reply::nil());
    assert_eq!(conn.call(&["GET", "counter"]), Reply::bulk("41"));
    let Reply::Int(ttl) = conn.call(&["TTL", "key:1"]) else {
        panic!("TTL is an integer");
    };
    // The deadline survives the restart (not dropped, not reset); the slack is for a slow
    // restart on a loaded machine.
    assert!((900..=1000).contains(&ttl), "TTL after replay: {ttl}");
    assert_eq!(conn.call(&["TTL", "key:4"]), Reply::Int(-1));
    let stderr = server.stderr();
    assert!(stderr.contains("AOF replayed"), "{stderr}");
    assert!(!stderr.contains("corrupt"), "{stderr}");
}

/// Writes `count` SETs through a one-shard server and stops it; returns the log's path and
/// the offset where each record starts (plus the end).
fn log_of_sets(dir: &TempDir, count: usize) -> (std::path::PathBuf, Vec<u64>) {
    let mut server = Server::start(&aof_args(dir, "everysec", "1"));
    let mut conn = server.connect();
    for i in 0..count {
        assert_eq!(conn.call(&["SET", &format!("k{i}"), "v"]), Reply::ok());
    }
    drop(conn);
    server.stop();
    let log = dir.path().join("shard-0.aof");
    let data = std::fs::read(&log).unwrap();
    let mut boundaries = vec![0u64];
    let mut at = 0usize;
    while at < data.len() {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        at += 8 + len;
        boundaries.push(at as u64);
    }
    assert_eq!(at, data.len());
    assert_eq!(boundaries.len(), count + 1);
    (log, boundaries)
}

fn start_error(args: &[&str]) -> String {
    match Server::try_start(args) {
        Ok(_) => panic!("the server started with {args:?}"),
        Err(error) => error,
    }
}

#[test]
fn torn_tail_is_cut_with_a_warning() {
    let dir = TempDir::new("torn");
    let args = aof_args(&dir, "everysec", "1");
    let (log, boundaries) = log_of_sets(&dir, 20);
    let good_len = *boundaries.last().unwrap();
    // A torn write: a header promising 50 bytes followed by only a few of them.
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(&50u32.to_le_bytes()).unwrap();
    file.write_all(&[0xde, 0xad, 0xbe, 0xef, b'*', b'3'])
        .unwrap();
    drop(file);

    let mut server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(20));
    let stderr = server.stderr();
    assert!(
        stderr.contains(&format!("torn last record at offset {good_len}"))
            && stderr.contains("cutting the incomplete write"),
        "no warning in:\n{stderr}"
    );
    assert_eq!(std::fs::metadata(&log).unwrap().len(), good_len);

    // Writes after the repair append cleanly and replay again.
    assert_eq!(conn.call(&["SET", "after", "repair"]), Reply::ok());
    drop(conn);
    server.stop();
    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["GET", "after"]), Reply::bulk("repair"));
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(21));
    assert!(!server.stderr().contains("torn"));
}

/// Redis's `aof-load-truncated no`: even a torn tail stops start-up, and nothing is cut.
#[test]
fn aof_load_truncated_no_refuses_a_torn_tail() {
    let dir = TempDir::new("strict");
    let (log, boundaries) = log_of_sets(&dir, 5);
    let torn_at = boundaries[4] + 10;
    let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    file.set_len(torn_at).unwrap();
    drop(file);
    let before = std::fs::read(&log).unwrap();

    let mut strict = aof_args(&dir, "everysec", "1");
    strict.extend(["--aof-load-truncated", "no"]);
    let error = start_error(&strict);
    assert!(
        error.contains(&format!("torn last record at offset {}", boundaries[4]))
            && error.contains("--aof-load-truncated yes"),
        "{error}"
    );
    assert_eq!(std::fs::read(&log).unwrap(), before, "the log was changed");

    let server = Server::start(&aof_args(&dir, "everysec", "1"));
    assert_eq!(server.connect().call(&["DBSIZE"]), Reply::Int(4));
    assert_eq!(std::fs::metadata(&log).unwrap().len(), boundaries[4]);
}

/// A bad record with whole records after it: the server refuses to start, names the file,
/// the offset and the flag, and leaves every byte where it was.
#[test]
fn corruption_before_the_end_refuses_to_start_and_deletes_nothing() {
    let dir = TempDir::new("midfile");
    let args = aof_args(&dir, "everysec", "1");
    let (log, boundaries) = log_of_sets(&dir, 20);
    let mut data = std::fs::read(&log).unwrap();
    let bad = boundaries[7];
    data[bad as usize + 12] ^= 0x20;
    std::fs::write(&log, &data).unwrap();

    for _ in 0..2 {
        let error = start_error(&args);
        assert!(
            error.contains(&log.display().to_string())
                && error.contains(&format!("corrupt record at offset {bad}"))
                && error.contains("checksum mismatch")
                && error.contains("--aof-fix"),
            "{error}"
        );
        assert_eq!(std::fs::read(&log).unwrap(), data, "the log was changed");
    }
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        !entries.iter().any(|name| name.contains(".cut-")),
        "{entries:?}"
    );
}

/// `--aof-fix` cuts at the bad record, after saving everything it cuts next to the log.
#[test]
fn aof_fix_cuts_at_the_bad_record_and_keeps_the_cut_bytes() {
    let dir = TempDir::new("fix");
    let (log, boundaries) = log_of_sets(&dir, 20);
    let mut data = std::fs::read(&log).unwrap();
    let bad = boundaries[7] as usize;
    data[bad + 12] ^= 0x20;
    std::fs::write(&log, &data).unwrap();

    let mut fix = aof_args(&dir, "everysec", "1");
    fix.push("--aof-fix");
    let mut server = Server::start(&fix);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(7));
    assert_eq!(conn.call(&["GET", "k6"]), Reply::bulk("v"));
    assert_eq!(conn.call(&["GET", "k7"]), Reply::nil());
    let saved = dir.path().join(format!("shard-0.aof.cut-{bad}"));
    assert_eq!(std::fs::read(&saved).unwrap(), &data[bad..]);
    assert_eq!(std::fs::read(&log).unwrap(), &data[..bad]);
    assert!(server.stderr().contains("--aof-fix"), "{}", server.stderr());

    // The cut log is whole again: it starts without the flag, with what was written since.
    assert_eq!(conn.call(&["SET", "after", "fix"]), Reply::ok());
    drop(conn);
    server.stop();
    let server = Server::start(&aof_args(&dir, "everysec", "1"));
    let mut conn = server.connect();
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(8));
    assert_eq!(conn.call(&["GET", "after"]), Reply::bulk("fix"));
}

/// Replay is bound by the record format only: a value the server accepted under a raised
/// `--proto-max-bulk-len` still loads after a restart with a lower one (as in Redis).
#[test]
fn replay_does_not_apply_the_protocol_limits() {
    let dir = TempDir::new("bulklimit");
    let raised = aof_args(&dir, "always", "1");
    let mut server = Server::start(&raised);
    let mut conn = server.connect();
    let big = "b".repeat(1_500_000);
    assert_eq!(conn.call(&["SET", "big", &big]), Reply::ok());
    assert_eq!(conn.call(&["SET", "after", "1"]), Reply::ok());
    drop(conn);
    server.kill9();

    // Redis's lowest limit (1mb), below the logged value.
    let mut lowered = aof_args(&dir, "always", "1");
    lowered.extend(["--proto-max-bulk-len", "1048576"]);
    let server = Server::start(&lowered);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["STRLEN", "big"]), Reply::Int(1_500_000));
    assert_eq!(conn.call(&["GET", "after"]), Reply::bulk("1"));
    assert!(!server.stderr().contains("record at offset"));
}

/// A write whose record could exceed the record limit (lowered here so the test is cheap)
/// is answered with an error and not applied anywhere, also when it spans shards; smaller
/// writes go on as usual and the log stays in step with memory.
#[test]
fn a_write_too_large_to_log_is_refused_before_it_runs() {
    let dir = TempDir::new("toolarge");
    let mut args = aof_args(&dir, "always", "2");
    args.extend(["--aof-max-record-bytes", "2048"]);
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    let chunk = "x".repeat(900);
    // {a} and {b} hash to different shards of two.
    let mset = ["MSET", "{a}1", &chunk, "{b}1", &chunk, "{a}2", "small"];
    let Reply::Error(error) = conn.call(&mset) else {
        panic!("an MSET over the record limit was accepted");
    };
    assert!(error.contains("record limit"), "{error}");
    for key in ["{a}1", "{b}1", "{a}2"] {
        assert_eq!(conn.call(&["GET", key]), Reply::nil(), "{key} was applied");
    }
    let Reply::Error(_) = conn.call(&["SET", "big", &"y".repeat(2100)]) else {
        panic!("a SET over the record limit was accepted");
    };
    assert_eq!(conn.call(&["EXISTS", "big"]), Reply::Int(0));
    // Below the limit everything works, and the server keeps taking writes.
    assert_eq!(
        conn.call(&["MSET", "{a}1", &chunk, "{b}1", "v"]),
        Reply::ok()
    );
    assert_eq!(conn.call(&["APPEND", "{b}1", "w"]), Reply::Int(2));
    drop(conn);
    server.kill9();

    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(2));
    assert_eq!(conn.call(&["GET", "{a}1"]), Reply::bulk(&chunk));
    assert_eq!(conn.call(&["GET", "{b}1"]), Reply::bulk("vw"));
}

/// With `always`, a reply leaves only once its record is in the file (and synced): after every
/// acknowledged SET the logs on disk already hold it.
#[test]
fn always_acknowledges_only_logged_writes() {
    let dir = TempDir::new("always");
    let server = Server::start(&aof_args(&dir, "always", "2"));
    let mut conn = server.connect();
    let logged = || -> usize {
        (0..2)
            .map(|shard| {
                let data = std::fs::read(dir.path().join(format!("shard-{shard}.aof"))).unwrap();
                let replay = corewire_kv::aof::replay(bytes::Bytes::from(data));
                assert!(replay.corrupt_tail.is_none(), "{:?}", replay.corrupt_tail);
                replay.commands.len()
            })
            .sum()
    };
    for i in 0..200 {
        assert_eq!(conn.call(&["SET", &format!("k{i}"), "v"]), Reply::ok());
        assert_eq!(logged(), i + 1, "SET {i} acknowledged before it was logged");
    }
    // Reads are not logged.
    assert_eq!(conn.call(&["GET", "k0"]), Reply::bulk("v"));
    assert_eq!(logged(), 200);
}

#[test]
fn a_different_shard_count_is_refused() {
    let dir = TempDir::new("reshard");
    let mut server = Server::start(&aof_args(&dir, "no", "2"));
    assert_eq!(server.connect().call(&["SET", "k", "v"]), Reply::ok());
    server.stop();
    let error = match Server::try_start(&aof_args(&dir, "no", "3")) {
        Ok(_) => panic!("started with 3 shards over a 2-shard AOF"),
        Err(error) => error,
    };
    assert!(error.contains("--shards 2"), "{error}");
}

/// Writers pipeline SETs and record every one the server acknowledged; the server is killed
/// with SIGKILL mid-load. After a restart every acknowledged write must be there.
#[test]
fn kill_9_loses_no_acknowledged_write_with_fsync_always() {
    let dir = TempDir::new("crash");
    let args = aof_args(&dir, "always", "2");
    let mut server = Server::start(&args);
    let port = server.port;
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let total = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (acked, total, stop) = (acked.clone(), total.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut conn = Resp::connect(port);
                let mut mine = Vec::new();
                let mut next = 0usize;
                // Bounded: the main thread kills the server long before this many writes.
                while !stop.load(Ordering::Relaxed) && next < 2_000_000 {
                    let batch: Vec<String> =
                        (next..next + 16).map(|i| format!("w{w}:{i}")).collect();
                    next += 16;
                    let mut wire = Vec::new();
                    for key in &batch {
                        wire.extend_from_slice(&request(&["SET", key, key]));
                    }
                    if conn.send(&wire).is_err() {
                        break;
                    }
                    let mut broken = false;
                    for key in batch {
                        match conn.read() {
                            Ok(Reply::Simple(ok)) if ok == "OK" => {
                                mine.push(key);
                                total.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(other) => panic!("SET {key} answered {other:?}"),
                            Err(_) => {
                                broken = true;
                                break;
                            }
                        }
                    }
                    if broken {
                        break;
                    }
                }
                acked.lock().unwrap().extend(mine);
            })
        })
        .collect();

    let deadline = Instant::now() + Duration::from_secs(60);
    while total.load(Ordering::Relaxed) < 3000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(
        acked.len() >= 3000,
        "only {} writes acknowledged",
        acked.len()
    );

    let server = Server::start(&args);
    let mut conn = server.connect();
    let mut missing = Vec::new();
    for chunk in acked.chunks(200) {
        let mut mget = vec!["MGET"];
        mget.extend(chunk.iter().map(String::as_str));
        let Reply::Array(Some(values)) = conn.call(&mget) else {
            panic!("MGET returns an array");
        };
        for (key, value) in chunk.iter().zip(values) {
            if value != Reply::bulk(key) {
                missing.push(key.clone());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost, e.g. {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
}

/// A shard logs its part of a MULTI/EXEC as one block (MULTI, the writes, EXEC): a log torn
/// inside the block replays none of the transaction, a whole one all of it.
#[test]
fn a_transaction_torn_in_the_log_replays_all_or_nothing() {
    let dir = TempDir::new("txn-block");
    let args = aof_args(&dir, "always", "1");
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["SET", "x", "0"]), Reply::ok());
    assert_eq!(conn.call(&["MULTI"]), Reply::ok());
    for cmd in [&["SET", "a", "1"][..], &["SET", "b", "2"], &["INCR", "x"]] {
        assert_eq!(conn.call(cmd), Reply::Simple("QUEUED".into()));
    }
    assert_eq!(
        conn.call(&["EXEC"]),
        Reply::Array(Some(vec![Reply::ok(), Reply::ok(), Reply::Int(1)]))
    );
    drop(conn);
    server.stop();

    let path = dir.path().join("shard-0.aof");
    let log = std::fs::read(&path).unwrap();
    let multi = b"*1\r\n$5\r\nMULTI\r\n";
    let at = log
        .windows(multi.len())
        .position(|w| w == multi)
        .expect("the transaction is logged as a MULTI block")
        - 8;
    assert!(log.ends_with(b"*1\r\n$4\r\nEXEC\r\n"));

    // Whole: every write of the transaction is back.
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["MGET", "a", "b", "x"]),
        Reply::Array(Some(vec![
            Reply::bulk("1"),
            Reply::bulk("2"),
            Reply::bulk("1")
        ]))
    );
    drop(conn);
    server.stop();

    // Torn inside the block (10 bytes into the record after the MULTI's 24): none of it is.
    std::fs::write(&path, &log[..at + 24 + 10]).unwrap();
    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["MGET", "a", "b", "x"]),
        Reply::Array(Some(vec![Reply::nil(), Reply::nil(), Reply::bulk("0")]))
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        at as u64,
        "the cut goes back to the block's MULTI"
    );
}

/// A script's writes between two waits are one block of the log (as Redis wraps a script's
/// effects in MULTI/EXEC): a log torn inside it replays none of the script's writes.
#[test]
fn a_script_that_does_not_wait_is_one_block_in_the_log() {
    let dir = TempDir::new("script-block");
    // `always` holds each write's reply until it is durable, which makes the script wait
    // after each write: `everysec` lets it run through.
    let args = aof_args(&dir, "everysec", "1");
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["SET", "x", "0"]), Reply::ok());
    let script = "redis.call('SET', KEYS[1], '1') redis.call('GET', KEYS[1]) \
                  redis.call('SET', KEYS[2], '2') return redis.call('INCR', KEYS[3])";
    assert_eq!(
        conn.call(&["EVAL", script, "3", "a", "b", "x"]),
        Reply::Int(1)
    );
    drop(conn);
    server.stop();

    let path = dir.path().join("shard-0.aof");
    let log = std::fs::read(&path).unwrap();
    let multi = b"*1\r\n$5\r\nMULTI\r\n";
    let blocks: Vec<usize> = (log.windows(multi.len()))
        .enumerate()
        .filter(|(_, w)| w == multi)
        .map(|(at, _)| at)
        .collect();
    assert_eq!(blocks.len(), 1, "the script's three writes are one block");
    let at = blocks[0] - 8;
    assert!(log.ends_with(b"*1\r\n$4\r\nEXEC\r\n"));

    // Torn inside the block (10 bytes into the record after the MULTI's 24): none of it is.
    std::fs::write(&path, &log[..at + 24 + 10]).unwrap();
    let server = Server::start(&args);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["MGET", "a", "b", "x"]),
        Reply::Array(Some(vec![Reply::nil(), Reply::nil(), Reply::bulk("0")]))
    );
}
