//! CONFIG SET and CONFIG RESETSTAT: replies compared with redis-server (the oracle), and the
//! parameters that mean something here taking effect on every shard.

mod common;
mod diff;

use std::time::Duration;

use common::{eventually, Reply, Resp, Server};

/// CONFIG SET against redis-server: errors, all-or-nothing, what CONFIG GET reports after,
/// and CONFIG RESETSTAT.
#[test]
fn config_set_matches_redis() {
    let (oracle, server) = diff::servers(3, &[]);
    let mut pair = diff::Pair::new(&oracle, &server, "config set");
    for step in [
        &["CONFIG", "SET", "hz", "20"][..],
        &["CONFIG", "GET", "hz"],
        &[
            "CONFIG",
            "SET",
            "maxmemory-policy",
            "allkeys-lru",
            "maxmemory",
            "10mb",
        ],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &["CONFIG", "SET", "maxmemory", "lots"],
        &["CONFIG", "SET", "nosuch", "1"],
        &["CONFIG", "SET", "hz", "10", "hz", "11"],
        &["CONFIG", "SET", "hz"],
        &["CONFIG", "SET", "hz", "15", "nosuch", "1"],
        &["CONFIG", "GET", "hz"],
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "0",
            "maxmemory-policy",
            "noeviction",
        ],
        &["CONFIG", "RESETSTAT"],
        &["CONFIG", "RESETSTAT", "x"],
    ] {
        pair.check_str(step);
    }
}

/// CONFIG SET maxmemory takes effect on every shard: writes are refused past it, and accepted
/// again once it is lifted; maxclients refuses the next connection.
#[test]
fn config_set_takes_effect() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["CONFIG", "SET", "maxmemory", "1"]), Reply::ok());
    // The limit counts the keyspace only (no fixed baseline, unlike Redis's used_memory): the
    // first key may fit, the next ones do not.
    let refused = ["a", "b", "c"]
        .iter()
        .find_map(|key| match conn.call(&["SET", key, "v"]) {
            Reply::Error(error) => Some(error),
            _ => None,
        })
        .expect("a write past maxmemory is refused");
    assert!(refused.starts_with("OOM"), "{refused}");
    assert_eq!(conn.call(&["CONFIG", "SET", "maxmemory", "0"]), Reply::ok());
    assert_eq!(conn.call(&["SET", "k", "v"]), Reply::ok());
    // RESETSTAT zeroes INFO's counters (connections and the shards' keyspace counters).
    assert_eq!(conn.call(&["GET", "k"]), Reply::bulk("v"));
    assert_eq!(conn.call(&["CONFIG", "RESETSTAT"]), Reply::ok());
    let Reply::Bulk(Some(stats)) = conn.call(&["INFO", "stats"]) else {
        panic!("INFO is a bulk string");
    };
    let stats = String::from_utf8(stats).unwrap();
    for field in ["total_connections_received:0", "keyspace_hits:0"] {
        assert!(stats.contains(field), "{field} after RESETSTAT:\n{stats}");
    }
    assert_eq!(
        conn.call(&["CONFIG", "SET", "maxclients", "1"]),
        Reply::ok()
    );
    let mut second = server.connect();
    let Reply::Error(error) = second.call(&["PING"]) else {
        panic!("maxclients 1 refuses a second client");
    };
    assert!(error.contains("max number of clients"), "{error}");
}

/// CONFIG SET of a port something already listens on fails as in Redis ("Unable to listen
/// on this port"), and none of the other parameters of the same CONFIG SET is kept; the
/// server goes on answering on its port. A free port: the server moves there (Redis's
/// `changeListenPort`), the old port closes and connections already open stay.
#[test]
fn config_set_port_moves_the_listener_or_rolls_back() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let busy_port = busy.local_addr().unwrap().port().to_string();
    let maxmemory = conn.call(&["CONFIG", "GET", "maxmemory"]);
    let query_limit = conn.call(&["CONFIG", "GET", "client-query-buffer-limit"]);
    let port = conn.call(&["CONFIG", "GET", "port"]);
    let reply = conn.call(&[
        "CONFIG",
        "SET",
        "maxmemory",
        "10000001",
        "port",
        &busy_port,
        "client-query-buffer-limit",
        "10m",
    ]);
    let Reply::Error(text) = reply else {
        panic!("CONFIG SET of a taken port: {reply:?}");
    };
    assert!(
        text.starts_with(
            "ERR CONFIG SET failed (possibly related to argument 'port') - \
             Unable to listen on this port"
        ),
        "{text}"
    );
    assert_eq!(conn.call(&["CONFIG", "GET", "maxmemory"]), maxmemory);
    assert_eq!(
        conn.call(&["CONFIG", "GET", "client-query-buffer-limit"]),
        query_limit
    );
    assert_eq!(conn.call(&["CONFIG", "GET", "port"]), port);
    assert_eq!(
        server.connect().call(&["PING"]),
        Reply::Simple("PONG".into())
    );
    drop(busy);
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let free_port = free.local_addr().unwrap().port().to_string();
    drop(free);
    let old_port = server.port;
    assert_eq!(
        conn.call(&["CONFIG", "SET", "port", &free_port]),
        Reply::ok()
    );
    assert_eq!(conn.call(&["PING"]), Reply::Simple("PONG".into()));
    let new_port: u16 = free_port.parse().unwrap();
    let mut moved = Resp::connect(new_port);
    assert_eq!(moved.call(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        moved.call(&["CONFIG", "GET", "port"]),
        Reply::Array(Some(vec![Reply::bulk("port"), Reply::bulk(&free_port)]))
    );
    assert!(
        eventually(Duration::from_secs(10), || std::net::TcpStream::connect((
            "127.0.0.1",
            old_port
        ))
        .is_err()),
        "the old port still accepts"
    );
    // Every shard accepts on the new port.
    let clients: Vec<Resp> = (0..8).map(|_| Resp::connect(new_port)).collect();
    for mut c in clients {
        assert_eq!(c.call(&["PING"]), Reply::Simple("PONG".into()));
    }
}

/// CONFIG SET bind: an address that is none fails as in Redis ("Failed to bind to specified
/// addresses") and the server goes on answering where it was; another address moves the
/// listener there.
#[test]
fn config_set_bind_moves_the_listener_or_rolls_back() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    let Reply::Error(text) = conn.call(&["CONFIG", "SET", "bind", "999.999.999.999"]) else {
        panic!("an address that is none is refused");
    };
    assert!(
        text.starts_with(
            "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to \
             specified addresses"
        ),
        "{text}"
    );
    assert_eq!(
        server.connect().call(&["PING"]),
        Reply::Simple("PONG".into())
    );
    assert_eq!(
        conn.call(&["CONFIG", "SET", "bind", "127.0.0.2"]),
        Reply::ok()
    );
    let moved = std::net::SocketAddr::from(([127, 0, 0, 2], server.port));
    let mut there = Resp::connect_addr(moved);
    assert_eq!(there.call(&["PING"]), Reply::Simple("PONG".into()));
    assert!(
        eventually(Duration::from_secs(10), || std::net::TcpStream::connect((
            "127.0.0.1",
            server.port
        ))
        .is_err()),
        "127.0.0.1 still accepts"
    );
}
