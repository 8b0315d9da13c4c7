//! The RPC client's own cost per call, without sockets or a second process:
//! `rpc_client_micro [--conns 16] [--depth 4] [--size 64] [--calls 1000000]`.
//!
//! One shard runs `conns` clients, each over an in-memory connection to a hand-written echo
//! peer (it answers each request with its payload), and `depth` call loops per client. Prints
//! one JSON line: the shard thread's CPU time per call (client and peer together: the peer is
//! the same code in every build, so a change in the figure is the client's), wall time per
//! call, allocations and task polls per call. No kernel work and no other process in the loop,
//! so the figure moves far less than a socket benchmark's on a shared machine: for A/B
//! comparisons of the client's user-space path.

use std::process::ExitCode;

use clap::Parser;
use std::time::Instant;

use bytes::Bytes;
use corewire::transport::frame::FrameKind;
use corewire::transport::mem::{pair, MemConnection, MemOptions};
use corewire::transport::rpc::response_header;
use corewire::transport::Connection;
use corewire::{spawn_local, Client, ClientOptions, Runtime};
use corewire_bench::alloc_count::{alloc_count, CountingAlloc};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[derive(Parser)]
#[command(
    name = "rpc_client_micro",
    about = "The RPC client's own cost per call, over in-memory connections: one JSON line",
    args_override_self = true
)]
struct Config {
    /// Clients (connections) on the shard (at least 1).
    #[arg(long, default_value_t = 16)]
    conns: usize,
    /// Call loops per client (at least 1).
    #[arg(long, default_value_t = 4)]
    depth: usize,
    /// Payload bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Calls measured, over all loops.
    #[arg(long, default_value_t = 1_000_000)]
    calls: usize,
    /// Calls before the measurement.
    #[arg(long = "warmup-calls", default_value_t = 100_000)]
    warmup: usize,
}

fn thread_cpu_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .expect("thread CPU clock");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

async fn echo_peer(conn: MemConnection) {
    while let Ok(Some(frame)) = conn.recv().await {
        if frame.header.kind != FrameKind::Request {
            continue;
        }
        let reply = response_header(&frame.header);
        if conn
            .send(&reply, frame.payload, Bytes::new())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// `per_loop` calls on each of `depth` loops per client.
async fn run_calls(clients: &[Client<MemConnection>], depth: usize, per_loop: usize, size: usize) {
    let payload = Bytes::from(vec![7u8; size]);
    let mut loops = Vec::with_capacity(clients.len() * depth);
    for client in clients {
        for _ in 0..depth {
            let (client, payload) = (client.clone(), payload.clone());
            loops.push(spawn_local(async move {
                for _ in 0..per_loop {
                    let reply = client.call(1, 1, payload.clone()).await.expect("echo call");
                    assert_eq!(reply.len(), payload.len());
                }
            }));
        }
    }
    for l in loops {
        l.await.expect("call loop");
    }
}

fn main() -> ExitCode {
    let cfg = Config::parse();
    let rt = Runtime::builder()
        .shards(1)
        .pin(false)
        .build()
        .expect("runtime");
    let Config {
        conns,
        depth,
        size,
        calls,
        warmup,
    } = cfg;
    let (conns, depth) = (conns.max(1), depth.max(1));
    let loops = conns * depth;
    let (per_loop, warm_per_loop) = ((calls / loops).max(1), (warmup / loops).max(1));
    let polls = || corewire::runtime::with_local_stats(|s| s.tasks_polled());
    let out = rt
        .run_on(0, move || async move {
            let clients: Vec<_> = (0..conns)
                .map(|_| {
                    let (ours, peer) = pair(MemOptions::default());
                    spawn_local(echo_peer(peer));
                    Client::new(ours, {
                        let mut o = ClientOptions::default();
                        o.window = depth;
                        o
                    })
                })
                .collect();
            run_calls(&clients, depth, warm_per_loop, size).await;
            let (cpu0, allocs0, polls0, wall0) =
                (thread_cpu_ns(), alloc_count(), polls(), Instant::now());
            run_calls(&clients, depth, per_loop, size).await;
            let wall = wall0.elapsed();
            (
                thread_cpu_ns() - cpu0,
                alloc_count() - allocs0,
                polls() - polls0,
                wall,
            )
        })
        .expect("run");
    let (cpu_ns, allocs, task_polls, wall) = out;
    let n = (per_loop * loops) as f64;
    println!(
        "{{\"mode\":\"rpc-client-micro\",\"conns\":{conns},\"depth\":{depth},\"size\":{size},\"calls\":{},\"cpu_ns_per_call\":{:.1},\"wall_ns_per_call\":{:.1},\"allocs_per_call\":{:.3},\"polls_per_call\":{:.3}}}",
        per_loop * loops,
        cpu_ns as f64 / n,
        wall.as_nanos() as f64 / n,
        allocs as f64 / n,
        task_polls as f64 / n,
    );
    ExitCode::SUCCESS
}
