//! The binary protocol over RDMA: a corewire-kv process serving `--rdma` and the `kv_client`
//! library (and CLI) calling it over soft-RoCE. Like the project's other `rdma*` test targets,
//! `cargo xtask test` runs this inside the rxe VM; without a device it fails saying so.

mod common;

use std::net::SocketAddr;
use std::process::Command;

use bytes::Bytes;
use common::{Reply, Server, KV_CLIENT};
use corewire::runtime::Runtime;
use corewire::transport::rdma::{self, RdmaConfig};
use corewire::ClientOptions;
use corewire_kv::kv_client::{KvClient, KvError};

fn rdma_listen_addr() -> SocketAddr {
    let port = 23_000 + (std::process::id() % 1000) as u16 * 3;
    SocketAddr::new(corewire_verbs::testing::rdma_addr(), port)
}

#[test]
fn binary_protocol_over_rdma() {
    corewire_verbs::testing::require_device();
    let addr = rdma_listen_addr();
    let addr_arg = addr.to_string();
    let server = Server::start(&[
        "--shards",
        "2",
        "--rdma",
        &addr_arg,
        "--rdma-poller",
        "event",
    ]);

    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    rdma::install(&rt, RdmaConfig::default()).expect("RDMA transport on the client");
    rt.run_on(0, move || async move {
        // rdma_cm is slow to settle under emulation: retry the connect a bounded number of
        // times.
        let mut attempt = 0;
        let kv = loop {
            match KvClient::connect_rdma(addr, ClientOptions::default()).await {
                Ok(kv) => break kv,
                Err(error) if attempt < 50 => {
                    attempt += 1;
                    tracing::debug!(%error, attempt, "RDMA connect failed; retrying");
                    corewire::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(error) => panic!("RDMA connect to {addr}: {error}"),
            }
        };
        kv.set(b"k", b"over rdma").await.unwrap();
        assert_eq!(kv.get(b"k").await.unwrap(), Some(Bytes::from("over rdma")));
        let entries: Vec<(String, String)> =
            (0..20).map(|i| (format!("r{i}"), format!("{i}"))).collect();
        kv.mset(&entries).await.unwrap();
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        let values = kv.mget(&keys).await.unwrap();
        for ((_, value), got) in entries.iter().zip(values) {
            assert_eq!(got, Some(Bytes::from(value.clone())));
        }
        assert_eq!(kv.incr_by(b"n", 7).await.unwrap(), 7);
        assert_eq!(
            kv.incr(b"k").await,
            Err(KvError::Server(
                "ERR value is not an integer or out of range".into()
            ))
        );
        // A value larger than one RDMA buffer is split and reassembled.
        let big = vec![7u8; 100_000];
        kv.set(b"big", &big).await.unwrap();
        assert_eq!(kv.get(b"big").await.unwrap().as_deref(), Some(&big[..]));
    })
    .unwrap();
    rt.shutdown();

    // Same keyspace as RESP.
    assert_eq!(server.connect().call(&["GET", "n"]), Reply::bulk("7"));

    let out = Command::new(KV_CLIENT)
        .args(["--rdma", "--addr", &addr_arg, "get", "r3"])
        .output()
        .expect("running kv-client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), "3");
}

/// A peer process killed (SIGKILL) in the middle of an RDMA load: the kernel tears its queue
/// pairs down, the server ends those connections and keeps serving everyone else.
#[test]
fn rdma_server_survives_a_client_killed_mid_load() {
    corewire_verbs::testing::require_device();
    let addr = SocketAddr::new(addr_ip(), rdma_listen_addr().port() + 1);
    let addr_arg = addr.to_string();
    let server = Server::start(&["--shards", "1", "--rdma", &addr_arg]);
    let mut load = Command::new(KV_CLIENT)
        .args(["--rdma", "--addr", &addr_arg, "bench"])
        .args(["--conns", "2", "--depth", "8", "--duration-ms", "60000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting kv-client bench");
    // Long enough for rdma_cm to connect under emulation and the load to run.
    std::thread::sleep(std::time::Duration::from_secs(3));
    load.kill().expect("SIGKILL the client");
    let status = load.wait().unwrap();
    assert!(
        !status.success(),
        "the load ended by itself before the kill"
    );
    // A new RDMA client still gets answers, and the server process is still up (RESP too).
    let mut ok = false;
    for _ in 0..30 {
        let out = Command::new(KV_CLIENT)
            .args(["--rdma", "--addr", &addr_arg, "set", "after", "crash"])
            .output()
            .expect("running kv-client");
        if out.status.success() {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        ok,
        "no RDMA client could connect after the crash: {}",
        server.stderr()
    );
    assert_eq!(
        server.connect().call(&["GET", "after"]),
        Reply::bulk("crash")
    );
}

fn addr_ip() -> std::net::IpAddr {
    corewire_verbs::testing::rdma_addr()
}
