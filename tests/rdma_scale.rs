//! Connections at scale on one shard, in the soft-RoCE VM: with the shared receive queue a
//! connection costs no receive memory, so the default 3 MiB pool serves a thousand.

mod rdma_common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::transport::rdma::{self, RdmaConfig};
use corewire::{spawn_local, Client, ClientOptions, Service};
use rdma_common::{runtime, setup, Echo};

const CONNECTIONS: usize = 1000;

/// A thousand connections on one server shard with the default settings (shared receive
/// queue, 3 MiB pool), each doing a round trip while all are open; the registered memory
/// stays the pool's.
#[test]
fn rdma_a_thousand_connections_on_one_shard_with_the_default_pool() {
    let config = RdmaConfig::default();
    let pool_bytes = config.pool_bytes as u64;
    let s = setup(1, config.clone());
    let addr = s.addr;
    // The clients' side: two shards of 500 connections each.
    let crt = runtime(2, config);
    let started = Instant::now();
    let handles: Vec<_> = (0..2)
        .map(|shard| {
            crt.spawn_on(shard, move || async move {
                let mut clients = Vec::new();
                // Connect in waves (the listener's backlog is 128).
                for wave in 0..(CONNECTIONS / 2).div_ceil(50) {
                    let n = (CONNECTIONS / 2 - wave * 50).min(50);
                    let tasks: Vec<_> = (0..n)
                        .map(|_| {
                            spawn_local(async move {
                                Client::connect_rdma(addr, ClientOptions::default()).await
                            })
                        })
                        .collect();
                    for t in tasks {
                        clients.push(t.await.unwrap().expect("connect"));
                    }
                }
                // Every connection is open: each does a round trip.
                let tasks: Vec<_> = clients
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let c = c.clone();
                        spawn_local(async move {
                            let body = Bytes::from(format!("conn {shard}/{i}"));
                            let r = c
                                .request(Echo::ID, 0)
                                .payload(body.clone())
                                .timeout(Duration::from_secs(120))
                                .send()
                                .await
                                .unwrap();
                            assert_eq!(r.payload, body);
                        })
                    })
                    .collect();
                let mut ok = 0;
                for t in tasks {
                    t.await.unwrap();
                    ok += 1;
                }
                // Keep every connection open until the server's counters are read.
                (ok, clients.len())
            })
        })
        .collect();
    let mut round_trips = 0;
    for h in handles {
        let (ok, _) = h.wait().unwrap();
        round_trips += ok;
    }
    let elapsed = started.elapsed();
    let st = rdma::stats(&s.rt)[0];
    println!(
        "rdma_scale: {} connections opened on one shard, {round_trips} round trips in {:.1}s; \
         registered {} KiB (pool cap {} KiB), shared receive queue {} buffers, CQ {} entries \
         ({} reserved)",
        st.connections_opened,
        elapsed.as_secs_f64(),
        st.pool_registered_bytes / 1024,
        pool_bytes / 1024,
        st.srq_posted,
        st.cq_capacity,
        st.cq_reserved,
    );
    assert_eq!(round_trips, CONNECTIONS);
    assert!(st.connections_opened >= CONNECTIONS as u64, "{st:?}");
    assert!(st.pool_registered_bytes <= pool_bytes, "{st:?}");
    assert_eq!(st.connections_refused, 0, "{st:?}");
}
