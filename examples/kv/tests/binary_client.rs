//! The flatbuffers protocol over TCP: the `kv_client` library and the `kv-client` CLI against
//! a real server, sharing its keyspace with RESP clients.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::{Reply, Server, KV_CLIENT};
use corewire::runtime::{spawn_local, Runtime};
use corewire::ClientOptions;
use corewire_kv::kv_client::{KvClient, KvError};

fn binary_addr(server: &Server) -> SocketAddr {
    let port = server
        .binary_port
        .expect("server started with --binary-port");
    ([127, 0, 0, 1], port).into()
}

#[test]
fn set_get_mget_incr_over_tcp() {
    let server = Server::start(&["--shards", "3", "--binary-port", "0"]);
    let addr = binary_addr(&server);
    let rt = Runtime::builder().shards(1).build().unwrap();
    rt.run_on(0, move || async move {
        let kv = KvClient::connect_tcp(addr, ClientOptions::default())
            .await
            .unwrap();
        assert_eq!(kv.get(b"nothing").await.unwrap(), None);
        kv.set(b"k", b"v").await.unwrap();
        assert_eq!(kv.get(b"k").await.unwrap(), Some(Bytes::from("v")));
        let binary = [0u8, 1, 2, 255, b'\r', b'\n'];
        kv.set(&binary, &binary).await.unwrap();
        assert_eq!(kv.get(&binary).await.unwrap().as_deref(), Some(&binary[..]));

        // Keys across all three shards: MSET and MGET fan out and merge in order.
        let entries: Vec<(String, String)> = (0..30)
            .map(|i| (format!("m{i}"), format!("v{i}")))
            .collect();
        kv.mset(&entries).await.unwrap();
        let mut keys: Vec<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        keys.insert(7, "absent".into());
        let values = kv.mget(&keys).await.unwrap();
        assert_eq!(values.len(), 31);
        for (key, value) in keys.iter().zip(&values) {
            let expected = key.strip_prefix('m').map(|i| Bytes::from(format!("v{i}")));
            assert_eq!(value, &expected, "{key}");
        }

        assert_eq!(kv.incr(b"n").await.unwrap(), 1);
        assert_eq!(kv.incr_by(b"n", 41).await.unwrap(), 42);
        assert_eq!(kv.incr_by(b"n", -2).await.unwrap(), 40);
        assert_eq!(
            kv.incr(b"k").await,
            Err(KvError::Server(
                "ERR value is not an integer or out of range".into()
            ))
        );
        assert_eq!(kv.del(&["m1", "m2", "absent"]).await.unwrap(), 2);

        // Long enough that the GET right after surely comes first on a loaded machine (30 ms
        // did not); then the key goes once its time is up (waited for, bounded).
        kv.set_with_ttl(b"brief", b"x", Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(kv.get(b"brief").await.unwrap(), Some(Bytes::from("x")));
        let mut gone = false;
        for _ in 0..200 {
            corewire::sleep(Duration::from_millis(100)).await;
            if kv.get(b"brief").await.unwrap().is_none() {
                gone = true;
                break;
            }
        }
        assert!(gone, "a key with a 2 s TTL still there after 20 s");

        // Many calls in flight on one connection from several tasks.
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let kv = kv.clone();
                spawn_local(async move {
                    for i in 0..100 {
                        let key = format!("t{t}:{i}");
                        kv.set(key.as_bytes(), key.as_bytes()).await.unwrap();
                        assert_eq!(
                            kv.get(key.as_bytes()).await.unwrap(),
                            Some(Bytes::from(key))
                        );
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    })
    .unwrap();
    rt.shutdown();

    // The binary protocol and RESP share the keyspace.
    let mut resp = server.connect();
    assert_eq!(resp.call(&["GET", "n"]), Reply::bulk("40"));
    assert_eq!(resp.call(&["GET", "t7:99"]), Reply::bulk("t7:99"));
}

#[test]
fn kv_client_cli() {
    let server = Server::start(&["--shards", "2", "--binary-port", "0"]);
    let addr = binary_addr(&server).to_string();
    let run = |args: &[&str]| -> (bool, String) {
        let out = Command::new(KV_CLIENT)
            .args(["--addr", &addr])
            .args(args)
            .output()
            .expect("running kv-client");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
        )
    };
    assert_eq!(run(&["set", "k", "v"]), (true, "OK".into()));
    assert_eq!(run(&["get", "k"]), (true, "v".into()));
    assert_eq!(run(&["get", "nope"]), (true, "(nil)".into()));
    assert_eq!(run(&["incr", "n", "5"]), (true, "(integer) 5".into()));
    assert_eq!(run(&["mset", "a", "1", "b", "2"]), (true, "OK".into()));
    assert_eq!(
        run(&["mget", "a", "x", "b"]),
        (true, "1) 1\n2) (nil)\n3) 2".into())
    );
    assert_eq!(run(&["del", "a", "b", "x"]), (true, "(integer) 2".into()));
    assert_eq!(
        run(&["incr", "k"]),
        (
            false,
            "(error) ERR value is not an integer or out of range".into()
        )
    );

    let (ok, report) = run(&[
        "bench",
        "--conns",
        "2",
        "--depth",
        "4",
        "--size",
        "16",
        "--keys",
        "100",
        "--duration-ms",
        "300",
        "--ratio",
        "1:3",
    ]);
    assert!(ok, "bench failed:\n{report}");
    let qps: f64 = report
        .lines()
        .find_map(|l| l.strip_prefix("qps="))
        .and_then(|q| q.parse().ok())
        .unwrap_or_else(|| panic!("no qps in:\n{report}"));
    assert!(qps > 0.0, "{report}");
    assert!(report.contains("errors=0"), "{report}");
    assert!(report.contains("p50="), "{report}");
}

/// A binary-protocol client that pipelines GETs of a big value (on the other shard) and never
/// reads: the server holds at most `--max-backlog` unanswered requests and
/// `--max-pending-output` reply bytes for it, then stops reading from it.
#[test]
fn a_binary_client_that_never_reads_keeps_the_server_bounded() {
    use std::io::Write;

    use bytes::BytesMut;
    use corewire::transport::frame::{FrameEncoder, FrameHeader, FrameLimits};
    use corewire_kv::binary::{request, wire::Method, SERVICE_ID};

    const GETS: u64 = 1000;
    let server = Server::start(&[
        "--shards",
        "2",
        "--binary-port",
        "0",
        "--max-backlog",
        "16",
        "--max-pending-output",
        "1048576",
    ]);
    let value = "v".repeat(256 << 10);
    // "a" lives on shard 1, "b" on shard 0: whichever shard accepts, one of them is remote.
    for key in ["a", "b"] {
        assert_eq!(server.connect().call(&["SET", key, &value]), Reply::ok());
    }
    let base = server.rss_mib();
    let mut conns = Vec::new();
    for key in ["a", "b"] {
        let mut enc = FrameEncoder::new(FrameLimits::default());
        let mut pipe = BytesMut::new();
        let get = request::get(key.as_bytes());
        for id in 0..GETS {
            let header = FrameHeader::request(SERVICE_ID, Method::Get.0, id);
            enc.encode_frame(&header, &get, b"", &mut pipe).unwrap();
        }
        let mut s = std::net::TcpStream::connect(binary_addr(&server)).unwrap();
        // Small requests: the whole pipeline fits in the socket buffers.
        s.write_all(&pipe).unwrap();
        conns.push(s);
    }
    // Unbounded, this grows to 2 x 1000 x 256 KiB = 500 MiB of replies (slowly, in a debug
    // build): watch until it settles, failing as soon as it passes the bound.
    let mut last = base;
    let mut steady = 0;
    for _ in 0..120 {
        std::thread::sleep(Duration::from_millis(500));
        let now = server.rss_mib();
        let grown = now.saturating_sub(base);
        assert!(grown < 64, "server grew by {grown} MiB");
        steady = if now <= last + 1 { steady + 1 } else { 0 };
        if steady == 6 {
            break;
        }
        last = now;
    }
    assert_eq!(steady, 6, "server memory never settled");
    drop(conns);
}
