//! Stock `redis-benchmark` against corewire-kv. It asks for `CONFIG GET save` and
//! `CONFIG GET appendonly` at start-up, then pipelines SET and GET from several clients.

mod common;

use std::process::{Command, Stdio};

use common::{require_tool, Server};

#[test]
fn redis_benchmark_set_get_pipelined() {
    require_tool("redis-benchmark");
    let server = Server::start(&["--shards", "2"]);
    let out = Command::new("redis-benchmark")
        .args(["-p", &server.port.to_string()])
        .args([
            "-t", "set,get", "-n", "20000", "-c", "10", "-P", "16", "--csv",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("running redis-benchmark");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "redis-benchmark failed:\n{stdout}\n{stderr}"
    );
    assert!(
        !stderr.to_lowercase().contains("error"),
        "redis-benchmark reported errors:\n{stderr}"
    );
    // "SET","123456.78",...
    let rps = |test: &str| -> f64 {
        stdout
            .lines()
            .find(|line| line.starts_with(&format!("\"{test}\"")))
            .and_then(|line| line.split('"').nth(3))
            .and_then(|rps| rps.parse().ok())
            .unwrap_or_else(|| panic!("no {test} result in:\n{stdout}\n{stderr}"))
    };
    assert!(rps("SET") > 0.0, "{stdout}");
    assert!(rps("GET") > 0.0, "{stdout}");

    // The SETs landed: without -r, redis-benchmark writes 3 bytes to "key:__rand_int__".
    assert_eq!(server.cli(&["STRLEN", "key:__rand_int__"]), "3");
    let info = server.cli(&["INFO", "stats"]);
    let processed: u64 = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("total_commands_processed:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no total_commands_processed in {info}"));
    assert!(processed >= 40_000, "only {processed} commands processed");
}

/// `redis-benchmark` with its full default test list (what `redis-benchmark -q` runs), plain
/// and pipelined: every test reports a rate, none reports an error, and the data types it
/// wrote are there afterwards with the right types.
#[test]
fn redis_benchmark_full_default_list() {
    require_tool("redis-benchmark");
    let server = Server::start(&["--shards", "2"]);
    for pipeline in ["1", "16"] {
        let out = Command::new("redis-benchmark")
            .args(["-p", &server.port.to_string()])
            .args(["-n", "3000", "-c", "8", "-P", pipeline, "--csv"])
            .stdin(Stdio::null())
            .output()
            .expect("running redis-benchmark");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "-P {pipeline}:\n{stdout}\n{stderr}");
        assert!(
            !stderr.to_lowercase().contains("error") && !stdout.contains("ERR"),
            "-P {pipeline}: redis-benchmark reported errors:\n{stdout}\n{stderr}"
        );
        for test in [
            "PING_INLINE",
            "PING_MBULK",
            "SET",
            "GET",
            "INCR",
            "LPUSH",
            "RPUSH",
            "LPOP",
            "RPOP",
            "SADD",
            "HSET",
            "SPOP",
            "ZADD",
            "ZPOPMIN",
            "LPUSH (needed to benchmark LRANGE)",
            "LRANGE_100 (first 100 elements)",
            "LRANGE_300 (first 300 elements)",
            "LRANGE_500 (first 500 elements)",
            "LRANGE_600 (first 600 elements)",
            "MSET (10 keys)",
        ] {
            let rps: f64 = stdout
                .lines()
                .find(|line| line.starts_with(&format!("\"{test}\",")))
                .and_then(|line| line.split('"').nth(3))
                .and_then(|rps| rps.parse().ok())
                .unwrap_or_else(|| panic!("-P {pipeline}: no {test} result in:\n{stdout}"));
            assert!(rps > 0.0, "-P {pipeline}: {test}: {stdout}");
        }
    }
    assert_eq!(server.cli(&["TYPE", "mylist"]), "list");
    assert_eq!(server.cli(&["TYPE", "myhash"]), "hash");
    let length: u64 = server.cli(&["LLEN", "mylist"]).parse().unwrap();
    assert!(
        length >= 600,
        "LRANGE_600 needs 600 elements, mylist has {length}"
    );
    assert_eq!(server.cli(&["HLEN", "myhash"]), "1");
}
