//! The transport-agnostic handoff every listener uses (TCP's accept loop and RDMA's connect
//! requests alike): placement, per-shard counts, and shard counters kept true by guards.

use corewire_runtime::accept::{Handoff, Placement};
use corewire_runtime::{spawn_local, Runtime};

#[test]
fn handoffs_are_counted_only_when_a_connection_changes_shard() {
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    let handoff = Handoff::new(2, Some(Placement::RoundRobin));
    let h = handoff.clone();
    // Two "connections" accepted on shard 0: round robin keeps one there, sends one to 1.
    let (arrivals_tx, arrivals_rx) = std::sync::mpsc::channel();
    rt.run_on(0, move || async move {
        for _ in 0..2 {
            let placed = h.place(None);
            let tx = arrivals_tx.clone();
            h.deliver(placed, move |arrived| {
                let shard = corewire_runtime::shard_id();
                // The connection's task holds its count until it ends.
                spawn_local(async move {
                    let _arrived = arrived;
                    corewire_runtime::sleep(std::time::Duration::from_millis(100)).await;
                });
                tx.send(shard).unwrap();
            })
            .await;
        }
    })
    .unwrap();
    let mut arrived_on: Vec<usize> = arrivals_rx.iter().take(2).collect();
    arrived_on.sort();
    assert_eq!(arrived_on, vec![0, 1]);
    let stats = rt.stats();
    assert_eq!(stats[0].handoffs_out, 1);
    assert_eq!(
        stats[0].handoffs_in, 0,
        "a connection kept local is no handoff"
    );
    assert_eq!(stats[1].handoffs_in, 1);
    assert_eq!(handoff.counts().open(), vec![1, 1]);
    assert_eq!(
        (stats[0].open_connections, stats[1].open_connections),
        (1, 1)
    );
    // The connections end: every count goes back, without anyone decrementing by hand.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while handoff.counts().open() != vec![0, 0] && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stats = rt.stats();
    assert_eq!(
        (stats[0].open_connections, stats[1].open_connections),
        (0, 0)
    );
    assert_eq!(handoff.counts().open(), vec![0, 0]);
    assert_eq!(handoff.counts().placed(), vec![1, 1]);
}

#[test]
fn a_connection_refused_before_it_arrives_is_uncounted() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let handoff = Handoff::new(1, None);
    let h = handoff.clone();
    rt.run_on(0, move || async move {
        let placed = h.place(None);
        assert_eq!(placed.shard(), 0);
        assert_eq!(h.counts().open(), vec![1]);
        drop(placed); // e.g. the transport refused it (no memory, bad handshake)
        assert_eq!(h.counts().open(), vec![0]);
    })
    .unwrap();
    assert_eq!(rt.stats()[0].open_connections, 0);
}
