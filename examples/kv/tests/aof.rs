//! Persistence with real processes and files: replay after a restart, a torn tail cut off
//! with a warning, and a `kill -9` in the middle of acknowledged `--fsync always` writes.

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
    assert!((990..=1000).contains(&ttl), "TTL after replay: {ttl}");
    assert_eq!(conn.call(&["TTL", "key:4"]), Reply::Int(-1));
    let stderr = server.stderr();
    assert!(stderr.contains("AOF replayed"), "{stderr}");
    assert!(!stderr.contains("corrupt"), "{stderr}");
}

#[test]
fn corrupt_tail_is_truncated_with_a_warning() {
    let dir = TempDir::new("corrupt");
    let args = aof_args(&dir, "everysec", "1");
    let mut server = Server::start(&args);
    let mut conn = server.connect();
    for i in 0..20 {
        assert_eq!(conn.call(&["SET", &format!("k{i}"), "v"]), Reply::ok());
    }
    drop(conn);
    server.stop();

    let log = dir.path().join("shard-0.aof");
    let good_len = std::fs::metadata(&log).unwrap().len();
    assert!(good_len > 0);
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
        stderr.contains("corrupt AOF tail") && stderr.contains("truncating"),
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
    assert!(!server.stderr().contains("corrupt"));
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
