//! `#[corewire::test]` through the facade: per-shard state reached with cross-shard calls,
//! written as one async test.

use std::cell::Cell;

use corewire::sync::mpsc;
use corewire::{shard_id, shard_local, spawn_local, submit_to};

shard_local! {
    static VISITS: Cell<u32> = Cell::new(0);
}

#[corewire::test(shards = 2)]
async fn per_shard_state_through_cross_shard_calls() {
    for _ in 0..3 {
        submit_to(1, || async { VISITS.with(|v| v.set(v.get() + 1)) })
            .await
            .unwrap();
    }
    let (tx, mut rx) = mpsc::channel(1);
    spawn_local(async move { tx.send(VISITS.with(Cell::get)).await.unwrap() });
    assert_eq!(rx.recv().await, Some(0), "shard 0 was not visited");
    let remote = submit_to(1, || async { (shard_id(), VISITS.with(Cell::get)) }).await;
    assert_eq!(remote, Ok((1, 3)));
}
