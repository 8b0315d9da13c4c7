//! An echo service and a client on the corewire service framework.
//!
//!     cargo run --release --example rpc_echo -- [--shards 2] [--calls 20000] [--size 64]

use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use corewire::{
    service_id, spawn_local, Client, ClientOptions, Request, Response, Runtime, Server, Service,
    Status,
};

struct Echo;

impl Service for Echo {
    const ID: u32 = service_id("echo");

    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(Response::new(req.payload).with_attachment(req.attachment))
    }
}

#[derive(Parser)]
#[command(
    name = "rpc_echo",
    about = "An echo service and a client on the corewire service framework"
)]
struct Cli {
    #[arg(long, default_value_t = 2)]
    shards: usize,
    /// Calls the client makes.
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
    /// Payload bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let Cli {
        shards,
        calls,
        size,
    } = Cli::parse();

    let rt = Runtime::builder().shards(shards).build().expect("runtime");
    let server = Server::builder()
        .service(|_shard| Echo)
        .build()
        .serve(
            &rt,
            corewire::TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()),
        )
        .expect("listen");
    let addr = server.local_addr();
    println!("echo service on {addr}, {shards} shards");

    // The client runs on the same shards: each shard opens a connection and keeps 16 calls in
    // flight on it.
    let started = Instant::now();
    let handles = rt.spawn_on_all(move |_shard| async move {
        let client = Client::connect_tcp(addr, ClientOptions::default())
            .await
            .unwrap();
        let per_task = calls / shards / 16;
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let client = client.clone();
                spawn_local(async move {
                    let payload = Bytes::from(vec![0xab; size]);
                    for _ in 0..per_task {
                        let reply = client.call(Echo::ID, 0, payload.clone()).await.unwrap();
                        assert_eq!(reply, payload);
                    }
                    per_task
                })
            })
            .collect();
        let mut done = 0;
        for t in tasks {
            done += t.await.unwrap();
        }
        done
    });
    let done: usize = handles.into_iter().map(|h| h.wait().unwrap()).sum();
    let took = started.elapsed();
    println!(
        "{done} calls of {size} B in {:.2?}: {:.0} calls/s",
        took,
        done as f64 / took.as_secs_f64().max(1e-9)
    );
    println!(
        "connections placed per shard: {:?}",
        server.placed_connections()
    );
    server.stop();
    std::thread::sleep(Duration::from_millis(10));
    rt.shutdown();
}
