//! Protected mode as Redis 7, tested from a real non-loopback address: the client runs in a
//! network namespace this test makes (a veth pair, one end in the namespace), so the server
//! sees a peer that is not on the loopback interface. With no password, such a client gets
//! Redis's `-DENIED` text — compared byte for byte with what redis-server 7 sends the same
//! client — and is closed; `--protected-mode no`, `--requirepass` and CONFIG SET
//! protected-mode no let it in, and loopback clients are never refused.

mod common;

use std::process::{Command, Stdio};

use common::{Server, IO_TIMEOUT};

/// Debian's interpreter (the in-namespace client is a few lines of Python).
const PYTHON: &str = "/usr/bin/python3";

/// A network namespace with a veth pair: `host_ip` on this side, `ns_ip` inside. Removed on
/// drop.
struct Netns {
    name: String,
    host_if: String,
    host_ip: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip {args:?}: {e} (install iproute2)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    fn new() -> Netns {
        // Unique per test of this process and, by process id, across parallel runs.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = std::process::id() % 1_000_000;
        let name = format!("cwpm-{id}-{n}");
        let host_if = format!("cwp{id}{n}a");
        let ns_if = format!("cwp{id}{n}b");
        // A /30 of our own in a /16 no other test uses.
        let net = format!("10.250.{}", (id * 8 + n) % 250);
        let host_ip = format!("{net}.1");
        let ns_ip = format!("{net}.2");
        let made = Netns {
            name: name.clone(),
            host_if: host_if.clone(),
            host_ip: host_ip.clone(),
        };
        let setup = || -> Result<(), String> {
            ip(&["netns", "add", &name])?;
            ip(&[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ])?;
            ip(&["link", "set", &ns_if, "netns", &name])?;
            ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &host_if])?;
            ip(&["link", "set", &host_if, "up"])?;
            ip(&[
                "-n",
                &name,
                "addr",
                "add",
                &format!("{ns_ip}/30"),
                "dev",
                &ns_if,
            ])?;
            ip(&["-n", &name, "link", "set", &ns_if, "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])
        };
        if let Err(why) = setup() {
            panic!(
                "cannot make the test's network namespace ({why}); this test needs root and \
                 iproute2 (ip netns, veth), as `cargo xtask test` runs it"
            );
        }
        made
    }

    /// Connect from inside the namespace to `host_ip:port`, send `request`, and return
    /// everything the server sent until it closed or went quiet (2 s).
    fn exchange(&self, port: u16, request: &[u8]) -> Vec<u8> {
        let script = format!(
            r#"
import socket, sys
s = socket.create_connection(("{host}", {port}), timeout=20)
s.sendall(bytes.fromhex("{hex}"))
s.settimeout(2)
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except (socket.timeout, ConnectionResetError):
    pass
sys.stdout.write(data.hex())
"#,
            host = self.host_ip,
            hex = request
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        );
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, PYTHON, "-c", &script])
            .stdin(Stdio::null())
            .output()
            .expect("running the in-namespace client");
        assert!(
            out.status.success(),
            "in-namespace client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hex = String::from_utf8_lossy(&out.stdout);
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.host_if]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// What redis-server 7 sends a non-loopback client in protected mode (it must be installed:
/// `cargo xtask setup` does).
fn redis_server_denial(ns: &Netns) -> Vec<u8> {
    let port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "0.0.0.0"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is not installed: apt-get install redis-server");
    let up = common::eventually(IO_TIMEOUT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let reply = up.then(|| ns.exchange(port, PING));
    let _ = child.kill();
    let _ = child.wait();
    reply.expect("redis-server did not start")
}

#[test]
fn non_loopback_clients_are_refused_as_redis_refuses_them() {
    let ns = Netns::new();
    let server = Server::start(&["--shards", "2", "--bind", "0.0.0.0"]);
    let denial = ns.exchange(server.port, PING);
    assert!(
        denial.starts_with(b"-DENIED Redis is running in protected mode"),
        "{}",
        String::from_utf8_lossy(&denial)
    );
    assert_eq!(
        String::from_utf8_lossy(&denial),
        String::from_utf8_lossy(&redis_server_denial(&ns)),
        "the same bytes as redis-server 7"
    );
    // A loopback client is served.
    assert_eq!(server.cli(&["ping"]), "PONG");
    // CONFIG SET protected-mode no (from loopback) lets the outside in, yes shuts it again.
    assert_eq!(server.cli(&["config", "set", "protected-mode", "no"]), "OK");
    assert_eq!(ns.exchange(server.port, PING), b"+PONG\r\n");
    assert_eq!(
        server.cli(&["config", "get", "protected-mode"]),
        "protected-mode\nno"
    );
    assert_eq!(
        server.cli(&["config", "set", "protected-mode", "yes"]),
        "OK"
    );
    assert!(ns.exchange(server.port, PING).starts_with(b"-DENIED"));
}

#[test]
fn protected_mode_off_or_a_password_lets_the_outside_in() {
    let ns = Netns::new();
    let open = Server::start(&["--bind", "0.0.0.0", "--protected-mode", "no"]);
    assert_eq!(ns.exchange(open.port, PING), b"+PONG\r\n");
    let with_password = Server::start(&["--bind", "0.0.0.0", "--requirepass", "sesame"]);
    let reply = ns.exchange(with_password.port, PING);
    assert!(
        reply.starts_with(b"-NOAUTH"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let auth = [&b"*2\r\n$4\r\nAUTH\r\n$6\r\nsesame\r\n"[..], PING].concat();
    assert_eq!(ns.exchange(with_password.port, &auth), b"+OK\r\n+PONG\r\n");
}
