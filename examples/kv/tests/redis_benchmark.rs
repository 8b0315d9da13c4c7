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
