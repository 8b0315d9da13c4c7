//! corewire-kv over TLS with Redis's flags, against Redis's own clients unchanged:
//! `redis-cli --tls`, `redis-benchmark --tls` and redis-py's `ssl=True`; mutual TLS
//! required, optional and refused; an expired server certificate refused; plaintext on the
//! TLS port closed and counted; `--port 0` turning plaintext off; CONFIG SET of `tls-*`
//! reloading certificates for new connections; settings rustls cannot honour refused with
//! the reason; a key file encrypted with a pass phrase. Certificates are made at test time.

mod common;
#[path = "../../../tests/tls_common/mod.rs"]
mod tls_common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{eventually, require_tool, Server, TempDir, IO_TIMEOUT};
use tls_common::{TestCa, Usage};

/// Debian's interpreter, where `python3-redis` installs (a `python3` earlier in `PATH`,
/// such as pyenv's, does not see it).
const PYTHON: &str = "/usr/bin/python3";

/// Certificate files of one test: a CA, a server certificate for localhost/127.0.0.1 and a
/// client certificate, all signed by the CA.
struct Certs {
    dir: TempDir,
    ca: TestCa,
    ca_file: PathBuf,
    server: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
}

impl Certs {
    fn new(tag: &str) -> Certs {
        let dir = TempDir::new(tag);
        let ca = TestCa::new(&format!("{tag} CA"));
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        let server = ca
            .leaf(&["localhost", "127.0.0.1"], Usage::Server)
            .write(dir.path(), "server");
        let client = ca
            .leaf(&["client"], Usage::Client)
            .write(dir.path(), "client");
        Certs {
            dir,
            ca,
            ca_file,
            server,
            client,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A port nothing listens on right now (the server binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `--tls-port P` (a free port) with the test's certificate and key, the CA if `ca`, then
/// `extra` (a flag given again overrides the earlier one).
fn tls_args(certs: &Certs, ca: bool, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--tls-port".to_string(),
        free_port().to_string(),
        "--tls-cert-file".into(),
        s(&certs.server.0).into(),
        "--tls-key-file".into(),
        s(&certs.server.1).into(),
    ];
    if ca {
        args.extend(["--tls-ca-cert-file".into(), s(&certs.ca_file).into()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Start with [`tls_args`]; the error (with the server's log) when it does not come up.
fn try_start_tls(certs: &Certs, ca: bool, extra: &[&str]) -> Result<Server, String> {
    let args = tls_args(certs, ca, extra);
    Server::try_start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// `corewire-kv --port 0 --tls-port P ...` (plaintext off), retried on a port taken meanwhile.
fn start_tls(certs: &Certs, extra: &[&str]) -> Server {
    let mut args = vec!["--shards", "2"];
    args.extend_from_slice(extra);
    let mut last = String::new();
    for _ in 0..5 {
        match try_start_tls(certs, true, &args) {
            Ok(server) => return server,
            Err(e) => last = e,
        }
    }
    panic!("corewire-kv with TLS did not start: {last}");
}

/// `redis-cli --tls -p PORT` trusting the test CA, not started yet.
fn cli_tls_command(port: u16, certs: &Certs) -> Command {
    require_tool("redis-cli");
    let mut cmd = Command::new("redis-cli");
    cmd.args([
        "--tls",
        "--cacert",
        s(&certs.ca_file),
        "-p",
        &port.to_string(),
    ]);
    cmd
}

/// `redis-cli --tls` with the test CA (and a client certificate if asked).
fn cli_tls(port: u16, certs: &Certs, client_cert: bool, args: &[&str]) -> Output {
    let mut cmd = cli_tls_command(port, certs);
    if client_cert {
        cmd.args(["--cert", s(&certs.client.0), "--key", s(&certs.client.1)]);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running redis-cli")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// What `redis-cli --tls` (no client certificate) printed for `args`.
fn cli_text(port: u16, certs: &Certs, args: &[&str]) -> String {
    text(&cli_tls(port, certs, false, args))
}

fn protocol_errors_logged(server: &Server) -> usize {
    server
        .stderr()
        .lines()
        .filter(|l| l.contains("protocol=\"tls\"") || l.contains("protocol=tls"))
        .count()
}

#[test]
fn redis_cli_over_tls_with_plaintext_off() {
    let certs = Certs::new("cli");
    let server = start_tls(&certs, &["--tls-auth-clients", "no"]);
    assert_eq!(
        server.port, 0,
        "--port 0 with a TLS port: no plaintext port"
    );
    let port = server.tls_port.expect("the ready line names the TLS port");
    assert_eq!(cli_text(port, &certs, &["set", "greeting", "hello"]), "OK");
    assert_eq!(cli_text(port, &certs, &["get", "greeting"]), "hello");
    // A pipeline of many commands through one connection (stdin, as redis-cli --pipe users do).
    let mut child = cli_tls_command(port, &certs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for i in 0..500 {
        input.push_str(&format!("incr counter{}\n", i % 7));
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 500);
    let total: i64 = (0..7)
        .map(|i| {
            cli_text(port, &certs, &["get", &format!("counter{i}")])
                .parse::<i64>()
                .unwrap()
        })
        .sum();
    assert_eq!(total, 500);
    let params = cli_text(port, &certs, &["config", "get", "tls-port"]);
    assert_eq!(params, format!("tls-port\n{port}"));
}

#[test]
fn plaintext_on_the_tls_port_is_closed_and_counted() {
    let certs = Certs::new("plain");
    let server = start_tls(&certs, &["--tls-auth-clients", "no"]);
    let port = server.tls_port.unwrap();
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!got.windows(4).any(|w| w == b"PONG"), "{got:?}");
    // redis-cli without --tls fails the same way.
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "ping"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PONG"));
    assert!(
        eventually(IO_TIMEOUT, || protocol_errors_logged(&server) >= 1),
        "a plaintext client on the TLS port is logged as a TLS protocol error:\n{}",
        server.stderr()
    );
    // Still serving TLS.
    assert_eq!(cli_text(port, &certs, &["ping"]), "PONG");
}

#[test]
fn mutual_tls_required_optional_and_refused() {
    let certs = Certs::new("mtls");
    // Redis's default: tls-auth-clients yes.
    let required = start_tls(&certs, &[]);
    let port = required.tls_port.unwrap();
    assert_eq!(text(&cli_tls(port, &certs, true, &["ping"])), "PONG");
    let refused = cli_tls(port, &certs, false, &["ping"]);
    assert!(
        !text(&refused).contains("PONG"),
        "a client without a certificate was served"
    );
    // A certificate of another CA is refused too.
    let stranger = TestCa::new("stranger")
        .leaf(&["client"], Usage::Client)
        .write(certs.dir.path(), "stranger");
    let out = cli_tls_command(port, &certs)
        .args(["--cert", s(&stranger.0), "--key", s(&stranger.1), "ping"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!text(&out).contains("PONG"));

    let optional = start_tls(&certs, &["--tls-auth-clients", "optional"]);
    let port = optional.tls_port.unwrap();
    assert_eq!(text(&cli_tls(port, &certs, true, &["ping"])), "PONG");
    assert_eq!(cli_text(port, &certs, &["ping"]), "PONG");
}

#[test]
fn an_expired_server_certificate_is_refused_by_redis_cli() {
    let certs = Certs::new("expired");
    let expired = certs
        .ca
        .expired_leaf(&["localhost", "127.0.0.1"], Usage::Server)
        .write(certs.dir.path(), "expired");
    let server = start_tls(
        &certs,
        &[
            "--tls-auth-clients",
            "no",
            "--tls-cert-file",
            s(&expired.0),
            "--tls-key-file",
            s(&expired.1),
        ],
    );
    let out = cli_tls(server.tls_port.unwrap(), &certs, false, &["ping"]);
    assert!(!text(&out).contains("PONG"));
    let why = String::from_utf8_lossy(&out.stderr).to_lowercase() + &text(&out).to_lowercase();
    assert!(why.contains("expired") || why.contains("verify"), "{why}");
}

#[test]
fn redis_py_connects_with_ssl() {
    let check = Command::new(PYTHON).args(["-c", "import redis"]).output();
    assert!(
        check.is_ok_and(|o| o.status.success()),
        "{PYTHON} cannot import redis: install Debian's python3-redis (cargo xtask setup does)"
    );
    let certs = Certs::new("py");
    let server = start_tls(&certs, &[]);
    let script = format!(
        r#"
import redis
r = redis.Redis(host="127.0.0.1", port={port}, ssl=True, ssl_ca_certs="{ca}",
                ssl_certfile="{cert}", ssl_keyfile="{key}", socket_timeout=20)
assert r.ping()
r.set("py", "over tls")
assert r.get("py") == b"over tls"
p = r.pipeline(transaction=False)
for i in range(1000):
    p.incr("n")
assert p.execute()[-1] == 1000
big = "x" * 300000
r.set("big", big)
assert r.get("big") == big.encode()
print("ok")
"#,
        port = server.tls_port.unwrap(),
        ca = s(&certs.ca_file),
        cert = s(&certs.client.0),
        key = s(&certs.client.1),
    );
    let out = Command::new(PYTHON).args(["-c", &script]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "redis-py over TLS failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn redis_benchmark_over_tls() {
    require_tool("redis-benchmark");
    let certs = Certs::new("bench");
    let server = start_tls(&certs, &["--tls-auth-clients", "no"]);
    let out = Command::new("redis-benchmark")
        .args(["--tls", "--cacert", s(&certs.ca_file)])
        .args(["-p", &server.tls_port.unwrap().to_string()])
        .args(["-t", "set,get", "-n", "2000", "-c", "4", "-P", "16", "-q"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    for test in ["SET", "GET"] {
        assert!(
            report
                .lines()
                .any(|l| l.contains(test) && l.contains("requests per second")),
            "{test} missing from redis-benchmark's report:\n{report}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn config_set_reloads_certificates_for_new_connections() {
    let certs = Certs::new("reload");
    let server = start_tls(&certs, &["--tls-auth-clients", "no"]);
    let port = server.tls_port.unwrap();
    // A connection made before the reload.
    let mut before = cli_tls_command(port, &certs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut before_in = before.stdin.take().unwrap();
    writeln!(before_in, "set before 1").unwrap();
    // redis-cli connects (and handshakes) before it reads its input, but in its own time:
    // wait until the server has it, or it may connect after the reload, with the old CA.
    let started = std::time::Instant::now();
    while cli_text(port, &certs, &["client", "list"]).lines().count() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the first redis-cli never connected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let second = Certs::new("reload-new");
    let out = cli_text(
        port,
        &certs,
        &[
            "config",
            "set",
            "tls-cert-file",
            s(&second.server.0),
            "tls-key-file",
            s(&second.server.1),
            "tls-ca-cert-file",
            s(&second.ca_file),
        ],
    );
    assert_eq!(out, "OK");
    // New connections get the new certificate: the old CA no longer verifies it.
    assert!(!cli_text(port, &certs, &["ping"]).contains("PONG"));
    assert_eq!(cli_text(port, &second, &["ping"]), "PONG");
    assert_eq!(
        cli_text(port, &second, &["config", "get", "tls-cert-file"]),
        format!("tls-cert-file\n{}", s(&second.server.0))
    );
    // The connection made before carries on.
    writeln!(before_in, "get before").unwrap();
    drop(before_in);
    let old = before.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&old.stdout).trim(), "OK\n1");

    // A file that is not there: refused as Redis does, nothing changes.
    let out = cli_text(
        port,
        &second,
        &["config", "set", "tls-cert-file", "/nonexistent.crt"],
    );
    assert!(
        out.contains("Unable to update TLS configuration"),
        "{}",
        out
    );
    assert_eq!(cli_text(port, &second, &["ping"]), "PONG");
}

#[test]
fn settings_rustls_cannot_honour_are_refused_with_the_reason() {
    let certs = Certs::new("refuse");
    for (flag, value, reason) in [
        ("--tls-protocols", "TLSv1.1", "TLSv1.2 and TLSv1.3 only"),
        ("--tls-ciphers", "AES128-SHA", "not supported by rustls"),
        (
            "--tls-ciphersuites",
            "TLS_AES_128_CCM_8_SHA256",
            "not supported by rustls",
        ),
    ] {
        let error = try_start_tls(&certs, true, &[flag, value])
            .err()
            .unwrap_or_else(|| panic!("{flag} {value} was accepted"));
        assert!(error.contains(reason), "{flag} {value}: {error}");
    }
    // Without a CA while client certificates are asked for (Redis's default): Redis's error.
    let error = try_start_tls(&certs, false, &[])
        .err()
        .expect("TLS without a CA was accepted");
    assert!(error.contains("tls-ca-cert-file"), "{error}");
    // At run time: CONFIG SET refuses with the reason and keeps the old value.
    let server = start_tls(&certs, &["--tls-auth-clients", "no"]);
    let port = server.tls_port.unwrap();
    let out = cli_text(port, &certs, &["config", "set", "tls-ciphers", "RC4-MD5"]);
    assert!(out.contains("not supported by rustls"), "{}", out);
    let out = cli_text(port, &certs, &["config", "set", "tls-port", "1"]);
    assert!(out.contains("immutable"), "{}", out);
    // Accepted values take effect: TLS 1.3 only, then a TLS 1.2-only client is refused.
    let out = cli_text(port, &certs, &["config", "set", "tls-protocols", "TLSv1.3"]);
    assert_eq!(out, "OK");
    let tls12 = cli_tls_command(port, &certs)
        .env("OPENSSL_CONF", s(&tls12_only_openssl_conf(&certs)))
        .arg("ping")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !text(&tls12).contains("PONG"),
        "a TLS 1.2 client got through"
    );
    assert_eq!(cli_text(port, &certs, &["ping"]), "PONG");
}

/// An OpenSSL configuration that caps clients at TLS 1.2 (redis-cli has no flag for it).
fn tls12_only_openssl_conf(certs: &Certs) -> PathBuf {
    let path = certs.path("openssl-tls12.cnf");
    std::fs::write(
        &path,
        "openssl_conf = conf\n[conf]\nssl_conf = ssl\n[ssl]\nsystem_default = tls\n\
         [tls]\nMaxProtocol = TLSv1.2\n",
    )
    .unwrap();
    path
}

#[test]
fn a_key_file_encrypted_with_a_pass_phrase() {
    require_tool("openssl");
    let certs = Certs::new("pass");
    let encrypted = certs.path("server-encrypted.key");
    let status = Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:sesame",
        ])
        .args(["-in", s(&certs.server.1), "-out", s(&encrypted)])
        .status()
        .unwrap();
    assert!(status.success());
    let server = start_tls(
        &certs,
        &[
            "--tls-auth-clients",
            "no",
            "--tls-key-file",
            s(&encrypted),
            "--tls-key-file-pass",
            "sesame",
        ],
    );
    assert_eq!(
        cli_text(server.tls_port.unwrap(), &certs, &["ping"]),
        "PONG"
    );
    let error = try_start_tls(
        &certs,
        false,
        &[
            "--tls-auth-clients",
            "no",
            "--tls-key-file",
            s(&encrypted),
            "--tls-key-file-pass",
            "wrong",
        ],
    )
    .err()
    .expect("a wrong pass phrase was accepted");
    assert!(error.contains("decrypt"), "{error}");
}

/// `--tls-cluster yes` with our side of outgoing links: a certificate made for client use
/// (the server's is for server use only).
fn tls_cluster(certs: &Certs) -> [&str; 6] {
    [
        "--tls-cluster",
        "yes",
        "--tls-client-cert-file",
        s(&certs.client.0),
        "--tls-client-key-file",
        s(&certs.client.1),
    ]
}

/// `CLUSTER NODES` of the node on plaintext `port`.
fn cluster_nodes(port: u16) -> String {
    common::redis_cli(port, &["cluster", "nodes"])
}

#[test]
fn the_cluster_bus_runs_over_tls_with_tls_cluster() {
    let certs = Certs::new("bus");
    let dirs = [TempDir::new("bus-a"), TempDir::new("bus-b")];
    let nodes: Vec<Server> = dirs
        .iter()
        .map(|dir| {
            let conf = dir.path().join("nodes.conf");
            // The plaintext port stays on, for the test's own redis-cli; clients are sent to
            // the TLS port.
            start_tls_keeping_plaintext(
                &certs,
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    s(&conf),
                    "--cluster-node-timeout",
                    "2000",
                ]
                .into_iter()
                .chain(tls_cluster(&certs))
                .collect::<Vec<_>>(),
            )
        })
        .collect();
    let (a, b) = (&nodes[0], &nodes[1]);
    let b_bus = cluster_nodes(b.port)
        .lines()
        .find(|l| l.contains("myself"))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)?
                .split('@')
                .nth(1)?
                .parse::<u16>()
                .ok()
        })
        .expect("B's bus port");
    let b_tls = b.tls_port.unwrap().to_string();
    assert_eq!(
        common::redis_cli(
            a.port,
            &["cluster", "meet", "127.0.0.1", &b_tls, &b_bus.to_string()]
        ),
        "OK"
    );
    // Both nodes see each other connected: PING/PONG went over TLS both ways.
    let connected = |port: u16| {
        let nodes = cluster_nodes(port);
        nodes.lines().count() == 2
            && nodes
                .lines()
                .all(|l| l.contains("connected") && !l.contains("handshake"))
    };
    assert!(
        eventually(Duration::from_secs(30), || connected(a.port)
            && connected(b.port)),
        "A:\n{}\nB:\n{}\nA's log:\n{}\nB's log:\n{}",
        cluster_nodes(a.port),
        cluster_nodes(b.port),
        a.stderr(),
        b.stderr()
    );
    // Clients are sent to the TLS port (as Redis with tls-cluster yes).
    let myself = cluster_nodes(b.port);
    assert!(
        myself.contains(&format!("127.0.0.1:{b_tls}@{b_bus}")),
        "{myself}"
    );
    // A plaintext peer on the bus port gets nothing and is counted.
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", b_bus)).unwrap();
    plain.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let _ = plain.write_all(b"RCmb plaintext is not welcome here");
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(
        eventually(IO_TIMEOUT, || b.stderr().contains("cluster-bus-tls")),
        "{}",
        b.stderr()
    );
}

/// [`start_tls`] with the plaintext port on too.
fn start_tls_keeping_plaintext(certs: &Certs, extra: &[&str]) -> Server {
    let port = free_port().to_string();
    let mut args = vec!["--port", &port];
    args.extend_from_slice(extra);
    start_tls(certs, &args)
}

#[test]
fn migrate_goes_over_tls_with_tls_cluster() {
    let certs = Certs::new("migrate");
    let source = start_tls_keeping_plaintext(&certs, &tls_cluster(&certs));
    let target = start_tls_keeping_plaintext(&certs, &tls_cluster(&certs));
    assert_eq!(
        common::redis_cli(source.port, &["set", "moving", "along"]),
        "OK"
    );
    let target_tls = target.tls_port.unwrap().to_string();
    assert_eq!(
        common::redis_cli(
            source.port,
            &["migrate", "127.0.0.1", &target_tls, "moving", "0", "5000"]
        ),
        "OK"
    );
    assert_eq!(common::redis_cli(target.port, &["get", "moving"]), "along");
    assert_eq!(common::redis_cli(source.port, &["exists", "moving"]), "0");
}
