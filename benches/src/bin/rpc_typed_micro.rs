//! What the typed layer costs per call, without sockets or a second process:
//! `rpc_typed_micro [--typed [--async-handler]] [--size 64] [--calls 1280000]`.
//!
//! One shard runs 16 clients over in-memory connections to a corewire server on the same
//! shard, 4 call loops per client, calling the raw echo (`Service::call_now`, the RPC
//! benchmark's server) or, with `--typed`, the echo generated from `proto/echo.proto` with its
//! generated client: its synchronous handler (answered in `call_now`), or with
//! `--async-handler` the same handler as an `async fn` (served through `call`'s future). Prints one JSON line: the shard thread's CPU time per call (client and
//! server together), wall time and allocations per call. For A/B comparisons of the typed
//! path against the raw one on a noisy machine (the socket benchmark is `benches/run.sh grpc`).

use std::process::ExitCode;

use clap::Parser;
use std::time::Instant;

use bytes::Bytes;
use corewire::transport::mem::{pair, MemConnection, MemOptions};
use corewire::{spawn_local, Client, ClientOptions, Runtime, Server, Service};
use corewire_bench::alloc_count::{alloc_count, CountingAlloc};
use corewire_bench::corewire_rpc::typed::{
    EchoAsyncClient, EchoAsyncServer, EchoClient, EchoMessage, EchoServer, TypedEcho,
};
use corewire_bench::corewire_rpc::{Echo, ECHO_METHOD};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[derive(Parser)]
#[command(
    name = "rpc_typed_micro",
    about = "What the typed layer costs per call, over in-memory connections: one JSON line",
    args_override_self = true
)]
struct Flags {
    /// Call the echo generated from proto/echo.proto with its generated client (default: the
    /// raw echo).
    #[arg(long)]
    typed: bool,
    /// With `--typed`: the echo whose handler is an `async fn` (`EchoAsync`).
    #[arg(long, requires = "typed")]
    async_handler: bool,
    /// Payload bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Calls measured, over all loops.
    #[arg(long, default_value_t = 1_280_000)]
    calls: usize,
}
const CLIENTS: usize = 16;
const DEPTH: usize = 4;

fn thread_cpu_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .expect("thread CPU clock");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// Which echo is called.
#[derive(Clone, Copy)]
enum Path {
    Raw,
    Typed,
    TypedAsync,
}

async fn run(clients: &[Client<MemConnection>], path: Path, per_loop: usize, size: usize) {
    let payload = Bytes::from(vec![7u8; size]);
    let mut loops = Vec::new();
    for client in clients {
        for _ in 0..DEPTH {
            let (client, payload) = (client.clone(), payload.clone());
            loops.push(spawn_local(async move {
                let echo = EchoClient::from_client(client.clone());
                let echo_async = EchoAsyncClient::from_client(client.clone());
                for _ in 0..per_loop {
                    let message = || EchoMessage {
                        payload: payload.clone(),
                    };
                    let n = match path {
                        Path::Typed => echo.echo(message()).await.expect("typed echo"),
                        Path::TypedAsync => echo_async.echo(message()).await.expect("typed echo"),
                        Path::Raw => {
                            let reply = client.call(Echo::ID, ECHO_METHOD, payload.clone()).await;
                            assert_eq!(reply.expect("raw echo").len(), payload.len());
                            continue;
                        }
                    }
                    .into_inner()
                    .payload
                    .len();
                    assert_eq!(n, payload.len());
                }
            }));
        }
    }
    for l in loops {
        l.await.expect("call loop");
    }
}

fn main() -> ExitCode {
    let Flags {
        typed,
        async_handler,
        size,
        calls,
    } = Flags::parse();
    let path = match (typed, async_handler) {
        (false, _) => Path::Raw,
        (true, false) => Path::Typed,
        (true, true) => Path::TypedAsync,
    };
    let per_loop = (calls / (CLIENTS * DEPTH)).max(1);
    let rt = Runtime::builder()
        .shards(1)
        .pin(false)
        .build()
        .expect("runtime");
    let (cpu, allocs, wall) = rt
        .run_on(0, move || async move {
            let server = match path {
                Path::Raw => Server::builder().service(|_| Echo::default()).build(),
                Path::Typed => Server::builder()
                    .service(|_| EchoServer::new(TypedEcho { served: None }))
                    .build(),
                Path::TypedAsync => Server::builder()
                    .service(|_| EchoAsyncServer::new(TypedEcho { served: None }))
                    .build(),
            };
            let clients: Vec<_> = (0..CLIENTS)
                .map(|_| {
                    let (ours, theirs) = pair(MemOptions::default());
                    let server = server.clone();
                    spawn_local(async move {
                        corewire::service::serve_connection(&server, theirs).await
                    });
                    let options = {
                        let mut o = ClientOptions::default();
                        o.window = DEPTH;
                        o
                    };
                    Client::new(ours, options)
                })
                .collect();
            run(&clients, path, (per_loop / 10).max(1), size).await;
            let (cpu0, allocs0, wall0) = (thread_cpu_ns(), alloc_count(), Instant::now());
            run(&clients, path, per_loop, size).await;
            (
                thread_cpu_ns() - cpu0,
                alloc_count() - allocs0,
                wall0.elapsed(),
            )
        })
        .expect("run");
    let n = (per_loop * CLIENTS * DEPTH) as f64;
    println!(
        "{{\"mode\":\"rpc-typed-micro\",\"typed\":{typed},\"async_handler\":{async_handler},\"size\":{size},\"calls\":{},\"cpu_ns_per_call\":{:.1},\"wall_ns_per_call\":{:.1},\"allocs_per_call\":{:.3}}}",
        n as u64,
        cpu as f64 / n,
        wall.as_nanos() as f64 / n,
        allocs as f64 / n,
    );
    ExitCode::SUCCESS
}
