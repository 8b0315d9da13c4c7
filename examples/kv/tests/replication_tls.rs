//! Replication over TLS, against redis-server 7.0 (Debian's build has TLS) both ways:
//! redis-server with `--tls-replication yes` replicating corewire-kv's TLS port (a diskless
//! full sync, then the stream), corewire-kv with `--tls-replication yes` replicating
//! redis-server's TLS port, SYNC on the TLS port (the length-prefixed RDB), and a master
//! that requires client certificates refusing a replica whose certificate its CA did not
//! sign, or that has none. Every server keeps a plaintext port for the test's own reads;
//! replication goes to the TLS port, which speaks nothing else. Certificates are made at
//! test time.

mod common;
mod rdb_util;
mod repl_util;
#[path = "../../../tests/tls_common/mod.rs"]
mod tls_common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, request, Reply, Server, TempDir};
use corewire::runtime::tls::rustls;
use rdb_util::{free_port, workload, Redis};
use repl_util::{assert_converges, info, info_field, ok, wait_link_up, write_stream};
use tls_common::{TestCa, Usage};

/// A CA and a node certificate it signs (for 127.0.0.1 and localhost, good as server and as
/// client), in files.
struct Certs {
    _dir: TempDir,
    ca: TestCa,
    ca_file: PathBuf,
    node: (PathBuf, PathBuf),
}

impl Certs {
    fn new(tag: &str) -> Certs {
        let dir = TempDir::new(tag);
        let ca = TestCa::new(&format!("{tag} CA"));
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        let node = ca
            .leaf(&["localhost", "127.0.0.1"], Usage::Both)
            .write(dir.path(), "node");
        Certs {
            _dir: dir,
            ca,
            ca_file,
            node,
        }
    }

    /// `tls-*` flags with this node certificate, trusting `trusted`'s CA.
    fn flags(&self, trusted: &Certs, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            s(&self.node.0).into(),
            "--tls-key-file".into(),
            s(&self.node.1).into(),
            "--tls-ca-cert-file".into(),
            s(&trusted.ca_file).into(),
        ]
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// corewire-kv with a plaintext port and a TLS port (client certificates required, as
/// Redis's default), then `extra`.
fn corewire(certs: &Certs, trusted: &Certs, shards: &str, extra: &[&str]) -> Server {
    let mut last = String::new();
    for _ in 0..5 {
        let mut args = vec![
            "--shards".to_string(),
            shards.into(),
            "--port".into(),
            free_port().to_string(),
        ];
        args.extend(certs.flags(trusted, free_port()));
        args.extend(extra.iter().map(|a| a.to_string()));
        match Server::try_start(&strs(&args)) {
            Ok(server) => return server,
            Err(e) => last = e,
        }
    }
    panic!("corewire-kv with TLS did not start: {last}");
}

/// redis-server with a TLS port (client certificates required) beside its plaintext one,
/// then `extra`; its TLS port.
fn redis(dir: &TempDir, certs: &Certs, trusted: &Certs, extra: &[&str]) -> (Redis, u16) {
    let tls_port = free_port();
    let mut args = certs.flags(trusted, tls_port);
    args.extend(extra.iter().map(|a| a.to_string()));
    (Redis::start(dir.path(), &strs(&args)), tls_port)
}

fn master_tls_port(master: &Server) -> String {
    master
        .tls_port
        .expect("the ready line names the TLS port")
        .to_string()
}

/// redis-server replicating corewire-kv's TLS port: a diskless full sync (redis-server
/// sends `capa eof`), the stream after it, WAIT counting its acknowledgements over TLS.
#[test]
fn redis_replica_of_corewire_over_tls() {
    let certs = Certs::new("repl-tls-m");
    let master = corewire(&certs, &certs, "2", &[]);
    let mut m = master.connect();
    workload(&mut m);
    let dir = TempDir::new("replica");
    let port = master_tls_port(&master);
    let (replica, replica_tls) = redis(
        &dir,
        &certs,
        &certs,
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    let mut r = replica.connect();
    wait_link_up(&mut r);
    assert_converges(&mut m, &mut r);
    for round in 0..3 {
        write_stream(&mut m, round);
    }
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
    // redis-server announces its TLS port when it replicates over TLS.
    let text = info(&mut m, "replication");
    let slave0 = format!("slave0:ip=127.0.0.1,port={replica_tls},state=online,");
    assert!(text.contains(&slave0), "{text}");
    assert_eq!(
        info_field(&mut m, "stats", "sync_full").as_deref(),
        Some("1")
    );
    // A cut link continues with a partial resynchronization over TLS.
    assert_eq!(
        m.call(&["CLIENT", "KILL", "TYPE", "replica"]),
        Reply::Int(1)
    );
    write_stream(&mut m, 10);
    let partial = eventually(Duration::from_secs(20), || {
        info_field(&mut m, "stats", "sync_partial_ok").as_deref() == Some("1")
    });
    assert!(partial, "{}", info(&mut m, "stats"));
    wait_link_up(&mut r);
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
}

/// corewire-kv replicating redis-server's TLS port, with its node certificate as the client
/// certificate the master requires.
fn corewire_replica_of_redis(shards: &str, redis_extra: &[&str]) {
    let certs = Certs::new("repl-tls-r");
    let dir = TempDir::new("master");
    let (redis, redis_tls) = redis(&dir, &certs, &certs, redis_extra);
    let mut m = redis.connect();
    workload(&mut m);
    let port = redis_tls.to_string();
    let replica = corewire(
        &certs,
        &certs,
        shards,
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    let mut r = replica.connect();
    wait_link_up(&mut r);
    assert_converges(&mut m, &mut r);
    for round in 0..3 {
        write_stream(&mut m, round);
    }
    assert_eq!(m.call(&["WAIT", "1", "10000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
    // We announce our TLS port, as redis-server does.
    let text = info(&mut m, "replication");
    let tls_port = replica.tls_port.unwrap();
    assert!(
        text.contains(&format!(
            "slave0:ip=127.0.0.1,port={tls_port},state=online,"
        )),
        "{text}"
    );
}

#[test]
fn corewire_replica_of_redis_over_tls_diskless() {
    corewire_replica_of_redis(
        "2",
        &[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
}

#[test]
fn corewire_replica_of_redis_over_tls_disk_snapshot() {
    corewire_replica_of_redis("1", &["--repl-diskless-sync", "no"]);
}

/// corewire-kv replicating corewire-kv over TLS.
#[test]
fn corewire_replica_of_corewire_over_tls() {
    let certs = Certs::new("repl-tls-c");
    let master = corewire(&certs, &certs, "2", &[]);
    let mut m = master.connect();
    workload(&mut m);
    let port = master_tls_port(&master);
    let replica = corewire(
        &certs,
        &certs,
        "3",
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    let mut r = replica.connect();
    wait_link_up(&mut r);
    assert_converges(&mut m, &mut r);
    write_stream(&mut m, 1);
    assert_eq!(m.call(&["WAIT", "1", "10000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
}

/// A blocking TLS client of `port` trusting `certs`' CA, with its node certificate as the
/// client certificate when `with_cert`.
fn tls_client(
    port: u16,
    certs: &Certs,
    with_cert: bool,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    let leaf = tls_common::Leaf {
        cert_pem: std::fs::read_to_string(&certs.node.0).unwrap(),
        key_pem: std::fs::read_to_string(&certs.node.1).unwrap(),
    };
    let config = tls_common::client_config(&certs.ca, with_cert.then_some(&leaf), &[]);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    rustls::StreamOwned::new(conn, tcp)
}

/// SYNC on the TLS port: the RDB as one length-prefixed bulk (buffered in a temporary file
/// first), then the stream.
#[test]
fn sync_on_the_tls_port() {
    let certs = Certs::new("repl-tls-sync");
    let master = corewire(&certs, &certs, "2", &[]);
    let mut m = master.connect();
    for i in 0..50 {
        ok(&mut m, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    let mut raw = tls_client(master.tls_port.unwrap(), &certs, true);
    raw.write_all(&request(&["SYNC"])).unwrap();
    raw.flush().unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    let (len, body_start) = loop {
        let n = raw.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the RDB");
        got.extend_from_slice(&chunk[..n]);
        // The master may ping first while it prepares the RDB.
        while got.starts_with(b"\n") {
            got.remove(0);
        }
        if let Some(end) = got.windows(2).position(|w| w == b"\r\n") {
            assert_eq!(got[0], b'$', "{:?}", String::from_utf8_lossy(&got));
            let len: usize = std::str::from_utf8(&got[1..end]).unwrap().parse().unwrap();
            break (len, end + 2);
        }
    };
    while got.len() < body_start + len {
        let n = raw.read(&mut chunk).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&chunk[..n]);
    }
    let rdb = &got[body_start..body_start + len];
    assert!(rdb.starts_with(b"REDIS0010"));
    assert_eq!(rdb[len - 9], 0xff, "the RDB ends with EOF and its checksum");
    let keys = (0..50).all(|i| {
        let key = format!("k{i}");
        rdb.windows(key.len()).any(|w| w == key.as_bytes())
    });
    assert!(keys, "every key is in the RDB");
    got.drain(..body_start + len);
    ok(&mut m, &["SET", "after", "sync"]);
    let wanted = b"$5\r\nafter\r\n$4\r\nsync\r\n";
    raw.sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let streamed = eventually(Duration::from_secs(10), || {
        if let Ok(n) = raw.read(&mut chunk) {
            got.extend_from_slice(&chunk[..n]);
        }
        got.windows(wanted.len()).any(|w| w == wanted)
    });
    assert!(streamed, "{:?}", String::from_utf8_lossy(&got));
}

/// A master requiring client certificates (`tls-auth-clients yes`, the default) refuses a
/// replica without one, and one whose certificate another CA signed; with the right one the
/// same replica links up.
#[test]
fn a_master_requiring_client_certificates_refuses_replicas_without_one() {
    let certs = Certs::new("repl-tls-auth");
    let rogue = Certs::new("repl-tls-rogue");
    let master = corewire(&certs, &certs, "1", &[]);
    let tls_port = master.tls_port.unwrap();
    let port = tls_port.to_string();

    // No certificate: the handshake fails, PSYNC never gets an answer.
    let mut bare = tls_client(tls_port, &certs, false);
    let refused = bare
        .write_all(&request(&["PSYNC", "?", "-1"]))
        .and_then(|()| bare.flush())
        .and_then(|()| bare.read(&mut [0u8; 64]));
    assert!(
        matches!(refused, Err(_) | Ok(0)),
        "a replica without a certificate was answered: {refused:?}"
    );

    // redis-server presenting a certificate of another CA (it trusts ours).
    let dir = TempDir::new("rogue-replica");
    let (rogue_replica, _) = redis(
        &dir,
        &rogue,
        &certs,
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    // corewire-kv the same way.
    let rogue_corewire = corewire(
        &rogue,
        &certs,
        "1",
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    std::thread::sleep(Duration::from_secs(3));
    let mut m = master.connect();
    assert_eq!(
        info_field(&mut m, "replication", "connected_slaves").as_deref(),
        Some("0"),
        "{}",
        info(&mut m, "replication")
    );
    for replica in [&mut rogue_replica.connect(), &mut rogue_corewire.connect()] {
        assert_eq!(
            info_field(replica, "replication", "master_link_status").as_deref(),
            Some("down")
        );
    }
    assert!(
        rogue_corewire
            .stderr()
            .contains("link with the MASTER is down"),
        "the refused link is logged:\n{}",
        rogue_corewire.stderr()
    );

    // A replica with a certificate the CA signed links up.
    let good = corewire(
        &certs,
        &certs,
        "1",
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    let mut g = good.connect();
    wait_link_up(&mut g);
    ok(&mut m, &["SET", "k", "v"]);
    assert_eq!(m.call(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_eq!(g.call(&["GET", "k"]), Reply::bulk("v"));
}
