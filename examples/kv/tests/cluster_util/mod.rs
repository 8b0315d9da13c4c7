//! A corewire-kv cluster on 127.0.0.1 for the cluster tests: nodes started as child
//! processes on free ports, joined with `redis-cli --cluster create`, and a small cluster
//! client that follows MOVED and ASK the way cluster clients do.

#![allow(dead_code)]

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{redis_cli, require_tool, Reply, Resp, Server, TempDir};

/// How long a cluster may take to agree on its configuration.
pub const CONVERGE: Duration = Duration::from_secs(30);

/// One node: its process, its ports and its own directory (`nodes.conf`, AOF), which
/// outlives restarts.
pub struct Node {
    pub server: Server,
    pub port: u16,
    pub bus_port: u16,
    pub dir: TempDir,
    args: Vec<String>,
}

impl Node {
    /// Starts a node; `port`/`bus_port` 0 pick free ports.
    pub fn start(dir: TempDir, port: u16, bus_port: u16, extra: &[&str]) -> Node {
        let conf = dir.path().join("nodes.conf");
        let mut args: Vec<String> = [
            "--shards",
            "2",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            conf.to_str().expect("utf-8 path"),
            "--cluster-node-timeout",
            "2000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut full = args.clone();
        full.extend([
            "--port".into(),
            port.to_string(),
            "--cluster-port".into(),
            bus_port.to_string(),
        ]);
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let server = start_retrying(&refs);
        let port = server.port;
        let bus_port = myself_line(port)
            .split_whitespace()
            .nth(1)
            .and_then(|addr| addr.split('@').nth(1))
            .and_then(|cport| cport.parse().ok())
            .expect("bus port in CLUSTER NODES");
        Node {
            server,
            port,
            bus_port,
            dir,
            args,
        }
    }

    /// SIGTERM (or SIGKILL with `kill`), then the same node again: same ports, same files.
    pub fn restart(self, kill: bool) -> Node {
        let Node {
            mut server,
            port,
            bus_port,
            dir,
            args,
        } = self;
        if kill {
            server.kill9();
        } else {
            server.stop();
        }
        drop(server);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        Node::start(dir, port, bus_port, &refs)
    }

    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(self.port, args)
    }

    pub fn id(&self) -> String {
        self.cli(&["CLUSTER", "MYID"])
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// Starts a server, retrying while its port is still held: the kernel tears a killed
/// process's io_uring down asynchronously, and a listening socket an accept was pending on
/// can outlive the process for a moment.
pub fn start_retrying(args: &[&str]) -> Server {
    let deadline = Instant::now() + CONVERGE;
    loop {
        match Server::try_start(args) {
            Ok(server) => return server,
            Err(why) if why.contains("Address already in use") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(why) => panic!("server did not start: {why}"),
        }
    }
}

/// This node's own line of CLUSTER NODES. A replica that has just started may be loading its
/// primary's snapshot, and CLUSTER NODES is not a `loading` command (in Redis either): while
/// it answers LOADING, ask again.
pub fn myself_line(port: u16) -> String {
    let deadline = Instant::now() + CONVERGE;
    loop {
        let nodes = redis_cli(port, &["CLUSTER", "NODES"]);
        if let Some(line) = nodes.lines().find(|l| l.contains("myself")) {
            return line.to_owned();
        }
        if !nodes.starts_with("LOADING") || Instant::now() >= deadline {
            panic!("no myself line from :{port}: {nodes}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub struct Cluster {
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// `n` nodes joined with `redis-cli --cluster create` (slots split evenly, no replicas),
    /// waited for until `redis-cli --cluster check` passes on every node. `aof`: each node
    /// logs to its own directory with this fsync policy.
    pub fn start(n: usize, aof: Option<&str>) -> Cluster {
        Cluster::create(n, 0, aof, &[])
    }

    /// `n` nodes, `replicas` of them per primary (`redis-cli --cluster create
    /// --cluster-replicas`), each started with `extra` arguments too.
    pub fn create(n: usize, replicas: usize, aof: Option<&str>, extra: &[&str]) -> Cluster {
        require_tool("redis-cli");
        let nodes: Vec<Node> = (0..n)
            .map(|i| {
                let dir = TempDir::new(&format!("cluster-node{i}"));
                let aof_dir = dir.path().join("aof");
                let aof_dir = aof_dir.to_str().expect("utf-8 path").to_owned();
                let mut args: Vec<&str> = match aof {
                    Some(fsync) => vec!["--aof", &aof_dir, "--fsync", fsync],
                    None => Vec::new(),
                };
                args.extend_from_slice(extra);
                Node::start(dir, 0, 0, &args)
            })
            .collect();
        let cluster = Cluster { nodes };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(node.addr());
        }
        if replicas > 0 {
            create.arg("--cluster-replicas").arg(replicas.to_string());
        }
        let out = create
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()
            .expect("running redis-cli --cluster create");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("[OK] All 16384 slots covered."),
            "redis-cli --cluster create failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_consistent();
        cluster
    }

    /// `redis-cli --cluster check` through every node: they agree and cover every slot.
    pub fn check(&self) -> Result<(), String> {
        for node in &self.nodes {
            let out = Command::new("redis-cli")
                .args(["--cluster", "check", &node.addr()])
                .stdin(Stdio::null())
                .output()
                .expect("running redis-cli --cluster check");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let ok = out.status.success()
                && stdout.contains("[OK] All nodes agree about slots configuration.")
                && stdout.contains("[OK] All 16384 slots covered.")
                && !stdout.contains("[WARNING]")
                && !stdout.contains("[ERR]");
            if !ok {
                return Err(stdout);
            }
        }
        Ok(())
    }

    pub fn wait_consistent(&self) {
        let deadline = Instant::now() + CONVERGE;
        loop {
            match self.check() {
                Ok(()) => return,
                Err(out) if Instant::now() > deadline => {
                    panic!("cluster did not converge in {CONVERGE:?}:\n{out}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The index of the node owning `slot`, from the first node's CLUSTER NODES.
    pub fn owner_of_slot(&self, slot: u16) -> usize {
        let nodes = self.nodes[0].cli(&["CLUSTER", "NODES"]);
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let owns = fields[8..].iter().any(|range| {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                match (a.parse::<u16>(), b.parse::<u16>()) {
                    (Ok(a), Ok(b)) => (a..=b).contains(&slot),
                    _ => false,
                }
            });
            if owns {
                let port: u16 = fields[1]
                    .split('@')
                    .next()
                    .and_then(|a| a.rsplit(':').next())
                    .and_then(|p| p.parse().ok())
                    .expect("port in CLUSTER NODES");
                return self
                    .nodes
                    .iter()
                    .position(|n| n.port == port)
                    .expect("owner is one of our nodes");
            }
        }
        panic!("slot {slot} has no owner:\n{nodes}")
    }
}

/// `CLUSTER KEYSLOT key`, asked of a node.
pub fn key_slot(port: u16, key: &str) -> u16 {
    redis_cli(port, &["CLUSTER", "KEYSLOT", key])
        .parse()
        .expect("CLUSTER KEYSLOT answers an integer")
}

/// A cluster client as cluster-aware libraries behave: slot map from CLUSTER SLOTS, MOVED
/// updates it, ASK sends ASKING then the command to the named node once, TRYAGAIN retries.
pub struct ClusterClient {
    conns: HashMap<u16, Resp>,
    slots: Vec<u16>,
    /// Redirections followed, by kind.
    pub moved: u64,
    pub asked: u64,
    pub tryagain: u64,
}

impl ClusterClient {
    pub fn connect(seed: u16) -> ClusterClient {
        let mut client = ClusterClient {
            conns: HashMap::new(),
            slots: vec![seed; 16384],
            moved: 0,
            asked: 0,
            tryagain: 0,
        };
        client.refresh(seed);
        client
    }

    fn conn(&mut self, port: u16) -> &mut Resp {
        self.conns
            .entry(port)
            .or_insert_with(|| Resp::connect(port))
    }

    /// Reloads the slot map from CLUSTER SLOTS.
    pub fn refresh(&mut self, port: u16) {
        let Reply::Array(Some(ranges)) = self.conn(port).call(&["CLUSTER", "SLOTS"]) else {
            panic!("CLUSTER SLOTS did not answer an array");
        };
        for range in ranges {
            let Reply::Array(Some(fields)) = range else {
                panic!("bad CLUSTER SLOTS entry");
            };
            let (Reply::Int(start), Reply::Int(end), Reply::Array(Some(owner))) =
                (&fields[0], &fields[1], &fields[2])
            else {
                panic!("bad CLUSTER SLOTS entry {fields:?}");
            };
            let Reply::Int(owner_port) = owner[1] else {
                panic!("bad CLUSTER SLOTS node {owner:?}");
            };
            for slot in *start..=*end {
                self.slots[slot as usize] = owner_port as u16;
            }
        }
    }

    /// Runs a command on `key`'s node, following redirections (at most 16).
    pub fn call(&mut self, slot: u16, args: &[&str]) -> Reply {
        let mut port = self.slots[usize::from(slot)];
        let mut asking = false;
        for _ in 0..16 {
            let conn = self.conn(port);
            let reply = if asking {
                conn.send(&crate::common::request(&["ASKING"]))
                    .expect("sending ASKING");
                conn.send(&crate::common::request(args))
                    .expect("sending a request");
                let asked = conn.read().expect("reading ASKING's reply");
                assert_eq!(asked, Reply::ok());
                conn.read().expect("reading a reply")
            } else {
                conn.call(args)
            };
            asking = false;
            let Reply::Error(text) = &reply else {
                return reply;
            };
            let mut words = text.split(' ');
            match words.next() {
                Some("MOVED") => {
                    self.moved += 1;
                    let target = target_port(words.nth(1));
                    self.slots[usize::from(slot)] = target;
                    port = target;
                }
                Some("ASK") => {
                    self.asked += 1;
                    port = target_port(words.nth(1));
                    asking = true;
                }
                Some("TRYAGAIN") => {
                    self.tryagain += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => return reply,
            }
        }
        panic!("more than 16 redirections for {args:?}")
    }
}

fn target_port(endpoint: Option<&str>) -> u16 {
    endpoint
        .and_then(|e| e.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .expect("ip:port in a redirection")
}

/// Debian's interpreter, where `python3-redis` installs (a `python3` earlier in `PATH`,
/// from pyenv or a venv, may not have it).
pub const PYTHON: &str = "/usr/bin/python3";

/// Fails, saying how to get it, unless [`PYTHON`] has redis-py's cluster client.
pub fn require_redis_py_cluster() {
    let has_redis_py = Command::new(PYTHON)
        .args(["-c", "import redis.cluster"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_redis_py,
        "{PYTHON} cannot import redis.cluster: install Debian's python3-redis \
         (`cargo xtask setup` does)"
    );
}
