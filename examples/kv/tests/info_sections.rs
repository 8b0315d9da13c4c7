//! INFO's fields that monitoring tools and client libraries read, against a live server.

mod common;

use std::collections::HashMap;

use std::time::Duration;

use common::{eventually, Reply, Resp, Server};

fn info(conn: &mut Resp, sections: &[&str]) -> HashMap<String, String> {
    let mut args = vec!["INFO"];
    args.extend_from_slice(sections);
    let Reply::Bulk(Some(text)) = conn.call(&args) else {
        panic!("INFO is a bulk string");
    };
    String::from_utf8(text)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn tool_fields_are_present_and_live() {
    let server = Server::start(&[
        "--shards",
        "2",
        "--maxclients",
        "3",
        "--maxmemory",
        "2097152",
        "--maxmemory-policy",
        "allkeys-lru",
    ]);
    let mut conn = server.connect();
    let mut second = server.connect();
    assert_eq!(second.call(&["PING"]), Reply::Simple("PONG".into()));
    let fields = info(&mut conn, &["everything"]);
    for name in [
        "redis_version",
        "redis_mode",
        "os",
        "arch_bits",
        "process_id",
        "tcp_port",
        "uptime_in_seconds",
        "connected_clients",
        "blocked_clients",
        "maxclients",
        "used_memory",
        "used_memory_human",
        "maxmemory",
        "maxmemory_policy",
        "rdb_bgsave_in_progress",
        "aof_enabled",
        "aof_rewrite_in_progress",
        "total_connections_received",
        "total_commands_processed",
        "keyspace_hits",
        "keyspace_misses",
        "expired_keys",
        "rejected_connections",
        "used_cpu_sys",
        "used_cpu_user",
    ] {
        assert!(fields.contains_key(name), "INFO lacks {name}: {fields:?}");
    }
    assert_eq!(fields["maxclients"], "3");
    assert_eq!(fields["maxmemory"], "2097152");
    assert_eq!(fields["maxmemory_policy"], "allkeys-lru");
    assert_eq!(fields["process_id"], server.pid().to_string());
    assert!(fields["os"].starts_with("Linux "), "{}", fields["os"]);
    let user: f64 = fields["used_cpu_user"].parse().unwrap();
    let sys: f64 = fields["used_cpu_sys"].parse().unwrap();
    assert!(user + sys > 0.0, "no CPU time counted: {user} {sys}");
    assert_eq!(fields["total_connections_received"], "2");

    // A fourth client is over maxclients 3: refused and counted.
    // The third is admitted (it answers) before the fourth connects.
    let mut third = server.connect();
    assert_eq!(third.call(&["PING"]), Reply::Simple("PONG".into()));
    let mut fourth = server.connect();
    let refused = fourth.read();
    assert!(
        matches!(&refused, Ok(Reply::Error(e)) if e.contains("max number of clients")),
        "{refused:?}"
    );
    let stats = info(&mut conn, &["stats", "CPU"]);
    assert_eq!(stats["total_connections_received"], "3");
    assert_eq!(stats["rejected_connections"], "1");
    assert!(stats.contains_key("used_cpu_user"));
    assert!(!stats.contains_key("connected_clients"));
}

/// `instantaneous_ops_per_sec` (each shard's sampled rate, summed) rises under load, and the
/// keyspace's `avg_ttl` (each shard's running estimate, weighed by its keys with a TTL) is the
/// TTL left, in ms, as Redis reports them. Polled until the shards' ticks have sampled them.
#[test]
fn the_command_rate_and_avg_ttl_are_sampled() {
    let wait = Duration::from_secs(30);
    let server = Server::start(&["--shards", "2"]);
    let mut conn = server.connect();
    for i in 0..20 {
        let key = format!("ttl{i}");
        assert_eq!(conn.call(&["SET", &key, "v", "EX", "1000"]), Reply::ok());
    }
    assert_eq!(conn.call(&["SET", "plain", "v"]), Reply::ok());
    let avg_ttl = |conn: &mut Resp| -> u64 {
        let keyspace = info(conn, &["keyspace"]);
        let db0 = &keyspace["db0"];
        assert!(db0.starts_with("keys=21,expires=20,avg_ttl="), "{db0}");
        db0.rsplit_once('=').unwrap().1.parse().unwrap()
    };
    assert!(
        eventually(wait, || (1..=1_000_000).contains(&avg_ttl(&mut conn))),
        "avg_ttl never estimated: {}",
        avg_ttl(&mut conn)
    );
    let ops = |conn: &mut Resp| -> u64 {
        info(conn, &["stats"])["instantaneous_ops_per_sec"]
            .parse()
            .unwrap()
    };
    assert!(
        eventually(wait, || {
            for _ in 0..50 {
                conn.call(&["SET", "busy", "v"]);
            }
            ops(&mut conn) > 0
        }),
        "the command rate never rose"
    );
}
