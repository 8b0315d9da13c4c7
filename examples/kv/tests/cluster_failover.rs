//! Redis Cluster with replicas across corewire-kv processes on 127.0.0.1: formed by
//! `redis-cli --cluster create --cluster-replicas 1` and `redis-cli --cluster add-node
//! --cluster-slave`, replicas in every view (CLUSTER NODES, SLOTS, SHARDS, REPLICAS),
//! READONLY reads, automatic failover of a killed primary (within 2 × node timeout + 2 s),
//! its return as a replica, and CLUSTER FAILOVER; a kill -9 under `redis-benchmark --cluster`
//! load with a redis-py `RedisCluster` writer (`tests/py/failover_writer.py`).

mod cluster_util;
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster_util::{require_redis_py_cluster, Cluster, ClusterClient, Node, CONVERGE, PYTHON};
use common::{eventually, Reply, Resp, TempDir};
use corewire_kv::routing::key_slot as local_key_slot;

/// The node timeout cluster_util starts nodes with.
const NODE_TIMEOUT: Duration = Duration::from_millis(2000);

/// The tests of this file one at a time: each runs a cluster of up to six nodes whose failure
/// detection and elections are bounded in time (the failover bound is 2 × the node timeout +
/// 2 s), and six of them at once on a 2-vCPU machine starve each other's cluster timers.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static CLUSTERS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CLUSTERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One line of CLUSTER NODES, split.
struct Line {
    id: String,
    port: u16,
    flags: String,
    primary: String,
    slots: Vec<String>,
}

fn lines(node: &Node) -> Vec<Line> {
    node.cli(&["CLUSTER", "NODES"])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            // A node met a moment ago can be listed before its address is known (Redis
            // shows `:0@0` then): it is not one of the nodes a test looks for yet.
            let port = f[1]
                .split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
                .filter(|&p: &u16| p != 0)?;
            Some(Line {
                id: f[0].to_owned(),
                port,
                flags: f[2].to_owned(),
                primary: f[3].to_owned(),
                slots: f[8..].iter().map(|s| s.to_string()).collect(),
            })
        })
        .collect()
}

fn is_replica(line: &Line) -> bool {
    line.flags.split(',').any(|f| f == "slave")
}

/// `(primary index, replica index)` pairs, from node 0's view.
fn pairs(cluster: &Cluster) -> Vec<(usize, usize)> {
    let index = |port: u16| cluster.nodes.iter().position(|n| n.port == port).unwrap();
    let view = lines(&cluster.nodes[0]);
    view.iter()
        .filter(|l| is_replica(l))
        .map(|r| {
            let p = view
                .iter()
                .find(|l| l.id == r.primary)
                .expect("known primary");
            (index(p.port), index(r.port))
        })
        .collect()
}

/// Every live node sees `primaries` primaries and `replicas` replicas, agreeing on who
/// replicates whom.
fn wait_roles(cluster: &Cluster, live: &[usize], primaries: usize, replicas: usize) {
    let agreed = eventually(CONVERGE, || {
        let views: Vec<Vec<(String, String)>> = live
            .iter()
            .map(|&i| {
                let mut roles: Vec<(String, String)> = lines(&cluster.nodes[i])
                    .into_iter()
                    .map(|l| {
                        let primary = if is_replica(&l) {
                            l.primary
                        } else {
                            "-".into()
                        };
                        (l.id, primary)
                    })
                    .collect();
                roles.sort();
                roles
            })
            .collect();
        views.iter().all(|v| v == &views[0])
            && views[0].iter().filter(|(_, p)| p == "-").count() == primaries
            && views[0].iter().filter(|(_, p)| p != "-").count() == replicas
    });
    assert!(
        agreed,
        "roles did not converge:\n{}",
        live.iter()
            .map(|&i| cluster.nodes[i].cli(&["CLUSTER", "NODES"]))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn info_field(node: &Node, field: &str) -> String {
    let info = node.cli(&["CLUSTER", "INFO"]);
    info.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(&format!("{field}:"))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no {field} in {info}"))
}

fn error(reply: Reply) -> String {
    match reply {
        Reply::Error(text) => text,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The error `node` answers `args` with.
fn refusal(node: &Node, args: &[&str]) -> String {
    error(Resp::connect(node.port).call(args))
}

/// A key whose slot the node at `port` owns (in `cluster`'s view from node `from`).
fn key_owned_by_port(cluster: &Cluster, from: usize, port: u16, suffix: &str) -> String {
    let owner_of = |slot: u16| {
        lines(&cluster.nodes[from]).into_iter().find(|l| {
            l.slots.iter().any(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
            })
        })
    };
    (0..)
        .map(|i| format!("{{f{i}}}{suffix}"))
        .find(|key| owner_of(local_key_slot(key.as_bytes())).is_some_and(|l| l.port == port))
        .expect("some tag lands on every primary")
}

#[test]
fn redis_cli_creates_primaries_with_replicas() {
    let _serial = one_at_a_time();
    let cluster = Cluster::create(6, 1, None, &[]);
    let all: Vec<usize> = (0..6).collect();
    wait_roles(&cluster, &all, 3, 3);
    let pairs = pairs(&cluster);
    assert_eq!(pairs.len(), 3);
    for node in &cluster.nodes {
        assert_eq!(info_field(node, "cluster_state"), "ok");
        assert_eq!(info_field(node, "cluster_size"), "3");
        assert_eq!(info_field(node, "cluster_known_nodes"), "6");
    }
    for &(p, r) in &pairs {
        let (primary, replica) = (&cluster.nodes[p], &cluster.nodes[r]);
        // CLUSTER REPLICAS / SLAVES: the replica's CLUSTER NODES line.
        let listed = replica.cli(&["CLUSTER", "REPLICAS", &primary.id()]);
        assert!(listed.starts_with(&replica.id()), "{listed}");
        assert!(listed.contains("slave"), "{listed}");
        assert_eq!(
            refusal(primary, &["CLUSTER", "SLAVES", &replica.id()]),
            "ERR The specified node is not a master"
        );
        // The replica's own view: its myself line.
        let me = lines(replica)
            .into_iter()
            .find(|l| l.flags.contains("myself"))
            .unwrap();
        assert_eq!(me.flags, "myself,slave");
        assert_eq!(me.primary, primary.id());
        assert!(me.slots.is_empty());
        // CLUSTER REPLICATE's refusals, in Redis's words.
        assert_eq!(
            refusal(replica, &["CLUSTER", "REPLICATE", &replica.id()]),
            "ERR Can't replicate myself"
        );
        assert_eq!(
            refusal(primary, &["CLUSTER", "REPLICATE", &"ab".repeat(20)]),
            format!("ERR Unknown node {}", "ab".repeat(20))
        );
        assert_eq!(
            refusal(primary, &["CLUSTER", "REPLICATE", &replica.id()]),
            "ERR I can only replicate a master, not a replica."
        );
        let other = pairs.iter().find(|(q, _)| *q != p).unwrap().0;
        assert_eq!(
            refusal(
                primary,
                &["CLUSTER", "REPLICATE", &cluster.nodes[other].id()]
            ),
            "ERR To set a master the node must be empty and without assigned slots."
        );
        assert_eq!(
            refusal(primary, &["CLUSTER", "FAILOVER"]),
            "ERR You should send CLUSTER FAILOVER to a replica"
        );
        assert_eq!(
            refusal(replica, &["CLUSTER", "FAILOVER", "SOON"]),
            "ERR syntax error"
        );
    }
    // CLUSTER SHARDS: a shard per primary, the primary then its replica.
    let shards = cluster.nodes[0].cli(&["CLUSTER", "SHARDS"]);
    let count = |word: &str| shards.lines().filter(|l| *l == word).count();
    assert_eq!((count("master"), count("replica")), (3, 3), "{shards}");
    // Restarted, a replica keeps its role (nodes.conf).
    let mut cluster = cluster;
    let (p, r) = pairs[0];
    let node = cluster.nodes.remove(r);
    let node = node.restart(false);
    cluster.nodes.insert(r, node);
    let me = lines(&cluster.nodes[r])
        .into_iter()
        .find(|l| l.flags.contains("myself"))
        .unwrap();
    assert_eq!(me.flags, "myself,slave");
    assert_eq!(me.primary, cluster.nodes[p].id());
    cluster.wait_consistent();
}

#[test]
fn readonly_clients_read_from_replicas() {
    let _serial = one_at_a_time();
    let cluster = Cluster::create(6, 1, None, &[]);
    let all: Vec<usize> = (0..6).collect();
    wait_roles(&cluster, &all, 3, 3);
    let (p, r) = pairs(&cluster)[0];
    let (primary, replica) = (&cluster.nodes[p], &cluster.nodes[r]);
    let key = key_owned_by_port(&cluster, 0, primary.port, ":ro");
    let slot = local_key_slot(key.as_bytes());
    let moved = format!("MOVED {slot} 127.0.0.1:{}", primary.port);
    let mut conn = Resp::connect(replica.port);
    assert_eq!(error(conn.call(&["GET", &key])), moved);
    assert_eq!(conn.call(&["READONLY"]), Reply::ok());
    assert!(
        matches!(conn.call(&["GET", &key]), Reply::Bulk(_)),
        "a READONLY client reads its primary's slots on the replica"
    );
    assert_eq!(
        error(conn.call(&["SET", &key, "v"])),
        moved,
        "writes always go to the primary"
    );
    // Another primary's slot: MOVED there even with READONLY.
    let other = pairs(&cluster)[1].0;
    let elsewhere = key_owned_by_port(&cluster, 0, cluster.nodes[other].port, ":ro");
    assert!(error(conn.call(&["GET", &elsewhere])).starts_with("MOVED"));
    assert_eq!(conn.call(&["READWRITE"]), Reply::ok());
    assert_eq!(error(conn.call(&["GET", &key])), moved);
}

#[test]
fn redis_cli_adds_a_replica() {
    let _serial = one_at_a_time();
    let mut cluster = Cluster::create(3, 0, None, &[]);
    let extra: Vec<Node> = (0..2)
        .map(|i| Node::start(TempDir::new(&format!("cluster-extra{i}")), 0, 0, &[]))
        .collect();
    // The primary with the fewest replicas, then a chosen one.
    let target = cluster.nodes[2].id();
    for (node, master) in extra.iter().zip([None, Some(target.clone())]) {
        let mut add = Command::new("redis-cli");
        add.args([
            "--cluster",
            "add-node",
            &node.addr(),
            &cluster.nodes[0].addr(),
            "--cluster-slave",
        ]);
        if let Some(id) = &master {
            add.args(["--cluster-master-id", id]);
        }
        let out = add
            .stdin(Stdio::null())
            .output()
            .expect("running redis-cli");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("[OK] New node added correctly."),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    cluster.nodes.extend(extra);
    let all: Vec<usize> = (0..5).collect();
    wait_roles(&cluster, &all, 3, 2);
    let pairs = pairs(&cluster);
    assert!(
        pairs.contains(&(2, 4)),
        "--cluster-master-id is honoured: {pairs:?}"
    );
    cluster.wait_consistent();
}

/// Waits until node `from` sees the node at `port` owning `slot` and the cluster is ok;
/// returns how long it took.
fn wait_owner(cluster: &Cluster, from: usize, slot: u16, port: u16, limit: Duration) -> Duration {
    let start = Instant::now();
    let owned = eventually(limit, || {
        lines(&cluster.nodes[from]).iter().any(|l| {
            l.port == port
                && !is_replica(l)
                && l.slots.iter().any(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
                })
        }) && info_field(&cluster.nodes[from], "cluster_state") == "ok"
    });
    assert!(
        owned,
        "node {from} does not see :{port} owning slot {slot} after {limit:?}:\n{}",
        cluster.nodes[from].cli(&["CLUSTER", "NODES"])
    );
    start.elapsed()
}

#[test]
fn a_killed_primary_is_replaced_by_its_replica() {
    let _serial = one_at_a_time();
    let mut cluster = Cluster::create(6, 1, None, &[]);
    let all: Vec<usize> = (0..6).collect();
    wait_roles(&cluster, &all, 3, 3);
    let (p, r) = pairs(&cluster)[0];
    let key = key_owned_by_port(&cluster, 0, cluster.nodes[p].port, ":k");
    let slot = local_key_slot(key.as_bytes());
    let survivor = (0..6).find(|&i| i != p && i != r).unwrap();
    let mut client = ClusterClient::connect(cluster.nodes[survivor].port);
    assert_eq!(client.call(slot, &["SET", &key, "before"]), Reply::ok());
    // Acknowledged by the replica before the primary dies.
    assert_eq!(client.call(slot, &["WAIT", "1", "5000"]), Reply::Int(1));

    cluster.nodes[p].server.kill9();
    let killed = Instant::now();
    // Full coverage is required: the slot is down until the replica takes it.
    let limit = NODE_TIMEOUT * 2 + Duration::from_secs(2);
    wait_owner(
        &cluster,
        survivor,
        slot,
        cluster.nodes[r].port,
        limit.saturating_sub(killed.elapsed()),
    );
    let took = killed.elapsed();
    assert!(
        took <= limit,
        "failover took {took:?}; the replica's log:\n{}",
        cluster.nodes[r].server.stderr()
    );
    for i in (0..6).filter(|&i| i != p) {
        wait_owner(&cluster, i, slot, cluster.nodes[r].port, CONVERGE);
    }
    let promoted = lines(&cluster.nodes[r])
        .into_iter()
        .find(|l| l.flags.contains("myself"))
        .unwrap();
    assert_eq!(promoted.flags, "myself,master");
    // Writes go to the new primary.
    client.refresh(cluster.nodes[survivor].port);
    assert_eq!(
        client.call(slot, &["GET", &key]),
        Reply::bulk("before"),
        "no acknowledged write is lost"
    );
    assert_eq!(client.call(slot, &["SET", &key, "after"]), Reply::ok());
    assert_eq!(client.call(slot, &["GET", &key]), Reply::bulk("after"));

    // The old primary comes back and finds its slots taken under a newer epoch: it
    // replicates the new owner.
    let node = cluster.nodes.remove(p);
    cluster.nodes.insert(p, node.restart(true));
    wait_roles(&cluster, &all, 3, 3);
    let old = lines(&cluster.nodes[p])
        .into_iter()
        .find(|l| l.flags.contains("myself"))
        .unwrap();
    assert_eq!(old.flags, "myself,slave");
    assert_eq!(old.primary, cluster.nodes[r].id());
    assert!(!cluster.nodes[0].cli(&["CLUSTER", "NODES"]).contains("fail"));
    cluster.wait_consistent();
}

#[test]
fn cluster_failover_switches_roles() {
    let _serial = one_at_a_time();
    let cluster = Cluster::create(6, 1, None, &[]);
    let all: Vec<usize> = (0..6).collect();
    wait_roles(&cluster, &all, 3, 3);
    let pairs = pairs(&cluster);
    let (p, r) = pairs[0];
    let key = key_owned_by_port(&cluster, 0, cluster.nodes[p].port, ":m");
    let slot = local_key_slot(key.as_bytes());
    // Planned: the primary pauses writes until the replica has its offset, so no write a
    // client saw acknowledged is lost while they keep coming.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, seed, key) = (stop.clone(), cluster.nodes[p].port, key.clone());
        std::thread::spawn(move || {
            let mut client = ClusterClient::connect(seed);
            let mut acked = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let reply = client.call(slot, &["SET", &format!("{key}{acked}"), "v"]);
                assert_eq!(reply, Reply::ok());
                acked += 1;
            }
            acked
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cluster.nodes[r].cli(&["CLUSTER", "FAILOVER"]), "OK");
    wait_owner(&cluster, 0, slot, cluster.nodes[r].port, CONVERGE);
    wait_roles(&cluster, &all, 3, 3);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked = writer.join().expect("writer");
    assert!(acked > 0);
    let mut reader = ClusterClient::connect(cluster.nodes[r].port);
    for i in 0..acked {
        let k = format!("{key}{i}");
        assert_eq!(
            reader.call(slot, &["GET", &k]),
            Reply::bulk("v"),
            "{k} of {acked} lost"
        );
    }
    let old = lines(&cluster.nodes[p])
        .into_iter()
        .find(|l| l.flags.contains("myself"))
        .unwrap();
    assert_eq!(
        old.primary,
        cluster.nodes[r].id(),
        "the old primary follows"
    );
    // And back, by TAKEOVER (no vote).
    assert_eq!(
        cluster.nodes[p].cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]),
        "OK"
    );
    wait_owner(&cluster, 0, slot, cluster.nodes[p].port, CONVERGE);
    wait_roles(&cluster, &all, 3, 3);
    // FORCE on another shard.
    let (q, s) = pairs[1];
    let key = key_owned_by_port(&cluster, 0, cluster.nodes[q].port, ":m");
    assert_eq!(
        cluster.nodes[s].cli(&["CLUSTER", "FAILOVER", "FORCE"]),
        "OK"
    );
    wait_owner(
        &cluster,
        0,
        local_key_slot(key.as_bytes()),
        cluster.nodes[s].port,
        CONVERGE,
    );
    wait_roles(&cluster, &all, 3, 3);
    cluster.wait_consistent();
}

/// A primary killed while `redis-benchmark --cluster` loads every node and redis-py's
/// `RedisCluster` writes: the client's writes stall for no longer than the failover takes,
/// every write a replica acknowledged (`WAIT 1`) is readable afterwards, and the old primary
/// returns as a replica while the load goes on.
#[test]
fn a_primary_killed_under_load_loses_no_acknowledged_write() {
    let _serial = one_at_a_time();
    require_redis_py_cluster();
    let mut cluster = Cluster::create(6, 1, None, &[]);
    let all: Vec<usize> = (0..6).collect();
    wait_roles(&cluster, &all, 3, 3);
    let (p, r) = pairs(&cluster)[0];
    let slot =
        local_key_slot(key_owned_by_port(&cluster, 0, cluster.nodes[p].port, ":l").as_bytes());
    let survivor = (0..6).find(|&i| i != p && i != r).unwrap();
    let seed = cluster.nodes[survivor].port.to_string();

    // The load: redis-benchmark's cluster mode against every primary. It gives up on the
    // connection the kill breaks (its clients do not reconnect), so a second one starts
    // after the failover. It runs niced: on two vCPUs a closed-loop generator at equal
    // priority would take the CPU the nodes' cluster timers need, and what is tested is
    // the nodes' failover under the requests they serve, not the scheduler.
    let bench = |seed: &str| {
        Command::new("nice")
            .args([
                "-n",
                "10",
                "redis-benchmark",
                "-p",
                seed,
                "--cluster",
                "-t",
                "set,get",
                "-r",
                "100000",
            ])
            .args(["-n", "100000000", "-c", "8", "-P", "4", "-q"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-benchmark (apt-get install redis-tools)")
    };
    let mut load = vec![bench(&seed)];
    let stop = TempDir::new("failover-writer");
    let stop_file = stop.path().join("stop");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/failover_writer.py");
    let writer = Command::new(PYTHON)
        .args([script, &seed, stop_file.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the redis-py writer");
    std::thread::sleep(Duration::from_millis(1500));

    cluster.nodes[p].server.kill9();
    let limit = NODE_TIMEOUT * 2 + Duration::from_secs(2);
    let took = wait_owner(&cluster, survivor, slot, cluster.nodes[r].port, limit);
    load.push(bench(&seed));
    std::thread::sleep(Duration::from_millis(1000));
    let node = cluster.nodes.remove(p);
    cluster.nodes.insert(p, node.restart(true));
    wait_roles(&cluster, &all, 3, 3);
    // Writes acknowledged by the returned node too.
    std::thread::sleep(Duration::from_millis(1000));
    std::fs::write(&stop_file, b"").unwrap();
    let out = writer.wait_with_output().expect("the redis-py writer");
    for mut bench in load {
        let _ = bench.kill();
        let _ = bench.wait();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "redis-py writer failed:\n{stdout}\n{stderr}"
    );
    let field = |name: &str| -> f64 {
        stdout
            .split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in the writer's output: {stdout}\n{stderr}"))
    };
    eprintln!("failover under load: slot owned again after {took:?}; writer: {stdout}");
    assert_eq!(field("missing"), 0.0, "acknowledged writes lost:\n{stderr}");
    assert!(
        field("acked") >= 10.0,
        "too few acknowledged writes: {stdout}"
    );
    assert!(
        field("failures") >= 1.0,
        "the writer never saw the kill: {stdout}"
    );
    // The client's own outage: the failover plus its slot-map refresh.
    let gap = field("longest_gap_s");
    assert!(
        gap <= (limit + Duration::from_secs(1)).as_secs_f64(),
        "writes stalled {gap} s (failover limit {limit:?}): {stdout}"
    );
    let new_primary = cluster.nodes[r].id();
    let follows = eventually(CONVERGE, || {
        lines(&cluster.nodes[p])
            .into_iter()
            .find(|l| l.flags.contains("myself"))
            .is_some_and(|l| l.flags == "myself,slave" && l.primary == new_primary)
    });
    assert!(
        follows,
        "the old primary does not follow {new_primary}:\n{}",
        cluster.nodes[p].cli(&["CLUSTER", "NODES"])
    );
    cluster.wait_consistent();
}
