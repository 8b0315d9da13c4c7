//! Hostile or broken clients: each gets an error and loses its own connection, nobody else's.

mod common;

use std::time::Duration;

use common::{eventually, Reply, Server};

#[test]
fn malformed_resp_closes_only_that_connection() {
    // One shard: every connection shares it.
    let server = Server::start(&["--shards", "1"]);
    let mut good = server.connect();
    assert_eq!(good.call(&["SET", "k", "v"]), Reply::ok());

    let mut bad = server.connect();
    bad.send(b"*2\r\n$3\r\nGET\r\n$x\r\n").unwrap();
    assert_eq!(
        bad.read().unwrap(),
        Reply::Error("ERR Protocol error: invalid bulk length".into())
    );
    assert!(bad.is_closed_by_server());

    let mut bad = server.connect();
    bad.send(b"*1\r\n+PING\r\n").unwrap();
    assert_eq!(
        bad.read().unwrap(),
        Reply::Error("ERR Protocol error: expected '$', got '+'".into())
    );
    assert!(bad.is_closed_by_server());

    // Replies to requests before the garbage still arrive, in order.
    let mut bad = server.connect();
    bad.send(b"PING\r\n*1\r\n$4\r\nPING\r\n\"unbalanced\r\n")
        .unwrap();
    assert_eq!(bad.read().unwrap(), Reply::Simple("PONG".into()));
    assert_eq!(bad.read().unwrap(), Reply::Simple("PONG".into()));
    assert_eq!(
        bad.read().unwrap(),
        Reply::Error("ERR Protocol error: unbalanced quotes in request".into())
    );
    assert!(bad.is_closed_by_server());

    assert_eq!(good.call(&["GET", "k"]), Reply::bulk("v"));
    assert_eq!(good.call(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn oversize_bulk_is_rejected() {
    // Redis's lowest limit, 1mb.
    let server = Server::start(&["--shards", "2", "--proto-max-bulk-len", "1mb"]);
    let mut conn = server.connect();
    let fits = "x".repeat(1 << 20);
    assert_eq!(conn.call(&["SET", "fits", &fits]), Reply::ok());
    assert_eq!(conn.call(&["STRLEN", "fits"]), Reply::Int(1 << 20));
    // APPEND cannot grow a value past the limit either.
    assert_eq!(
        conn.call(&["APPEND", "fits", "y"]),
        Reply::Error("ERR string exceeds maximum allowed size (proto-max-bulk-len)".into())
    );

    // The header alone is refused: the server never waits for (or buffers) the 2 MB.
    conn.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n")
        .unwrap();
    assert_eq!(
        conn.read().unwrap(),
        Reply::Error("ERR Protocol error: invalid bulk length".into())
    );
    assert!(conn.is_closed_by_server());

    // An endless inline line is cut off too.
    let mut conn = server.connect();
    let _ = conn.send(&vec![b'a'; 70 * 1024]);
    assert_eq!(
        conn.read().unwrap(),
        Reply::Error("ERR Protocol error: too big inline request".into())
    );
    assert!(conn.is_closed_by_server());

    assert_eq!(
        server.connect().call(&["STRLEN", "fits"]),
        Reply::Int(1 << 20)
    );
}

#[test]
fn maxclients_is_honoured() {
    let server = Server::start(&["--shards", "2", "--maxclients", "2"]);
    let mut first = server.connect();
    let mut second = server.connect();
    assert_eq!(first.call(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(second.call(&["PING"]), Reply::Simple("PONG".into()));

    let mut third = server.connect();
    assert_eq!(
        third.read().unwrap(),
        Reply::Error("ERR max number of clients reached".into())
    );
    assert!(third.is_closed_by_server());

    // A freed place can be taken again (the count drops once the server sees the close).
    drop(first);
    assert!(
        eventually(Duration::from_secs(10), || {
            let mut again = server.connect();
            let _ = again.send(&common::request(&["PING"]));
            again.read().ok() == Some(Reply::Simple("PONG".into()))
        }),
        "no place freed after a client left"
    );
    assert_eq!(second.call(&["PING"]), Reply::Simple("PONG".into()));
}
