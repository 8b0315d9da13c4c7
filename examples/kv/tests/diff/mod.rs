//! Differential testing against Debian's `redis-server` (the oracle): the same commands go to
//! a throw-away redis-server and to corewire-kv, and the replies must match, byte for byte
//! after a per-command normalisation (only where Redis itself promises no order, or where the
//! reply is random or time-dependent).
//!
//! A mismatch fails with the seed, the step, both replies and the commands leading to it;
//! `DIFF_SEED=<n>` replays one seed, `DIFF_STEPS=<n>` scales the scripts.

#![allow(dead_code)]

pub mod gen;
pub mod keyops;
pub mod resp;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use resp::V;

use crate::common::{self, require_tool, Server, TempDir};

const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A `redis-server` without persistence on a free loopback port; killed when dropped.
pub struct Oracle {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

impl Oracle {
    pub fn start() -> Oracle {
        require_tool("redis-server");
        let dir = TempDir::new("oracle");
        // The port is free when we look; another process may take it before redis binds, so
        // retry a few times rather than fail on a race.
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--dir", dir.arg(), "--protected-mode", "no"])
                .args(["--loglevel", "warning", "--daemonize", "no"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawning redis-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Oracle {
                        child,
                        port,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start (is the redis-server package installed?)");
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral port")
}

/// A raw RESP2/RESP3 connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, args: &[Vec<u8>]) {
        self.stream
            .write_all(&encode(args))
            .expect("sending a request");
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("sending bytes");
    }

    pub fn read(&mut self) -> V {
        self.try_read(IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("reading a reply: {e}"))
    }

    /// The next reply, or an error on EOF or when nothing complete arrives within `timeout`.
    pub fn try_read(&mut self, timeout: Duration) -> std::io::Result<V> {
        self.stream.set_read_timeout(Some(timeout))?;
        loop {
            if let Some((reply, used)) = resp::parse(&self.buf) {
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

    pub fn call(&mut self, args: &[Vec<u8>]) -> V {
        self.send(args);
        self.read()
    }

    pub fn call_str(&mut self, args: &[&str]) -> V {
        self.call(
            &args
                .iter()
                .map(|a| a.as_bytes().to_vec())
                .collect::<Vec<_>>(),
        )
    }
}

pub fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// How two replies to the same command are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// Identical replies.
    Exact,
    /// An array (or set) whose order Redis does not define: compared as a multiset.
    Unordered,
    /// A flat array of pairs (HGETALL, CONFIG GET, a map): compared as a multiset of pairs.
    UnorderedPairs,
    /// A scan reply `[cursor, items]` run to completion by the caller; never compared here.
    Scan,
    /// TTL/PTTL: negative values exactly, positive ones within `tolerance` (clocks move).
    Ttl { tolerance: i64 },
    /// The reply is random (SPOP, SRANDMEMBER...): only its type and size are compared.
    SameShape,
    /// Both replies are read and ignored (a command whose result differs by design).
    Ignore,
}

pub struct Step {
    pub args: Vec<Vec<u8>>,
    pub cmp: Cmp,
}

impl Step {
    pub fn new(args: Vec<Vec<u8>>, cmp: Cmp) -> Step {
        Step { args, cmp }
    }
}

pub fn args(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// One connection to each server, driven in lockstep.
pub struct Pair {
    pub redis: Conn,
    pub kv: Conn,
    pub label: String,
    history: VecDeque<String>,
    pub steps: usize,
    /// Per command name: replies that were not errors, and errors (coverage report).
    pub tally: std::collections::BTreeMap<String, (usize, usize)>,
}

impl Pair {
    pub fn new(oracle: &Oracle, server: &Server, label: impl Into<String>) -> Pair {
        Pair {
            redis: Conn::connect(oracle.port),
            kv: Conn::connect(server.port),
            label: label.into(),
            history: VecDeque::new(),
            steps: 0,
            tally: Default::default(),
        }
    }

    /// Sends `args` to both servers and compares the replies; returns the oracle's reply.
    pub fn check(&mut self, args: &[Vec<u8>], cmp: Cmp) -> V {
        self.steps += 1;
        self.remember(args);
        let expected = self.redis.call(args);
        let actual = self.kv.call(args);
        if !agree(&expected, &actual, cmp) {
            self.fail(args, &expected, &actual, cmp);
        }
        let name = String::from_utf8_lossy(args.first().map_or(&[][..], |a| a)).to_uppercase();
        let entry = self.tally.entry(name).or_default();
        if expected.is_error() {
            entry.1 += 1;
        } else {
            entry.0 += 1;
        }
        expected
    }

    pub fn check_str(&mut self, parts: &[&str]) -> V {
        self.check(&args(parts), Cmp::Exact)
    }

    pub fn run(&mut self, step: &Step) -> V {
        self.check(&step.args, step.cmp)
    }

    fn remember(&mut self, args: &[Vec<u8>]) {
        if self.history.len() == 30 {
            self.history.pop_front();
        }
        self.history.push_back(show_args(args));
    }

    fn fail(&self, args: &[Vec<u8>], expected: &V, actual: &V, cmp: Cmp) -> ! {
        let history: Vec<&str> = self.history.iter().map(String::as_str).collect();
        panic!(
            "[{}] step {}: {} ({cmp:?})\n  redis-server: {}\n  corewire-kv:  {}\nlast commands:\n  {}",
            self.label,
            self.steps,
            show_args(args),
            expected.show(),
            actual.show(),
            history.join("\n  ")
        );
    }
}

impl Pair {
    /// Prints how often each command ran and how often it failed (see with --nocapture).
    pub fn report(&self) {
        let lines: Vec<String> = self
            .tally
            .iter()
            .map(|(name, (ok, err))| format!("{name} {ok}/{err}"))
            .collect();
        println!(
            "[{}] {} steps, ok/error per command: {}",
            self.label,
            self.steps,
            lines.join(", ")
        );
    }
}

pub fn show_args(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| resp::show_bytes(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether two replies agree under `cmp`.
pub fn agree(expected: &V, actual: &V, cmp: Cmp) -> bool {
    match cmp {
        Cmp::Exact => expected == actual,
        Cmp::Ignore | Cmp::Scan => true,
        Cmp::Unordered => match (expected.items(), actual.items()) {
            (Some(e), Some(a)) => {
                expected.kind() == actual.kind() && sorted(e.to_vec()) == sorted(a.to_vec())
            }
            _ => expected == actual,
        },
        Cmp::UnorderedPairs => match (expected.pairs(), actual.pairs()) {
            (Some(e), Some(a)) => expected.kind() == actual.kind() && sorted(e) == sorted(a),
            _ => expected == actual,
        },
        Cmp::Ttl { tolerance } => match (expected, actual) {
            (V::Int(e), V::Int(a)) if *e >= 0 && *a >= 0 => (e - a).abs() <= tolerance,
            _ => expected == actual,
        },
        Cmp::SameShape => match (expected.items(), actual.items()) {
            (Some(e), Some(a)) => expected.kind() == actual.kind() && e.len() == a.len(),
            _ => match (expected, actual) {
                (V::Bulk(_), V::Bulk(_)) => true,
                _ => expected == actual,
            },
        },
    }
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// A scan command (`SCAN`, `HSCAN k`, ...) run to completion on one connection: every item
/// returned, in order of arrival. `prefix` is the command up to the cursor, `suffix` the
/// options after it. `Err` carries a reply that is not a scan page.
pub fn scan_all(conn: &mut Conn, prefix: &[Vec<u8>], suffix: &[Vec<u8>]) -> Result<Vec<V>, V> {
    let mut cursor = b"0".to_vec();
    let mut items = Vec::new();
    for _ in 0..100_000 {
        let mut request = prefix.to_vec();
        request.push(cursor.clone());
        request.extend_from_slice(suffix);
        let reply = conn.call(&request);
        let Some([V::Bulk(next), page]) = reply
            .items()
            .and_then(|i| <&[V; 2]>::try_from(i).ok())
            .cloned()
        else {
            return Err(reply);
        };
        items.extend(page.items().unwrap_or_default().iter().cloned());
        if next == b"0" {
            return Ok(items);
        }
        cursor = next;
    }
    panic!("scan {} never finished", show_args(prefix));
}

/// Starts the oracle and a corewire-kv with `shards` shards.
pub fn servers(shards: usize, extra: &[&str]) -> (Oracle, Server) {
    let oracle = Oracle::start();
    let shards = shards.to_string();
    let mut args = vec!["--shards", &shards];
    args.extend_from_slice(extra);
    (oracle, common::Server::start(&args))
}

/// The seeds to run: `DIFF_SEED` alone if set, else `defaults`.
pub fn seeds(defaults: &[u64]) -> Vec<u64> {
    match std::env::var("DIFF_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => defaults.to_vec(),
    }
}

/// `base` scaled by `DIFF_STEPS` / 1000 (default 1).
pub fn steps(base: usize) -> usize {
    match std::env::var("DIFF_STEPS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    {
        Some(n) => base * n / 1000,
        None => base,
    }
}
