//! Two services on one server, with shard-local state: every shard counts the hits it served
//! (no locks, no atomics), and a `total` call gathers the counts from all shards with
//! cross-shard messages.
//!
//!     cargo run --release --example counters

use std::cell::Cell;

use bytes::Bytes;
use corewire::{
    service_id, shard_count, submit_to, Client, ClientOptions, Request, Response, Runtime, Server,
    Service, Status,
};

corewire::shard_local! {
    /// This shard's hit count. Shard state lives on its shard: nothing else touches it.
    static HITS: Cell<u64> = Cell::new(0);
}

struct Hit;

impl Service for Hit {
    const ID: u32 = service_id("hit");

    async fn call(&self, _req: Request) -> Result<Response, Status> {
        HITS.with(|h| h.set(h.get() + 1));
        Ok(Response::default())
    }
}

struct Stats;

impl Service for Stats {
    const ID: u32 = service_id("stats");

    async fn call(&self, _req: Request) -> Result<Response, Status> {
        let mut per_shard = Vec::new();
        for shard in 0..shard_count() {
            let n = submit_to(shard, || async { HITS.with(|h| h.get()) })
                .await
                .map_err(|e| Status::Internal(e.to_string()))?;
            per_shard.push(n.to_string());
        }
        Ok(Response::new(per_shard.join(",")))
    }
}

fn main() {
    let rt = Runtime::builder().shards(2).build().expect("runtime");
    let server = Server::builder()
        .service(|_| Hit)
        .service(|_| Stats)
        .build()
        .serve(
            &rt,
            corewire::TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()),
        )
        .expect("listen");
    let addr = server.local_addr();

    let report = rt
        .run_on(0, move || async move {
            // Several connections: SO_REUSEPORT spreads them over the shards.
            let mut clients = Vec::new();
            for _ in 0..8 {
                clients.push(
                    Client::connect_tcp(addr, ClientOptions::default())
                        .await
                        .unwrap(),
                );
            }
            for (i, c) in clients.iter().enumerate() {
                for _ in 0..(i + 1) * 10 {
                    c.call(Hit::ID, 0, Bytes::new()).await.unwrap();
                }
            }
            clients[0].call(Stats::ID, 0, Bytes::new()).await.unwrap()
        })
        .unwrap();
    let report = String::from_utf8_lossy(&report).to_string();
    let per_shard: Vec<u64> = report.split(',').map(|n| n.parse().unwrap()).collect();
    println!(
        "hits per shard: {per_shard:?}, total {}",
        per_shard.iter().sum::<u64>()
    );
    assert_eq!(
        per_shard.iter().sum::<u64>(),
        (1..=8).map(|i| i * 10).sum::<u64>()
    );
    server.stop();
    rt.shutdown();
}
