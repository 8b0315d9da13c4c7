//! Helpers for the end-to-end tests: a `corewire-kv` child process on an ephemeral loopback
//! port, `redis-cli`, and a raw RESP connection. Every wait is bounded.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const SERVER: &str = env!("CARGO_BIN_EXE_corewire-kv");
pub const KV_CLIENT: &str = env!("CARGO_BIN_EXE_kv-client");
const START_TIMEOUT: Duration = Duration::from_secs(30);
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `corewire-kv`; killed when dropped.
pub struct Server {
    child: Child,
    /// 0 when the plaintext port is off (`--port 0` with `--tls-port`).
    pub port: u16,
    /// `--tls-port`'s port, read from the ready line.
    pub tls_port: Option<u16>,
    pub binary_port: Option<u16>,
    /// `--metrics`' port, read from the ready line.
    pub metrics_port: Option<u16>,
    stderr_path: PathBuf,
    _dir: TempDir,
}

impl Server {
    /// Starts the server with `args` (plus `--port 0`) and waits for its ready line.
    pub fn start(args: &[&str]) -> Server {
        Server::try_start(args).unwrap_or_else(|e| panic!("server did not start: {e}"))
    }

    pub fn try_start(args: &[&str]) -> Result<Server, String> {
        Server::try_start_with_env(args, &[])
    }

    /// [`Server::start`] with extra environment variables (test hooks).
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::try_start_with_env(args, env)
            .unwrap_or_else(|e| panic!("server did not start: {e}"))
    }

    pub fn try_start_with_env(args: &[&str], env: &[(&str, &str)]) -> Result<Server, String> {
        Server::try_start_full(None, args, env, |_| {})
    }

    /// Start with `configure` applied to the command last (e.g. a `pre_exec` hook).
    pub fn try_start_configured(
        args: &[&str],
        env: &[(&str, &str)],
        configure: impl FnOnce(&mut Command),
    ) -> Result<Server, String> {
        Server::try_start_full(None, args, env, configure)
    }

    /// Starts the server with a Redis configuration file (the first argument, as Redis takes
    /// it), then `--port 0` and `args`.
    pub fn try_start_with_config(config: &Path, args: &[&str]) -> Result<Server, String> {
        Server::try_start_full(Some(config), args, &[], |_| {})
    }

    fn try_start_full(
        config: Option<&Path>,
        args: &[&str],
        env: &[(&str, &str)],
        configure: impl FnOnce(&mut Command),
    ) -> Result<Server, String> {
        let dir = TempDir::new("server");
        let stderr_path = dir.path().join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path).map_err(|e| e.to_string())?;
        let mut command = Command::new(SERVER);
        if let Some(config) = config {
            command.arg(config);
        }
        command
            .args(["--port", "0"])
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied());
        configure(&mut command);
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("spawning {SERVER}: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                return Err(format!("no ready line; stderr:\n{log}"));
            }
        };
        let port = field(&line, "resp=")
            .and_then(|a| match a {
                "off" => Some(0),
                a => a.rsplit(':').next()?.parse().ok(),
            })
            .ok_or_else(|| format!("bad ready line {line:?}"))?;
        let tls_port = field(&line, "tls=").and_then(|a| a.rsplit(':').next()?.parse().ok());
        let binary_port = field(&line, "binary=").and_then(|a| a.rsplit(':').next()?.parse().ok());
        let metrics_port =
            field(&line, "metrics=").and_then(|a| a.rsplit(':').next()?.parse().ok());
        Ok(Server {
            child,
            port,
            tls_port,
            binary_port,
            metrics_port,
            stderr_path,
            _dir: dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's resident memory, in MiB.
    pub fn rss_mib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            / 1024
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait (bounded) for a clean exit.
    pub fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + IO_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill9();
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn connect(&self) -> Resp {
        Resp::connect(self.port)
    }

    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(self.port, args)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(name))
}

/// Fails the test (never skips) when a redis tool is missing.
pub fn require_tool(tool: &str) {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "{tool} is not installed; these tests need it: apt-get install redis-tools"
    );
}

/// `redis-cli -p PORT args...`; its stdout without the final newline (error replies keep
/// the extra blank line redis-cli prints after them).
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    require_tool("redis-cli");
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running redis-cli");
    assert!(
        out.status.success(),
        "redis-cli {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_suffix('\n').unwrap_or(&text).to_owned()
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "corewire-kv-test-{}-{name}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating a temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn arg(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A RESP2 reply as the tests compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    pub fn bulk(s: &str) -> Reply {
        Reply::Bulk(Some(s.as_bytes().to_vec()))
    }

    pub fn nil() -> Reply {
        Reply::Bulk(None)
    }
}

/// Encodes a request as a RESP array of bulk strings.
pub fn request(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A raw RESP connection with timeouts.
pub struct Resp {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Resp {
    pub fn connect(port: u16) -> Resp {
        Resp::connect_addr(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
    }

    pub fn connect_addr(addr: std::net::SocketAddr) -> Resp {
        let stream = TcpStream::connect(addr).expect("connecting");
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Resp {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    pub fn call(&mut self, args: &[&str]) -> Reply {
        self.send(&request(args)).expect("sending a request");
        self.read().expect("reading a reply")
    }

    /// The next reply; `Err` on EOF or timeout.
    pub fn read(&mut self) -> std::io::Result<Reply> {
        loop {
            if let Some((reply, used)) = parse(&self.buf) {
                self.buf.drain(..used);
                return Ok(reply);
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Whether the server closed the connection (reads EOF or a reset within the timeout).
    pub fn is_closed_by_server(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_)) && self.buf.is_empty()
    }
}

/// One reply from the front of `buf` and its length, or `None` if incomplete.
fn parse(buf: &[u8]) -> Option<(Reply, usize)> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[1..line_end]).ok()?;
    let rest = line_end + 2;
    match buf.first()? {
        b'+' => Some((Reply::Simple(line.into()), rest)),
        b'-' => Some((Reply::Error(line.into()), rest)),
        b':' => Some((Reply::Int(line.parse().ok()?), rest)),
        b'$' => {
            let len: i64 = line.parse().ok()?;
            if len < 0 {
                return Some((Reply::Bulk(None), rest));
            }
            let len = len as usize;
            if buf.len() < rest + len + 2 {
                return None;
            }
            Some((
                Reply::Bulk(Some(buf[rest..rest + len].to_vec())),
                rest + len + 2,
            ))
        }
        b'*' => {
            let count: i64 = line.parse().ok()?;
            if count < 0 {
                return Some((Reply::Array(None), rest));
            }
            let mut items = Vec::new();
            let mut used = rest;
            for _ in 0..count {
                let (item, n) = parse(&buf[used..])?;
                items.push(item);
                used += n;
            }
            Some((Reply::Array(Some(items)), used))
        }
        other => panic!("not a RESP reply: byte {other:#x}"),
    }
}

/// Polls `check` until it returns true or `timeout` passes.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
