//! Runs the real binaries against each other on 127.0.0.1: each peer server under each load
//! mode, the tonic pair, and one benchctl suite. Windows are short; the point is that every
//! piece works together and reports sane numbers, not performance.

use std::net::TcpListener;
use std::time::Duration;

use corewire_bench::benchctl::process::{run_client, ServerProcess};
use corewire_bench::server_metrics::parse_metric_line;
use corewire_bench::stats_line::ShardLine;

const LOADGEN: &str = env!("CARGO_BIN_EXE_loadgen");
const ECHO_TOKIO: &str = env!("CARGO_BIN_EXE_echo_tokio");
const ECHO_GLOMMIO: &str = env!("CARGO_BIN_EXE_echo_glommio");
const RPC_TONIC: &str = env!("CARGO_BIN_EXE_rpc_tonic");
const RPC_COREWIRE: &str = env!("CARGO_BIN_EXE_rpc_corewire");
const BENCHCTL: &str = env!("CARGO_BIN_EXE_benchctl");

/// A first port for one of the suites this binary runs (`slot` 0..4), below the ephemeral
/// range where the other tests' client ports live, and apart from the other suites' ports:
/// tests run in parallel, and two suites counting up from the same base race for each port.
fn port_base(slot: u16) -> u16 {
    20_000 + (std::process::id() % 60) as u16 * 200 + slot * 50
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to 10 s) until no TCP socket on `port` is in a state other than LISTEN or
/// TIME_WAIT in /proc/net/tcp{,6}: every connection to the server has been closed on its side.
fn wait_until_no_connections(port: u16) {
    let busy = || {
        ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .any(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    let local_port = cols
                        .get(1)
                        .and_then(|a| a.rsplit(':').next())
                        .and_then(|p| u16::from_str_radix(p, 16).ok());
                    local_port == Some(port) && !matches!(cols.get(3), Some(&"0A") | Some(&"06"))
                })
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while busy() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn start(cmd: &str, port: u16) -> ServerProcess {
    ServerProcess::start(
        cmd,
        port,
        Duration::from_secs(15),
        Duration::from_millis(100),
    )
    .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

fn client(cmd: &str) -> serde_json::Value {
    let run = run_client(cmd, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        run.status.success(),
        "{cmd}: {:?} {:?}",
        run.status,
        run.stderr
    );
    run.report
}

fn num(report: &serde_json::Value, key: &str) -> f64 {
    report[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {report}"))
}

/// Closed loop (pipelined, 4 KiB), probe and accept storm against one running server; returns
/// the server's stats lines.
fn exercise_echo_server(server_cmd: &str, port: u16) -> Vec<ShardLine> {
    let server = start(server_cmd, port);
    let pid = server.pid();
    let addr = format!("127.0.0.1:{port}");

    let r = client(&format!(
        "{LOADGEN} --addr {addr} --conns 4 --depth 8 --size 4096 --threads 2 \
         --duration-ms 300 --warmup-ms 100 --server-pid {pid}"
    ));
    assert_eq!(r["mode"], "echo");
    assert_eq!(num(&r, "errors"), 0.0);
    assert!(num(&r, "requests") > 100.0, "{r}");
    assert!(
        num(&r, "p50_us") > 0.0 && num(&r, "p99_us") >= num(&r, "p50_us"),
        "{r}"
    );
    assert!(num(&r, "server_cpu_us_per_req") > 0.0, "{r}");

    let p = client(&format!(
        "{LOADGEN} --probe --addr {addr} --hot-conns 2 --hot-depth 8 \
         --duration-ms 300 --warmup-ms 100"
    ));
    assert_eq!(num(&p, "errors"), 0.0);
    assert!(num(&p, "probe_requests") > 10.0, "{p}");
    assert!(num(&p, "hot_msgs_per_s") > num(&p, "probe_requests"), "{p}");
    assert!(num(&p, "hot_mb_per_s") > 0.0, "{p}");

    let a = client(&format!(
        "{LOADGEN} --accept-storm 300 --threads 2 --addr {addr}"
    ));
    assert_eq!(num(&a, "completed"), 300.0);
    assert_eq!(num(&a, "errors"), 0.0);

    let exit = server.stop(Duration::from_secs(10));
    assert!(!exit.killed, "server ignored SIGTERM");
    assert!(
        exit.status.is_some_and(|s| s.success()),
        "{:?}",
        exit.status
    );
    exit.stdout
        .iter()
        .filter_map(|l| ShardLine::parse(l))
        .collect()
}

#[test]
fn tokio_peer_serves_every_load_mode() {
    let port = free_port();
    let stats = exercise_echo_server(
        &format!("{ECHO_TOKIO} --addr 127.0.0.1:{port} --workers 2 --accept reuseport"),
        port,
    );
    assert_eq!(stats.len(), 2, "one stats line per reuseport listener");
    // 4 closed-loop + 3 probe + 300 storm connections.
    assert_eq!(stats.iter().map(|s| s.accepted).sum::<u64>(), 307);
    assert!(stats.iter().all(|s| s.open == 0));
}

#[test]
fn glommio_peer_serves_every_load_mode() {
    let port = free_port();
    let stats = exercise_echo_server(
        &format!("{ECHO_GLOMMIO} --addr 127.0.0.1:{port} --shards 2"),
        port,
    );
    assert_eq!(stats.len(), 2);
    assert_eq!(stats.iter().map(|s| s.accepted).sum::<u64>(), 307);
}

#[test]
fn oversized_frames_close_the_connection() {
    use std::io::{Read, Write};
    let port = free_port();
    let server = start(
        &format!("{ECHO_TOKIO} --addr 127.0.0.1:{port} --workers 1"),
        port,
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&((16u32 << 20) + 1).to_le_bytes()).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(
        s.read(&mut buf).unwrap_or(0),
        0,
        "server must close, not echo"
    );
    server.stop(Duration::from_secs(10));
}

#[test]
fn tonic_pair_reports_like_loadgen() {
    let port = free_port();
    let server = start(
        &format!("{RPC_TONIC} server --addr 127.0.0.1:{port} --workers 1"),
        port,
    );
    let r = client(&format!(
        "{RPC_TONIC} client --addr 127.0.0.1:{port} --conns 2 --depth 4 --size 4096 \
         --duration-ms 300 --warmup-ms 100 --server-pid {}",
        server.pid()
    ));
    assert_eq!(r["mode"], "grpc");
    assert_eq!(num(&r, "errors"), 0.0);
    assert!(num(&r, "requests") > 10.0, "{r}");
    assert!(num(&r, "server_cpu_us_per_req") > 0.0, "{r}");
    let exit = server.stop(Duration::from_secs(10));
    assert!(!exit.killed);
}

#[test]
fn corewire_rpc_pair_reports_like_loadgen_in_both_accept_modes() {
    for accept in ["reuseport", "handoff"] {
        let port = free_port();
        let server = start(
            &format!(
                "{RPC_COREWIRE} server --addr 127.0.0.1:{port} --shards 2 --accept {accept} \
                 --no-pin"
            ),
            port,
        );
        let r = client(&format!(
            "{RPC_COREWIRE} client --addr 127.0.0.1:{port} --conns 4 --depth 4 --size 4096 \
             --threads 2 --duration-ms 300 --warmup-ms 100 --server-pid {}",
            server.pid()
        ));
        assert_eq!(r["mode"], "corewire-rpc");
        assert_eq!(num(&r, "errors"), 0.0);
        assert!(num(&r, "requests") > 100.0, "{r}");
        assert!(
            num(&r, "p50_us") > 0.0 && num(&r, "p99_us") >= num(&r, "p50_us"),
            "{r}"
        );
        assert!(num(&r, "server_cpu_us_per_req") > 0.0, "{r}");
        // The client has exited, but the server may not have seen the closes yet: stopping it
        // now would race `open` against them.
        wait_until_no_connections(port);
        let exit = server.stop(Duration::from_secs(10));
        assert!(!exit.killed, "server ignored SIGTERM");
        assert!(
            exit.status.is_some_and(|s| s.success()),
            "{:?}",
            exit.status
        );
        let stats: Vec<ShardLine> = exit
            .stdout
            .iter()
            .filter_map(|l| ShardLine::parse(l))
            .collect();
        assert_eq!(stats.len(), 2, "{:?}", exit.stdout);
        assert_eq!(stats.iter().map(|s| s.accepted).sum::<u64>(), 4, "{accept}");
        assert_eq!(stats.iter().map(|s| s.served()).sum::<u64>(), 4, "{accept}");
        assert!(stats.iter().all(|s| s.open == 0));
        // The cost figures `benchctl rpc` shows: every request answered was counted (the
        // client's window plus warm-up and drain at least), reading them polled tasks, and
        // each reply recorded one head-of-line count.
        let metrics: std::collections::BTreeMap<String, f64> = exit
            .stdout
            .iter()
            .filter_map(|l| parse_metric_line(l))
            .flatten()
            .collect();
        let served = metrics["server_requests"];
        assert!(served >= num(&r, "requests"), "{metrics:?} {r}");
        assert!(metrics["server_polls_per_req"] > 0.0, "{metrics:?}");
        assert!(metrics.contains_key("server_allocs_per_req"), "{metrics:?}");
        assert_eq!(
            metrics["hol_count"], served,
            "one head-of-line count per reply"
        );
        if accept == "handoff" {
            // One acceptor; least-connections placement of 4 connections on 2 shards.
            assert_eq!(stats[0].accepted, 4, "{stats:?}");
            assert!(stats.iter().all(|s| s.served() == 2), "{stats:?}");
        }
    }
}

/// The fairness layout on the RPC service: hot connections on one listener,
/// the probe on its own, a handler with a CPU cost. Both listeners' head-of-line histograms
/// count every reply of their own connections, so `probe_hol_*` is the probe's alone.
#[test]
fn corewire_rpc_probe_gets_its_own_listener_and_head_of_line_counts() {
    let (port, probe_port) = loop {
        let (a, b) = (free_port(), free_port());
        if a != b {
            break (a, b);
        }
    };
    let server = start(
        &format!(
            "{RPC_COREWIRE} server --addr 127.0.0.1:{port} --probe-addr 127.0.0.1:{probe_port} \
             --shards 1 --no-pin --budget-msgs 16 --hash-rounds 2"
        ),
        port,
    );
    let r = client(&format!(
        "{RPC_COREWIRE} client --probe --addr 127.0.0.1:{port} --probe-addr 127.0.0.1:{probe_port} \
         --hot-conns 2 --hot-depth 32 --duration-ms 300 --warmup-ms 100 --server-pid {}",
        server.pid()
    ));
    assert_eq!(r["mode"], "corewire-rpc-probe");
    assert_eq!(r["probe_addr"], format!("127.0.0.1:{probe_port}"));
    assert_eq!(num(&r, "errors"), 0.0);
    // Reported (how much falls inside the window depends on scheduling; not asserted).
    for key in [
        "probe_p50_us",
        "probe_p99_us",
        "client_cpu_pct",
        "server_cpu_pct",
    ] {
        num(&r, key);
    }
    wait_until_no_connections(port);
    wait_until_no_connections(probe_port);
    let exit = server.stop(Duration::from_secs(10));
    assert!(exit.status.is_some_and(|s| s.success()), "{exit:?}");
    let metrics: std::collections::BTreeMap<String, f64> = exit
        .stdout
        .iter()
        .filter_map(|l| parse_metric_line(l))
        .flatten()
        .collect();
    // One count per reply on each listener; the window's requests are a subset of them. Each
    // connection's first call goes out at the start and is answered before the client exits,
    // so both listeners served at least one.
    let (hot, probe) = (metrics["hol_count"], metrics["probe_hol_count"]);
    assert_eq!(hot + probe, metrics["server_requests"], "{metrics:?}");
    assert!(hot >= 2.0 && probe >= 1.0, "{metrics:?}");
    assert!(probe >= num(&r, "probe_requests"), "{metrics:?} {r}");
    assert!(hot >= num(&r, "hot_requests"), "{metrics:?} {r}");
    assert!(
        metrics["probe_hol_max"] >= metrics["probe_hol_p50"],
        "{metrics:?}"
    );
}

#[test]
fn corewire_rpc_client_rejects_raw_echo_only_modes() {
    let out = std::process::Command::new(RPC_COREWIRE)
        .args(["client", "--addr", "127.0.0.1:1", "--accept-storm", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = std::process::Command::new(RPC_COREWIRE)
        .args(["server", "--addr", "127.0.0.1:1", "--budget-msgs", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn benchctl_runs_a_suite_and_prints_medians() {
    let out = std::process::Command::new(BENCHCTL)
        .args([
            "accept",
            "--servers",
            "tokio",
            "--rounds",
            "2",
            "--cycles",
            "200",
            "--port-base",
            &port_base(0).to_string(),
        ])
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{md}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        md.contains("## Suite `accept`: medians of 2 rounds"),
        "{md}"
    );
    assert!(
        md.contains("| 200 cycles, 64 B | accept=reuseport | 2/2 |"),
        "{md}"
    );
    assert!(
        md.contains("| 200 cycles, 64 B | accept=handoff | 2/2 |"),
        "{md}"
    );
    assert!(md.contains("echo_tokio --addr 127.0.0.1:"), "{md}");
    assert!(!md.contains("Irregular runs"), "{md}");
}

/// Builds `what` in the profile and target directory these tests were built in.
fn cargo_build(what: &[&str]) {
    let bin_dir = std::path::Path::new(BENCHCTL).parent().unwrap();
    let mut build = std::process::Command::new(env!("CARGO"));
    build.args(["build", "-q"]).args(what).arg("--target-dir");
    build.arg(bin_dir.parent().unwrap());
    if bin_dir.ends_with("release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "cargo build {what:?}");
}

/// `benches/run.sh idle-memory` in QUICK mode (300 connections): each server's row has an RSS
/// figure per connection 1 s after they are open, and a second reading once settled;
/// redis-server's row may instead say it is not installed.
#[test]
fn idle_memory_quick_mode_measures_every_server() {
    cargo_build(&["-p", "corewire", "--example", "echo_server"]);
    cargo_build(&["-p", "corewire-kv", "--bin", "corewire-kv"]);
    let bin_dir = std::path::Path::new(BENCHCTL).parent().unwrap();
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/run.sh"))
        .arg("idle-memory")
        .env("QUICK", "1")
        .env("PORT_BASE", port_base(1).to_string())
        .env("BIN_DIR", bin_dir)
        .env("COREWIRE_ECHO", bin_dir.join("examples/echo_server"))
        .env("COREWIRE_KV", bin_dir.join("corewire-kv"))
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{md}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for server in ["corewire-echo", "corewire-kv", "redis-server"] {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {server} |")))
            .unwrap_or_else(|| panic!("no {server} row:\n{md}"));
        if server == "redis-server" && row.contains("not installed") {
            continue;
        }
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(
            cells[4].parse::<i64>().is_ok_and(|b| b > 0),
            "{server}: {row}\n{md}"
        );
        // Settled: redis may have freed idle clients' buffers by then, so only the figure's
        // presence is certain.
        assert!(cells[6].parse::<i64>().is_ok(), "{server}: {row}\n{md}");
    }
    assert!(md.contains("idle_conns.py"), "prints its commands: {md}");
}

/// `benches/run.sh percore` in its QUICK smoke mode, on one workload: every per-core peer
/// (corewire's echo example, tokio current-thread, monoio, glommio, the raw-ring floor) serves
/// the timing pass and the perf pass without a failed run, so the suite keeps working.
#[test]
fn percore_suite_quick_mode_runs_every_peer() {
    cargo_build(&["-p", "corewire", "--example", "echo_server"]);
    let bin_dir = std::path::Path::new(BENCHCTL).parent().unwrap();
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/run.sh"))
        .arg("percore")
        .env("QUICK", "1")
        .env("PORT_BASE", port_base(2).to_string())
        .env("BIN_DIR", bin_dir)
        .env("COREWIRE_ECHO", bin_dir.join("examples/echo_server"))
        .env("WORKLOAD", "64 conn × depth 4, 64 B")
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{md}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for peer in ["corewire", "tokio-ct", "monoio", "glommio-1", "floor"] {
        let row = format!("| 64 conn × depth 4, 64 B | {peer} | 1/1 |");
        assert_eq!(md.matches(&row).count(), 2, "{peer} in both passes:\n{md}");
    }
    assert!(md.contains("+ "), "prints its commands: {md}");
    assert!(!md.contains("Irregular runs"), "{md}");
    if md.contains("perf not found") {
        return;
    }
    // The perf pass fills enters/req for the io_uring servers: the floor's row has a figure.
    let floor_rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| 64 conn × depth 4, 64 B | floor |"))
        .collect();
    let enters = floor_rows[1].split('|').nth(10).unwrap().trim();
    assert!(enters.parse::<f64>().is_ok_and(|e| e > 0.0), "{md}");
}

/// `benches/run.sh fairness` in QUICK mode with two budgets: the RPC service with its handler
/// cost serves every row, and the probe's head-of-line and CPU columns hold figures (the
/// server printed them for the probe's own listener), so the suite keeps working.
#[test]
fn fairness_suite_quick_mode_fills_the_probe_columns() {
    let bin_dir = std::path::Path::new(BENCHCTL).parent().unwrap();
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/run.sh"))
        .arg("fairness")
        .env("QUICK", "1")
        .env("BIN_DIR", bin_dir)
        // Not used by the RPC service; run.sh checks it exists.
        .env("COREWIRE_ECHO", BENCHCTL)
        .env("BUDGETS", "unlimited,4")
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{md}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = md
        .lines()
        .find(|l| l.starts_with("| workload | variant |"))
        .unwrap_or_else(|| panic!("no table:\n{md}"));
    let columns: Vec<&str> = header.split('|').map(str::trim).collect();
    let at = |name: &str| {
        columns
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no {name:?} column: {header}"))
    };
    for budget in ["unlimited", "4"] {
        let prefix = format!("| 8 hot × depth 256 (64 B) + probe (64 B) | budget={budget} | 1/1 |");
        let row = md
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no budget={budget} row:\n{md}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        for column in ["probe HOL p99", "probe HOL max", "srv CPU %", "cli CPU %"] {
            assert!(
                cells[at(column)].parse::<f64>().is_ok(),
                "{column} of budget={budget}: {row}"
            );
        }
        assert_eq!(cells[at("errors (sum)")], "0", "{row}");
    }
    assert!(
        md.contains("--hash-rounds 32 --probe-addr 127.0.0.1:"),
        "{md}"
    );
    assert!(md.contains("+ "), "prints its commands: {md}");
    assert!(!md.contains("Irregular runs"), "{md}");
}

/// `benches/run.sh kv-fairness` in QUICK mode: corewire-kv serves the hot MSET/MGET
/// connections and the probe under both budgets, and every row has its figures.
#[test]
fn kv_fairness_quick_mode_measures_both_budgets() {
    cargo_build(&["-p", "corewire-kv", "--bin", "corewire-kv"]);
    let bin_dir = std::path::Path::new(BENCHCTL).parent().unwrap();
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/run.sh"))
        .arg("kv-fairness")
        .env("QUICK", "1")
        .env("COREWIRE_KV", bin_dir.join("corewire-kv"))
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{md}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for budget in ["unlimited", "default"] {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {budget} |")))
            .unwrap_or_else(|| panic!("no budget {budget} row:\n{md}"));
        // probe p50, p99, max, hot cmds/s, hot keys/s, server CPU %, clients CPU %.
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        for (i, cell) in cells[2..9].iter().enumerate() {
            assert!(cell.parse::<f64>().is_ok(), "cell {i} of {row}\n{md}");
        }
    }
    assert!(
        md.contains("--budget unlimited"),
        "prints its commands: {md}"
    );
}
