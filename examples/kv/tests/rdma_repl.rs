//! corewire-kv replicating corewire-kv over RDMA (`repl-transport rdma` on the replica,
//! `--repl-rdma` on the master), over soft-RoCE: the full sync of keys of every type, the
//! write stream, WAIT, the link cut and continued by a partial resync, a replica that stops
//! reading dropped at its output limit, and a replica aimed
//! at an address with no RDMA endpoint, which fails (counted, with its reason) and never
//! falls back to TCP. Like the project's other `rdma*` test targets, `cargo xtask test` runs
//! this inside the rxe VM; without a device it fails saying so.

mod common;
mod rdb_util;
mod repl_util;

use std::net::SocketAddr;
use std::time::Duration;

use common::{eventually, Reply, Resp, Server};
use rdb_util::workload;
use repl_util::{assert_converges, info, info_field, write_stream};

/// Emulated RDMA (TCG) is slow to connect and to move a snapshot.
const WAIT: Duration = Duration::from_secs(90);

fn repl_endpoint() -> SocketAddr {
    let port = 24_000 + (std::process::id() % 1000) as u16 * 3;
    SocketAddr::new(corewire_verbs::testing::rdma_addr(), port)
}

fn replication(conn: &mut Resp, field: &str) -> String {
    info_field(conn, "replication", field)
        .unwrap_or_else(|| panic!("no {field} in:\n{}", info(conn, "replication")))
}

fn stat(conn: &mut Resp, field: &str) -> i64 {
    info_field(conn, "stats", field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO stats"))
}

fn wait_link_up(replica: &mut Resp, server: &Server) {
    let up = eventually(WAIT, || {
        info_field(replica, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert!(
        up,
        "the link never came up:\n{}\nreplica's log:\n{}",
        info(replica, "replication"),
        server.stderr()
    );
}

fn start_master(endpoint: SocketAddr) -> Server {
    // The replica connects from the RDMA interface's address, not loopback.
    Server::start(&[
        "--shards",
        "2",
        "--protected-mode",
        "no",
        "--repl-rdma",
        &endpoint.to_string(),
    ])
}

/// A replica on the single stream (shard links over RDMA have a test of their own below):
/// these tests count its one stream's syncs and check its one `slave0` line.
fn start_replica(host: &str, port: u16) -> Server {
    Server::start(&[
        "--shards",
        "2",
        "--repl-shard-links",
        "no",
        "--repl-transport",
        "rdma",
        "--replicaof",
        host,
        &port.to_string(),
    ])
}

#[test]
fn replication_over_rdma() {
    corewire_verbs::testing::require_device();
    let endpoint = repl_endpoint();
    let master = start_master(endpoint);
    let mut m = master.connect();
    workload(&mut m);

    let replica = start_replica(&endpoint.ip().to_string(), endpoint.port());
    let mut r = replica.connect();
    wait_link_up(&mut r, &replica);
    assert_eq!(replication(&mut r, "master_link_transport"), "rdma");
    assert_converges(&mut m, &mut r);
    assert_eq!(stat(&mut m, "sync_full"), 1);

    // The stream, and WAIT counting the acknowledgements that came back over RDMA.
    for round in 0..3 {
        write_stream(&mut m, round);
    }
    assert_eq!(m.call(&["WAIT", "1", "30000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
    let online = replication(&mut m, "slave0");
    assert!(online.contains("state=online"), "{online}");

    // The master closes the link: the replica reconnects over RDMA and continues.
    let partial = stat(&mut m, "sync_partial_ok");
    assert_eq!(
        m.call(&["CLIENT", "KILL", "TYPE", "replica"]),
        Reply::Int(1)
    );
    write_stream(&mut m, 3);
    let resynced = eventually(WAIT, || stat(&mut m, "sync_partial_ok") == partial + 1);
    assert!(
        resynced,
        "no partial resync:\n{}\nreplica's log:\n{}",
        info(&mut r, "replication"),
        replica.stderr()
    );
    wait_link_up(&mut r, &replica);
    assert_eq!(stat(&mut m, "sync_full"), 1, "a second full sync");
    assert!(
        replication(&mut r, "master_link_failures")
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    write_stream(&mut m, 4);
    assert_eq!(m.call(&["WAIT", "1", "30000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
}

/// A replica whose REPLICAOF names the master's TCP port, where no RDMA endpoint listens:
/// the link stays down with the RDMA error counted and logged, and no TCP link is made.
#[test]
fn unreachable_rdma_endpoint_fails_without_tcp_fallback() {
    corewire_verbs::testing::require_device();
    let master = Server::start(&["--shards", "1", "--protected-mode", "no"]);
    let mut m = master.connect();
    let ip = corewire_verbs::testing::rdma_addr().to_string();
    let replica = start_replica(&ip, master.port);
    let mut r = replica.connect();
    let failed = eventually(WAIT, || {
        info_field(&mut r, "replication", "master_link_failures")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n >= 2)
    });
    assert!(failed, "{}", info(&mut r, "replication"));
    assert_eq!(replication(&mut r, "master_link_status"), "down");
    let why = replication(&mut r, "master_link_last_error");
    assert!(why.contains("RDMA"), "{why}");
    assert!(replica.stderr().contains("RDMA"), "{}", replica.stderr());
    assert_eq!(replication(&mut m, "connected_slaves"), "0");
    assert_eq!(stat(&mut m, "sync_full"), 0);
}

/// A replica that stops reading over RDMA (its process stopped: it grants no more credits):
/// the master's output for it piles up to `client-output-buffer-limit replica`, then the
/// master drops it, its memory bounded meanwhile; resumed, the replica syncs again.
#[test]
fn a_stalled_rdma_replica_is_dropped_at_its_output_limit() {
    corewire_verbs::testing::require_device();
    let endpoint = SocketAddr::new(endpoint_ip(), repl_endpoint().port() + 1);
    let master = start_master(endpoint);
    let mut m = master.connect();
    let limit = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "replica 4mb 0 0",
    ];
    assert_eq!(m.call(&limit), Reply::ok());
    let replica = start_replica(&endpoint.ip().to_string(), endpoint.port());
    let mut r = replica.connect();
    wait_link_up(&mut r, &replica);
    signal(&replica, "STOP");
    let baseline = master.rss_mib();
    // Up to 128 MiB of stream over the same few keys: far past the limit.
    let value = "x".repeat(1 << 20);
    let mut dropped = false;
    for i in 0..128 {
        assert_eq!(
            m.call(&["SET", &format!("big{}", i % 4), &value]),
            Reply::ok()
        );
        if i % 8 == 7 && replication(&mut m, "connected_slaves") == "0" {
            dropped = true;
            break;
        }
    }
    let dropped = dropped || eventually(WAIT, || replication(&mut m, "connected_slaves") == "0");
    assert!(dropped, "{}", info(&mut m, "replication"));
    let grown = master.rss_mib().saturating_sub(baseline);
    assert!(
        grown < 96,
        "the master grew {grown} MiB for a stalled replica"
    );
    signal(&replica, "CONT");
    let back = eventually(WAIT, || {
        info_field(&mut m, "replication", "slave0").is_some_and(|s| s.contains("state=online"))
    });
    assert!(
        back,
        "{}\nreplica's log:\n{}",
        info(&mut m, "replication"),
        replica.stderr()
    );
    assert_eq!(m.call(&["WAIT", "1", "30000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
}

fn endpoint_ip() -> std::net::IpAddr {
    corewire_verbs::testing::rdma_addr()
}

fn signal(server: &Server, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &server.pid().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{name}");
}

/// Shard links over RDMA: each replica shard opens its own RDMA connection to the master's
/// endpoint, loads its part of the master's cut and follows its shard's stream.
#[test]
fn shard_links_over_rdma() {
    corewire_verbs::testing::require_device();
    let endpoint = SocketAddr::new(endpoint_ip(), repl_endpoint().port() + 2);
    let master = start_master(endpoint);
    let mut m = master.connect();
    workload(&mut m);
    let (host, port) = (endpoint.ip().to_string(), endpoint.port().to_string());
    let replica = Server::start(&[
        "--shards",
        "2",
        "--repl-transport",
        "rdma",
        "--replicaof",
        &host,
        &port,
    ]);
    let mut r = replica.connect();
    wait_link_up(&mut r, &replica);
    assert_eq!(replication(&mut r, "master_link_transport"), "rdma");
    assert_eq!(replication(&mut r, "slave_shard_links"), "2");
    assert_converges(&mut m, &mut r);
    assert_eq!(stat(&mut m, "sync_full"), 2);
    write_stream(&mut m, 0);
    assert_eq!(m.call(&["WAIT", "1", "30000"]), Reply::Int(1));
    assert_converges(&mut m, &mut r);
}
