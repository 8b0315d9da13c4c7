//! Redis Cluster across three corewire-kv processes on 127.0.0.1, formed by
//! `redis-cli --cluster create` and driven by stock tools (`redis-cli -c`,
//! `redis-cli --cluster check|reshard`, `redis-benchmark --cluster`) and by a cluster client
//! that follows MOVED and ASK.

mod cluster_util;
mod common;

use std::collections::HashMap;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use cluster_util::{key_slot, myself_line, Cluster, ClusterClient, CONVERGE};
use common::{eventually, redis_cli, require_tool, Reply, Resp, Server};
use corewire_kv::routing::key_slot as local_key_slot;

fn error(reply: Reply) -> String {
    match reply {
        Reply::Error(text) => text,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A key (a `{tag}` and a suffix) whose slot node `owner` of `cluster` owns, found by trying
/// tags.
fn key_owned_by(cluster: &Cluster, owner: usize, suffix: &str) -> String {
    (0..)
        .map(|i| format!("{{t{i}}}{suffix}"))
        .find(|key| cluster.owner_of_slot(local_key_slot(key.as_bytes())) == owner)
        .expect("some tag lands on every node")
}

#[test]
fn cluster_create_redirects_and_stock_tools() {
    let cluster = Cluster::start(3, None);
    let ports = cluster.ports();
    let info = cluster.nodes[0].cli(&["CLUSTER", "INFO"]);
    for field in [
        "cluster_state:ok",
        "cluster_slots_assigned:16384",
        "cluster_known_nodes:3",
        "cluster_size:3",
    ] {
        assert!(info.contains(field), "{field} missing from:\n{info}");
    }
    assert!(cluster.nodes[1]
        .cli(&["INFO", "cluster"])
        .contains("cluster_enabled:1"));

    // MOVED: "foo" is in slot 12182, asked of a node that does not own it.
    let owner = cluster.owner_of_slot(12182);
    let other = (owner + 1) % 3;
    let third = (owner + 2) % 3;
    assert_eq!(key_slot(ports[other], "foo"), 12182);
    let mut raw = Resp::connect(ports[other]);
    assert_eq!(
        error(raw.call(&["GET", "foo"])),
        format!("MOVED 12182 127.0.0.1:{}", ports[owner])
    );
    // Redirected before its own syntax is looked at, as Redis does.
    assert!(error(raw.call(&["SET", "foo", "v", "BOGUS"])).starts_with("MOVED 12182"));

    // redis-cli -c follows it.
    let cli_c = |port: u16, args: &[&str]| {
        let mut full = vec!["-c"];
        full.extend_from_slice(args);
        redis_cli(port, &full)
    };
    assert_eq!(cli_c(ports[other], &["SET", "foo", "bar"]), "OK");
    assert_eq!(cli_c(ports[third], &["GET", "foo"]), "bar");
    assert_eq!(cluster.nodes[owner].cli(&["GET", "foo"]), "bar");
    for i in 0..30 {
        let key = format!("key:{i}");
        assert_eq!(cli_c(ports[i % 3], &["SET", &key, &i.to_string()]), "OK");
    }
    for i in 0..30 {
        let key = format!("key:{i}");
        assert_eq!(cli_c(ports[(i + 1) % 3], &["GET", &key]), i.to_string());
    }

    // CROSSSLOT, and hash tags keeping keys together.
    assert_eq!(
        error(raw.call(&["MSET", "a", "1", "b", "2"])),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(
        error(raw.call(&["MGET", "a", "b"])),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    let mut client = ClusterClient::connect(ports[0]);
    let slot = local_key_slot(b"user1");
    assert_eq!(key_slot(ports[0], "{user1}:a"), slot);
    assert_eq!(
        client.call(slot, &["MSET", "{user1}:a", "1", "{user1}:b", "2"]),
        Reply::ok()
    );
    assert_eq!(
        client.call(slot, &["MGET", "{user1}:a", "{user1}:b"]),
        Reply::Array(Some(vec![Reply::bulk("1"), Reply::bulk("2")]))
    );
    assert_eq!(
        client.call(slot, &["DEL", "{user1}:a", "{user1}:b"]),
        Reply::Int(2)
    );
    assert_eq!(
        client.call(slot, &["MSET", "{user1}:a", "1", "{user1}:b", "2"]),
        Reply::ok()
    );
    let holder = &cluster.nodes[cluster.owner_of_slot(slot)];
    assert_eq!(
        holder.cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]),
        "2"
    );
    let mut listed: Vec<String> = holder
        .cli(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "10"])
        .lines()
        .map(str::to_owned)
        .collect();
    listed.sort();
    assert_eq!(listed, ["{user1}:a", "{user1}:b"]);

    // SELECT as Redis Cluster: only database 0.
    assert_eq!(
        error(raw.call(&["SELECT", "1"])),
        "ERR SELECT is not allowed in cluster mode"
    );
    assert_eq!(raw.call(&["SELECT", "0"]), Reply::ok());
    assert_eq!(raw.call(&["READONLY"]), Reply::ok());
    assert_eq!(raw.call(&["READWRITE"]), Reply::ok());

    // CLUSTER SLOTS and SHARDS: three owners covering everything.
    let Reply::Array(Some(slots)) = raw.call(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS is an array");
    };
    assert_eq!(slots.len(), 3);
    let Reply::Array(Some(shards)) = raw.call(&["CLUSTER", "SHARDS"]) else {
        panic!("CLUSTER SHARDS is an array");
    };
    assert_eq!(shards.len(), 3);

    // redis-benchmark --cluster.
    require_tool("redis-benchmark");
    let out = Command::new("redis-benchmark")
        .args(["--cluster", "-p", &ports[0].to_string()])
        .args(["-t", "set,get", "-n", "20000", "-c", "10", "--csv"])
        .stdin(Stdio::null())
        .output()
        .expect("running redis-benchmark --cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "redis-benchmark --cluster failed:\n{stdout}\n{stderr}"
    );
    for test in ["SET", "GET"] {
        let rps: f64 = stdout
            .lines()
            .find(|line| line.starts_with(&format!("\"{test}\"")))
            .and_then(|line| line.split('"').nth(3))
            .and_then(|rps| rps.parse().ok())
            .unwrap_or_else(|| panic!("no {test} result in:\n{stdout}\n{stderr}"));
        assert!(rps > 0.0, "{stdout}");
    }
    // The benchmark wrote on every node (it tags its keys per node).
    for node in &cluster.nodes {
        let keys: u64 = node.cli(&["DBSIZE"]).parse().unwrap();
        assert!(keys > 0, "no keys on :{}", node.port);
    }
    cluster.check().expect("still consistent");
}

#[test]
fn a_restarted_node_keeps_its_id_slots_and_data() {
    let mut cluster = Cluster::start(3, Some("everysec"));
    let mut client = ClusterClient::connect(cluster.ports()[0]);
    let keys: Vec<String> = (0..300).map(|i| format!("restart:{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        let slot = local_key_slot(key.as_bytes());
        assert_eq!(
            client.call(slot, &["SET", key, &i.to_string()]),
            Reply::ok()
        );
    }
    let before = myself_line(cluster.ports()[1]);
    let fields = |line: &str| -> (String, String, Vec<String>) {
        let f: Vec<&str> = line.split_whitespace().collect();
        (
            f[0].into(),
            f[6].into(),
            f[8..].iter().map(|s| s.to_string()).collect(),
        )
    };

    // A clean stop writes everything; a SIGKILL keeps the configuration (saved and synced
    // before every change is acknowledged).
    for kill in [false, true] {
        let node = cluster.nodes.remove(1);
        cluster.nodes.insert(1, node.restart(kill));
        let after = myself_line(cluster.ports()[1]);
        assert_eq!(fields(&after), fields(&before), "kill={kill}");
        cluster.wait_consistent();
    }
    let mut client = ClusterClient::connect(cluster.ports()[2]);
    for (i, key) in keys.iter().enumerate() {
        let slot = local_key_slot(key.as_bytes());
        assert_eq!(
            client.call(slot, &["GET", key]),
            Reply::bulk(&i.to_string())
        );
    }
}

/// Keys whose slots are below `limit`, `per_slot` for each slot, as `{tag}suffix`.
fn keys_in_low_slots(limit: u16, per_slot: usize) -> HashMap<u16, Vec<String>> {
    let mut by_slot: HashMap<u16, Vec<String>> = HashMap::new();
    let mut tag = 0u64;
    while by_slot.len() < usize::from(limit) || by_slot.values().any(|k| k.len() < per_slot) {
        let key = format!("{{m{tag}}}");
        tag += 1;
        let slot = local_key_slot(key.as_bytes());
        if slot < limit {
            let keys = by_slot.entry(slot).or_default();
            if keys.len() < per_slot {
                keys.push(key);
            }
        }
    }
    by_slot
}

#[test]
fn slots_move_under_load_without_losing_or_duplicating_a_write() {
    const MOVED_SLOTS: u16 = 40;
    let cluster = Cluster::start(3, Some("always"));
    let ports = cluster.ports();
    // redis-cli reshard takes the source's lowest slots: 0..MOVED_SLOTS of the node owning 0.
    let source = cluster.owner_of_slot(0);
    let target = (source + 1) % 3;
    let data = keys_in_low_slots(MOVED_SLOTS, 12);
    let mut client = ClusterClient::connect(ports[0]);
    for (slot, keys) in &data {
        for key in keys {
            assert_eq!(client.call(*slot, &["SET", key, key]), Reply::ok());
        }
    }

    // The writer: INCR on counters in the moving slots (each reply must be exactly the
    // number of increments acknowledged before it: a lost or doubled write shows at once)
    // and SETs of new keys there.
    let counters: Vec<(u16, String)> = data
        .iter()
        .map(|(slot, keys)| (*slot, format!("{}counter", keys[0])))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    // Full rounds over every counter the writer has finished: progress to wait on, instead
    // of sleeping and hoping the writer got the CPU meanwhile.
    let rounds = Arc::new(AtomicU64::new(0));
    let writer = {
        let stop = stop.clone();
        let rounds = rounds.clone();
        let counters = counters.clone();
        let seed = ports[2];
        thread::spawn(move || {
            let mut client = ClusterClient::connect(seed);
            let mut acked: HashMap<String, i64> = HashMap::new();
            let mut created = Vec::new();
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for (slot, counter) in &counters {
                    let expected = acked.get(counter).copied().unwrap_or(0) + 1;
                    match client.call(*slot, &["INCR", counter]) {
                        Reply::Int(n) => assert_eq!(n, expected, "INCR {counter}"),
                        other => panic!("INCR {counter}: {other:?}"),
                    }
                    acked.insert(counter.clone(), expected);
                    let fresh = format!("{}new{round}", &counter[..counter.len() - 7]);
                    assert_eq!(client.call(*slot, &["SET", &fresh, "x"]), Reply::ok());
                    created.push((*slot, fresh));
                }
                round += 1;
                rounds.store(round, Ordering::Relaxed);
            }
            (acked, created, client.moved + client.asked)
        })
    };

    // A writer that stopped early has panicked: its join below says why.
    let rounds_done = || rounds.load(Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(60), || rounds_done() >= 3
            || writer.is_finished()),
        "the writer made no progress before the reshard"
    );
    let from = cluster.nodes[source].id();
    let to = cluster.nodes[target].id();
    let out = Command::new("redis-cli")
        .args(["--cluster", "reshard", &cluster.nodes[source].addr()])
        .args(["--cluster-from", &from, "--cluster-to", &to])
        .args(["--cluster-slots", &MOVED_SLOTS.to_string(), "--cluster-yes"])
        .args(["--cluster-pipeline", "5"])
        .stdin(Stdio::null())
        .output()
        .expect("running redis-cli --cluster reshard");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !stdout.contains("[ERR]"),
        "reshard failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Two more full rounds after the reshard: each moved slot's counter is then written at
    // least once more through a slot map that still names the source, so the writer must
    // have been redirected (a MOVED now, or an ASK during the migration).
    let after_reshard = rounds_done();
    assert!(
        eventually(Duration::from_secs(60), || rounds_done()
            >= after_reshard + 2
            || writer.is_finished()),
        "the writer made no progress after the reshard"
    );
    stop.store(true, Ordering::Relaxed);
    let (acked, created, redirects) = writer.join().expect("the writer saw no anomaly");
    assert!(redirects > 0, "the writer never met the moved slots");
    cluster.wait_consistent();

    // Everything is on the target, once.
    for slot in 0..MOVED_SLOTS {
        assert_eq!(cluster.owner_of_slot(slot), target);
        let count = |node: usize| -> usize {
            cluster.nodes[node]
                .cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
                .parse()
                .unwrap()
        };
        assert_eq!(count(source), 0, "slot {slot} left keys on the source");
        let expected = data[&slot].len() + 1 + created.iter().filter(|(s, _)| *s == slot).count();
        assert_eq!(count(target), expected, "slot {slot} on the target");
    }
    let mut reader = ClusterClient::connect(ports[source]);
    for (slot, counter) in &counters {
        assert_eq!(
            reader.call(*slot, &["GET", counter]),
            Reply::bulk(&acked[counter].to_string())
        );
    }
    for (slot, keys) in &data {
        for key in keys {
            assert_eq!(reader.call(*slot, &["GET", key]), Reply::bulk(key));
        }
    }
    for (slot, key) in &created {
        assert_eq!(reader.call(*slot, &["GET", key]), Reply::bulk("x"));
    }
}

#[test]
fn a_killed_node_fails_only_its_own_slots() {
    // Without replicas nobody takes the dead node's slots; without full coverage required
    // the cluster keeps serving the others (see cluster_failover.rs for the default).
    let mut cluster = Cluster::create(3, 0, None, &["--cluster-require-full-coverage", "no"]);
    let ports = cluster.ports();
    let keys: Vec<String> = (0..3).map(|n| key_owned_by(&cluster, n, ":k")).collect();
    let mut client = ClusterClient::connect(ports[0]);
    for key in &keys {
        let slot = local_key_slot(key.as_bytes());
        assert_eq!(client.call(slot, &["SET", key, "v"]), Reply::ok());
    }
    let dead_id = cluster.nodes[2].id();
    cluster.nodes[2].server.kill9();

    // Its slots: the others still name it (no failover), and it refuses connections.
    let dead_slot = local_key_slot(keys[2].as_bytes());
    let mut raw = Resp::connect(ports[0]);
    assert_eq!(
        error(raw.call(&["GET", &keys[2]])),
        format!("MOVED {dead_slot} 127.0.0.1:{}", ports[2])
    );
    // (The kernel tears a dead process's io_uring down asynchronously; until then its
    // listening socket may still complete handshakes nobody accepts.)
    let refused = eventually(CONVERGE, || {
        TcpStream::connect(("127.0.0.1", ports[2]))
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    assert!(refused, "the killed node's port still answers");

    // The other slots keep serving, reads and writes.
    for key in &keys[..2] {
        let slot = local_key_slot(key.as_bytes());
        assert_eq!(client.call(slot, &["GET", key]), Reply::bulk("v"));
        assert_eq!(client.call(slot, &["SET", key, "w"]), Reply::ok());
    }
    // And the survivors notice (node timeout 2 s): two of three primaries agree it failed:
    // `fail`, disconnected.
    assert!(
        eventually(CONVERGE, || {
            let nodes = cluster.nodes[0].cli(&["CLUSTER", "NODES"]);
            nodes.lines().any(|l| {
                l.starts_with(&dead_id) && l.contains("master,fail ") && l.contains("disconnected")
            })
        }),
        "{}",
        cluster.nodes[0].cli(&["CLUSTER", "NODES"])
    );
    // Every survivor counts the dead node's slots as failed, and stays up (no replica to
    // take over: the cluster keeps serving the slots it can).
    for node in &cluster.nodes[..2] {
        let failed = |info: &str| -> u32 {
            info.lines()
                .find_map(|l| l.trim().strip_prefix("cluster_slots_fail:"))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no cluster_slots_fail in {info}"))
        };
        assert!(
            eventually(CONVERGE, || failed(&node.cli(&["CLUSTER", "INFO"])) > 0),
            "{}",
            node.cli(&["CLUSTER", "INFO"])
        );
        let info = node.cli(&["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "{info}");
    }
    for key in &keys[..2] {
        let slot = local_key_slot(key.as_bytes());
        assert_eq!(client.call(slot, &["GET", key]), Reply::bulk("w"));
    }
}

#[test]
fn migrate_and_dump_restore_between_standalone_servers() {
    let source = Server::start(&["--shards", "2"]);
    let mut target = Server::start(&["--shards", "2"]);
    let mut src = source.connect();
    for i in 0..20 {
        let key = format!("{{mig}}{i}");
        assert_eq!(src.call(&["SET", &key, &i.to_string()]), Reply::ok());
    }
    assert_eq!(src.call(&["PEXPIRE", "{mig}0", "600000"]), Reply::Int(1));
    let port = target.port.to_string();
    let migrate = |src: &mut Resp, keys: &[&str]| {
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend_from_slice(keys);
        src.call(&args)
    };
    assert_eq!(
        migrate(&mut src, &["{mig}0", "{mig}1", "{mig}nope"]),
        Reply::ok()
    );
    assert_eq!(src.call(&["EXISTS", "{mig}0", "{mig}1"]), Reply::Int(0));
    let mut dst = target.connect();
    assert_eq!(dst.call(&["GET", "{mig}1"]), Reply::bulk("1"));
    let Reply::Int(ttl) = dst.call(&["PTTL", "{mig}0"]) else {
        panic!("PTTL is an integer");
    };
    assert!((1..=600_000).contains(&ttl), "TTL travels: {ttl}");
    assert_eq!(
        migrate(&mut src, &["{mig}nope"]),
        Reply::Simple("NOKEY".into())
    );
    // Without cluster mode keys may sit on different shards; MIGRATE wants them on one.
    assert_eq!(src.call(&["SET", "a", "1"]), Reply::ok());
    assert_eq!(src.call(&["SET", "b", "1"]), Reply::ok());
    assert!(error(migrate(&mut src, &["a", "b"])).contains("one shard"));
    // A key already there: BUSYKEY, and the key stays here.
    assert_eq!(dst.call(&["SET", "{mig}2", "theirs"]), Reply::ok());
    assert!(error(migrate(&mut src, &["{mig}2"])).contains("BUSYKEY"));
    assert_eq!(src.call(&["GET", "{mig}2"]), Reply::bulk("2"));

    // The pooled connection dies with the target; the next MIGRATE reconnects.
    drop(dst);
    let target_port = target.port;
    target.stop();
    target = cluster_util::start_retrying(&["--shards", "2", "--port", &target_port.to_string()]);
    assert_eq!(migrate(&mut src, &["{mig}3"]), Reply::ok());
    assert_eq!(target.connect().call(&["GET", "{mig}3"]), Reply::bulk("3"));

    // DUMP and RESTORE directly; a Redis payload is refused as Redis refuses a damaged one.
    let Reply::Bulk(Some(payload)) = src.call(&["DUMP", "{mig}4"]) else {
        panic!("DUMP of a string is a bulk");
    };
    let mut dst = target.connect();
    // The payload is binary (it ends in a CRC): send it as raw RESP.
    let restore = |dst: &mut Resp| {
        let mut request = b"*4\r\n$7\r\nRESTORE\r\n$4\r\ncopy\r\n$1\r\n0\r\n".to_vec();
        request.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
        request.extend_from_slice(&payload);
        request.extend_from_slice(b"\r\n");
        dst.send(&request).expect("sending RESTORE");
        dst.read().expect("reading RESTORE's reply")
    };
    assert_eq!(restore(&mut dst), Reply::ok());
    assert_eq!(dst.call(&["GET", "copy"]), Reply::bulk("4"));
    assert_eq!(
        error(restore(&mut dst)),
        "BUSYKEY Target key name already exists."
    );
    assert_eq!(
        error(dst.call(&["RESTORE", "x", "0", "not a payload"])),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(
        error(src.call(&["CLUSTER", "INFO"])),
        "ERR This instance has cluster support disabled"
    );
}
