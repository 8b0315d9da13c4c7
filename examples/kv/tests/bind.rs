//! `bind` with several addresses (Redis's default `* -::*`, `-` for an optional address) and
//! CONFIG SET bind moving the listeners while the server runs: atomic (an address that
//! cannot be listened at leaves the old listeners as they were), connections already open
//! stay; and the Unix socket (`unixsocket`, `unixsocketperm`).

mod common;

use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream};

use common::{request, Reply, Resp, Server, TempDir};

/// An address of TEST-NET-1 (RFC 5737): never one of this host's.
const NOT_HERE: &str = "192.0.2.1";

fn bind_of(conn: &mut Resp) -> Reply {
    conn.call(&["CONFIG", "GET", "bind"])
}

fn bind_is(value: &str) -> Reply {
    Reply::Array(Some(vec![Reply::bulk("bind"), Reply::bulk(value)]))
}

fn accepts(addr: SocketAddr) -> bool {
    match TcpStream::connect(addr) {
        Err(_) => false,
        Ok(_) => {
            let mut conn = Resp::connect_addr(addr);
            conn.call(&["PING"]) == Reply::Simple("PONG".into())
        }
    }
}

fn v4(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

#[test]
fn the_default_listens_at_every_address_and_config_set_bind_moves_the_listeners() {
    let server = Server::start(&["--shards", "2"]);
    let port = server.port;
    let mut conn = server.connect();
    assert_eq!(bind_of(&mut conn), bind_is("* -::*"));
    assert!(accepts(v4([127, 0, 0, 1], port)));
    // `-::*` is optional: where the host has IPv6, the IPv6 loopback is served as well.
    if TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok() {
        assert!(accepts(SocketAddr::from((Ipv6Addr::LOCALHOST, port))));
    }

    // No address: nothing listens from the reply on; the connection open stays.
    assert_eq!(conn.call(&["CONFIG", "SET", "bind", ""]), Reply::ok());
    assert!(TcpStream::connect(v4([127, 0, 0, 1], port)).is_err());
    assert_eq!(conn.call(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(bind_of(&mut conn), bind_is(""));

    // An optional address the host lacks is skipped.
    let skipping = format!("127.0.0.1 -{NOT_HERE}");
    assert_eq!(
        conn.call(&["CONFIG", "SET", "bind", &skipping]),
        Reply::ok()
    );
    assert!(accepts(v4([127, 0, 0, 1], port)));
    assert_eq!(bind_of(&mut conn), bind_is(&skipping));

    // `127.0.0.1` to `*`: the new address takes the old one's port.
    assert_eq!(conn.call(&["CONFIG", "SET", "bind", "*"]), Reply::ok());
    assert!(accepts(v4([127, 0, 0, 2], port)));
    assert_eq!(conn.call(&["PING"]), Reply::Simple("PONG".into()));
}

/// A CONFIG SET bind that cannot listen everywhere it asks changes nothing: Redis's error,
/// `bind` as it was, the old addresses still served.
#[test]
fn a_bind_that_fails_keeps_the_old_listeners() {
    let server = Server::start(&["--shards", "2", "--bind", "127.0.0.1"]);
    let port = server.port;
    let mut conn = server.connect();
    let failed = "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to \
                  specified addresses.";
    // Not an address; an address the host lacks (not optional); an address in use.
    let taken = TcpListener::bind(v4([127, 0, 0, 3], port)).expect("127.0.0.3 at the port");
    for value in [
        "999.999.999.999".to_owned(),
        format!("127.0.0.2 {NOT_HERE}"),
        "127.0.0.2 127.0.0.3".to_owned(),
        "*".to_owned(),
    ] {
        assert_eq!(
            conn.call(&["CONFIG", "SET", "bind", &value]),
            Reply::Error(failed.into()),
            "{value}"
        );
        assert_eq!(bind_of(&mut conn), bind_is("127.0.0.1"), "{value}");
        assert!(accepts(v4([127, 0, 0, 1], port)), "after {value}");
        assert!(
            TcpStream::connect(v4([127, 0, 0, 2], port)).is_err(),
            "{value}"
        );
    }
    drop(taken);
    assert_eq!(
        conn.call(&["CONFIG", "SET", "bind", "127.0.0.2 127.0.0.3"]),
        Reply::ok()
    );
    assert!(accepts(v4([127, 0, 0, 3], port)));
    assert!(TcpStream::connect(v4([127, 0, 0, 1], port)).is_err());
    assert_eq!(conn.call(&["PING"]), Reply::Simple("PONG".into()));
}

/// `unixsocket`: clients connect there too, with no TCP address at all (`bind ""`), and
/// protected mode lets them in (they are on this host); the file has `unixsocketperm`'s
/// mode and goes when the server stops.
#[test]
fn the_unix_socket_serves_clients() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixStream;
    let dir = TempDir::new("unixsocket");
    let path = dir.path().join("kv.sock");
    // A file left by an earlier run is replaced.
    std::fs::write(&path, b"stale").unwrap();
    let path_arg = path.to_str().unwrap();
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let mut server = Server::start(&[
        "--port",
        &port.to_string(),
        "--bind",
        "",
        "--unixsocket",
        path_arg,
        "--unixsocketperm",
        "700",
    ]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let call = |args: &[&str]| {
        let mut stream = UnixStream::connect(&path).expect("connecting to the unix socket");
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        stream.write_all(&request(args)).unwrap();
        let mut reply = vec![0u8; 256];
        let n = stream.read(&mut reply).unwrap();
        String::from_utf8_lossy(&reply[..n]).into_owned()
    };
    assert_eq!(call(&["PING"]), "+PONG\r\n");
    assert_eq!(
        call(&["CONFIG", "GET", "bind"]),
        "*2\r\n$4\r\nbind\r\n$0\r\n\r\n"
    );
    assert!(TcpStream::connect(v4([127, 0, 0, 1], port)).is_err());
    assert_eq!(call(&["CONFIG", "SET", "bind", "127.0.0.1"]), "+OK\r\n");
    assert!(accepts(v4([127, 0, 0, 1], port)));
    server.stop();
    assert!(!path.exists(), "the socket file is removed at shutdown");
}
