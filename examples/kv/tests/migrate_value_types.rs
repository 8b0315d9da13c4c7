//! MIGRATE, DUMP and RESTORE carry every value type, not only strings: a list, a hash, a set
//! and a sorted set (each larger than one rebuild record, so the payload holds several
//! commands) arrive whole, with their type and TTL, and leave nothing on the source; between
//! standalone servers and through `redis-cli --cluster reshard`.

mod cluster_util;
mod common;

use std::process::{Command, Stdio};

use cluster_util::Cluster;
use common::{Reply, Resp, Server};
use corewire_kv::routing::key_slot;

/// What a key looks like from outside, in an order that does not depend on the store's
/// iteration order: its type and its elements (sorted for the unordered types).
fn view(conn: &mut Resp, key: &str) -> (Reply, Reply) {
    let kind = conn.call(&["TYPE", key]);
    let Reply::Simple(name) = &kind else {
        panic!("TYPE {key}: {kind:?}");
    };
    let mut content = match name.as_str() {
        "string" => conn.call(&["GET", key]),
        "list" => conn.call(&["LRANGE", key, "0", "-1"]),
        "hash" => conn.call(&["HGETALL", key]),
        "set" => conn.call(&["SMEMBERS", key]),
        "zset" => conn.call(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        other => panic!("TYPE {key}: {other}"),
    };
    match (name.as_str(), &mut content) {
        ("set", Reply::Array(Some(members))) => members.sort_by_key(|m| format!("{m:?}")),
        ("hash", Reply::Array(Some(flat))) => {
            let mut pairs: Vec<Vec<Reply>> = flat.chunks(2).map(<[Reply]>::to_vec).collect();
            pairs.sort_by_key(|pair| format!("{:?}", pair[0]));
            *flat = pairs.into_iter().flatten().collect();
        }
        _ => {}
    }
    (kind, content)
}

/// One key of each type under the hash tag `tag` (one slot and shard, as MIGRATE wants),
/// each with more elements than one rebuild record holds: list, hash (with a TTL), set,
/// sorted set, string.
fn fill(src: &mut Resp, tag: &str) -> Vec<String> {
    const N: usize = 150;
    let keys: Vec<String> = ["list", "hash", "set", "zset", "str"]
        .iter()
        .map(|kind| format!("{tag}{kind}"))
        .collect();
    let mut rpush = vec!["RPUSH".to_string(), keys[0].clone()];
    let mut hset = vec!["HSET".to_string(), keys[1].clone()];
    let mut sadd = vec!["SADD".to_string(), keys[2].clone()];
    let mut zadd = vec!["ZADD".to_string(), keys[3].clone()];
    for i in 0..N {
        // Duplicates in the list and binary-looking text: order and repeats must survive.
        rpush.push(format!("e{}", i % 7));
        hset.extend([format!("f{i}"), format!("v{i}\r\n")]);
        sadd.push(format!("m{i}"));
        zadd.extend([format!("{}", i as f64 / 3.0 - 20.0), format!("z{i}")]);
    }
    zadd.extend(["-inf".into(), "low".into(), "+inf".into(), "high".into()]);
    for command in [rpush, hset, sadd, zadd] {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let reply = src.call(&args);
        assert!(
            matches!(reply, Reply::Int(n) if n > 0),
            "{}: {reply:?}",
            args[0]
        );
    }
    assert_eq!(src.call(&["SET", &keys[4], "plain"]), Reply::ok());
    assert_eq!(src.call(&["PEXPIRE", &keys[1], "600000"]), Reply::Int(1));
    keys
}

/// The TTLs `fill` gave: the hash's, and none elsewhere.
fn assert_ttls(conn: &mut Resp, keys: &[String]) {
    let ttl = pttl(conn, &keys[1]);
    assert!((1..=600_000).contains(&ttl), "the hash's TTL: {ttl}");
    for key in [&keys[0], &keys[2], &keys[3], &keys[4]] {
        assert_eq!(pttl(conn, key), -1, "{key} gained a TTL");
    }
}

fn pttl(conn: &mut Resp, key: &str) -> i64 {
    match conn.call(&["PTTL", key]) {
        Reply::Int(ttl) => ttl,
        other => panic!("PTTL {key}: {other:?}"),
    }
}

#[test]
fn migrate_carries_every_value_type_with_its_ttl() {
    let source = Server::start(&["--shards", "2"]);
    let target = Server::start(&["--shards", "2"]);
    let mut src = source.connect();
    let keys = fill(&mut src, "{ty}");
    let before: Vec<_> = keys.iter().map(|key| view(&mut src, key)).collect();

    let port = target.port.to_string();
    let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
    migrate.extend(keys.iter().map(String::as_str));
    assert_eq!(src.call(&migrate), Reply::ok());

    let mut dst = target.connect();
    for (key, expected) in keys.iter().zip(&before) {
        assert_eq!(&view(&mut dst, key), expected, "{key} on the target");
        assert_eq!(
            src.call(&["EXISTS", key]),
            Reply::Int(0),
            "{key} left behind"
        );
    }
    assert_ttls(&mut dst, &keys);
}

/// `redis-cli --cluster reshard` moves a slot holding one key of each type: the slot's key
/// index knows them (COUNTKEYSINSLOT, GETKEYSINSLOT), RESTORE-ASKING rebuilds them on the
/// importing node, and nothing is left behind.
#[test]
fn reshard_moves_every_value_type() {
    let cluster = Cluster::start(3, None);
    // redis-cli reshard takes the source's lowest slot: slot 0 of the node owning it.
    let source = cluster.owner_of_slot(0);
    let target = (source + 1) % 3;
    let tag = (0..)
        .map(|i| format!("{{s{i}}}"))
        .find(|tag| key_slot(tag.as_bytes()) == 0)
        .expect("some tag hashes to slot 0");
    let mut src = cluster.nodes[source].server.connect();
    let keys = fill(&mut src, &tag);
    let before: Vec<_> = keys.iter().map(|key| view(&mut src, key)).collect();
    let count = |node: usize| cluster.nodes[node].cli(&["CLUSTER", "COUNTKEYSINSLOT", "0"]);
    assert_eq!(count(source), keys.len().to_string());

    let out = Command::new("redis-cli")
        .args(["--cluster", "reshard", &cluster.nodes[source].addr()])
        .args(["--cluster-from", &cluster.nodes[source].id()])
        .args(["--cluster-to", &cluster.nodes[target].id()])
        .args(["--cluster-slots", "1", "--cluster-yes"])
        .stdin(Stdio::null())
        .output()
        .expect("running redis-cli --cluster reshard");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !stdout.contains("[ERR]"),
        "reshard failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.wait_consistent();
    assert_eq!(cluster.owner_of_slot(0), target);
    assert_eq!(count(source), "0", "keys left on the source");
    assert_eq!(count(target), keys.len().to_string());
    let mut dst = cluster.nodes[target].server.connect();
    for (key, expected) in keys.iter().zip(&before) {
        assert_eq!(&view(&mut dst, key), expected, "{key} on the target");
    }
    assert_ttls(&mut dst, &keys);
}

#[test]
fn dump_and_restore_rebuild_every_value_type() {
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    for key in fill(&mut conn, "{ty}") {
        let Reply::Bulk(Some(payload)) = conn.call(&["DUMP", &key]) else {
            panic!("DUMP {key} is a bulk");
        };
        let copy = format!("{key}:copy");
        // The payload is binary (it ends in a CRC): sent as raw RESP.
        let mut restore = format!(
            "*4\r\n$7\r\nRESTORE\r\n${}\r\n{copy}\r\n$1\r\n0\r\n${}\r\n",
            copy.len(),
            payload.len()
        )
        .into_bytes();
        restore.extend_from_slice(&payload);
        restore.extend_from_slice(b"\r\n");
        conn.send(&restore).expect("sending RESTORE");
        assert_eq!(conn.read().expect("RESTORE's reply"), Reply::ok(), "{key}");
        assert_eq!(view(&mut conn, &copy), view(&mut conn, &key), "{copy}");
        // RESTORE's TTL argument (0 here) decides, not the source's.
        assert_eq!(pttl(&mut conn, &copy), -1, "{copy}");
    }
}
