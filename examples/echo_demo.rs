//! The README demo: a 2-shard echo server (one acceptor handing connections to the shard
//! with the fewest, with per-connection fairness budgets) and a short verified client load
//! from a second runtime in the same process.
//!
//! ```text
//! cargo run --release --example echo_demo
//! ```

#[path = "echo_support/mod.rs"]
mod echo_support;

use std::process::ExitCode;
use std::time::Duration;

use corewire::runtime::accept::{AcceptMode, Placement};

use corewire::TcpEndpoint;
use corewire::{Budget, Runtime};

use echo_support::connection::{serve_echo, EchoLimits};
use echo_support::load::{run_load, LoadSpec, StopAfter};

const SERVER_SHARDS: usize = 2;
const CONNS: usize = 8;
const DEPTH: usize = 32;
const SIZE: usize = 128;
const LOAD_FOR: Duration = Duration::from_millis(1500);

fn main() -> ExitCode {
    echo_support::logging::init();
    match demo() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<(), Box<dyn std::error::Error>> {
    // Unpinned: the server and the client share this machine's cores.
    let server_rt = Runtime::builder()
        .shards(SERVER_SHARDS)
        .pin(false)
        .name("echo-server")
        .build()?;
    let budget = Budget::default();
    let limits = EchoLimits::default();
    let server = TcpEndpoint::bind("127.0.0.1:0".parse()?)
        .mode(AcceptMode::handoff(Placement::LeastConnections))
        .budget(budget)
        .serve(&server_rt, move |accepted| serve_echo(accepted, limits))?;

    let client_rt = Runtime::builder()
        .shards(2)
        .pin(false)
        .name("echo-client")
        .build()?;
    let spec = LoadSpec {
        addr: server.local_addr(),
        conns: CONNS,
        depth: DEPTH,
        size: SIZE,
        stop: StopAfter::Duration(LOAD_FOR),
    };
    let report = run_load(&client_rt, &spec);
    client_rt.shutdown();
    let placed = server.placed_connections();
    let stats = server_rt.stats();
    server.stop();
    server_rt.shutdown();
    let report = report?;

    println!(
        "corewire echo demo: {SERVER_SHARDS}-shard server (handoff, least-connections, budget \
         {} msgs / {} KiB per round), {CONNS} connections x {DEPTH} in flight, {SIZE}-byte messages",
        budget.max_messages.unwrap_or(0),
        budget.max_bytes.unwrap_or(0) / 1024,
    );
    println!(
        "  {} messages echoed and verified in {:.2} s: {:.0} msg/s",
        report.messages,
        report.elapsed.as_secs_f64(),
        report.qps()
    );
    println!(
        "  latency p50 {:.0} us, p99 {:.0} us",
        report.latency(0.5).as_secs_f64() * 1e6,
        report.latency(0.99).as_secs_f64() * 1e6
    );
    for (shard, s) in stats.iter().enumerate() {
        println!(
            "  server shard {shard}: {} connections placed, budget exhausted {} times, {} protocol errors",
            placed[shard], s.budget_exhausted, s.protocol_errors
        );
    }
    Ok(())
}
