//! `benches/run.sh scaling` and `benches/run.sh openloop` in their QUICK smoke modes: tiny
//! windows, one round; the point is that every server and client of the suite runs and the
//! table gets its rows, not the figures.

use std::path::Path;

const BENCHCTL: &str = env!("CARGO_BIN_EXE_benchctl");

/// Builds `what` in the profile and target directory these tests were built in.
fn cargo_build(what: &[&str]) {
    let bin_dir = Path::new(BENCHCTL).parent().unwrap();
    let mut build = std::process::Command::new(env!("CARGO"));
    build.args(["build", "-q"]).args(what).arg("--target-dir");
    build.arg(bin_dir.parent().unwrap());
    if bin_dir.ends_with("release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "cargo build {what:?}");
}

/// A first port apart from the other test binaries' suites (they count up from 20000 + a
/// per-process offset below 12000).
fn port_base(slot: u16) -> u16 {
    33_000 + (std::process::id() % 40) as u16 * 100 + slot * 50
}

/// Runs `run.sh SUITE` in QUICK mode with `env`; its stdout.
fn run_suite(suite: &str, env: &[(&str, String)]) -> String {
    cargo_build(&["-p", "corewire", "--example", "echo_server"]);
    cargo_build(&["-p", "corewire-kv", "--bin", "corewire-kv"]);
    let bin_dir = Path::new(BENCHCTL).parent().unwrap();
    let mut cmd = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/run.sh"));
    cmd.arg(suite)
        .env("QUICK", "1")
        .env("BIN_DIR", bin_dir)
        .env("COREWIRE_ECHO", bin_dir.join("examples/echo_server"))
        .env("COREWIRE_KV", bin_dir.join("corewire-kv"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let md = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{md}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    md
}

fn has_row(md: &str, prefix: &str) -> bool {
    md.lines().any(|l| l.starts_with(prefix))
}

/// One shard count on this machine (N = 2: n = 1): a row per echo size and server, and per
/// KV test and server (redis-benchmark and redis-server are required: `cargo xtask setup`).
#[test]
fn scaling_quick_mode_fills_every_row() {
    let md = run_suite(
        "scaling",
        &[
            ("SCALING_COUNTS", "1".into()),
            ("PORT_BASE", port_base(0).to_string()),
            ("DURATION_MS", "200".into()),
            ("WARMUP_MS", "50".into()),
        ],
    );
    for bench in ["echo 64 B", "echo 4 KiB"] {
        for server in ["corewire", "tokio-mt", "monoio-mt"] {
            let row = format!("| {bench} | {server} | 1 |");
            assert!(has_row(&md, &row), "no {row}:\n{md}");
        }
    }
    for bench in ["kv SET -P 16", "kv GET -P 16"] {
        for server in ["corewire-kv", "redis-server"] {
            let row = format!("| {bench} | {server} | 1 |");
            assert!(has_row(&md, &row), "no {row}:\n{md}");
        }
    }
    assert!(md.contains("+ "), "prints its commands: {md}");
}

/// One load level: each server's closed-loop maximum and its open-loop row (RPC: corewire's
/// framing against rpc_corewire and echo_tokio --rpc).
#[test]
fn openloop_quick_mode_fills_every_row() {
    let md = run_suite(
        "openloop",
        &[
            ("LOADS", "50".into()),
            ("PORT_BASE", port_base(1).to_string()),
            ("DURATION_MS", "300".into()),
            ("WARMUP_MS", "50".into()),
        ],
    );
    for (bench, server) in [
        ("echo", "corewire"),
        ("echo", "tokio-ct"),
        ("kv", "corewire-kv"),
        ("kv", "redis-server"),
        ("rpc", "corewire"),
        ("rpc", "tokio-ct"),
    ] {
        for load in ["max (closed loop)", "50 %"] {
            let row = format!("| {bench} | {server} | {load} |");
            let line = md.lines().find(|l| l.starts_with(&row));
            let line = line.unwrap_or_else(|| panic!("no {row}:\n{md}"));
            // The last columns are unanswered | errors | rounds: a reply the client could not
            // parse, or a connection that broke, is an error.
            let errors = line.split('|').rev().nth(2).map(str::trim);
            assert_eq!(errors, Some("0"), "errors in {line}\n{md}");
        }
    }
    assert!(md.contains("--rate 0"), "prints its commands: {md}");
}
