//! The in-memory connection pair, and the fairness budget every frame transport charges in
//! `recv` (so a reader that does nothing about fairness still yields).

use bytes::Bytes;
use corewire_runtime::{Budget, Runtime};
use corewire_transport::frame::FrameHeader;
use corewire_transport::mem::{pair, MemOptions};
use corewire_transport::Connection;

#[test]
fn recv_charges_the_budget_and_yields_when_a_round_is_spent() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let (received, yields) = rt
        .run_on(0, || async {
            let (a, b) = pair({
                let mut o = MemOptions::default();
                o.budget = Budget::messages(10);
                o
            });
            for id in 0..100 {
                let h = FrameHeader::request(1, 0, id);
                a.send(&h, Bytes::from_static(b"x"), Bytes::new())
                    .await
                    .unwrap();
            }
            let before = corewire_runtime::with_local_stats(|s| s.budget_exhausted());
            // A plain read loop: no budget code of its own.
            let mut received = Vec::new();
            while received.len() < 100 {
                let f = b.recv().await.unwrap().unwrap();
                received.push(f.header.correlation_id);
            }
            let after = corewire_runtime::with_local_stats(|s| s.budget_exhausted());
            (received, after - before)
        })
        .unwrap();
    assert_eq!(received, (0..100).collect::<Vec<_>>());
    // All 100 were there without waiting: a yield after each 10, bar the last round.
    assert_eq!(yields, 9);
}

#[test]
fn a_byte_budget_counts_payload_bytes() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let yields = rt
        .run_on(0, || async {
            let (a, b) = pair({
                let mut o = MemOptions::default();
                o.budget = Budget::messages(1000).with_bytes(4096);
                o
            });
            for id in 0..8 {
                let h = FrameHeader::request(1, 0, id);
                a.send(&h, Bytes::from(vec![0u8; 1024]), Bytes::new())
                    .await
                    .unwrap();
            }
            let before = corewire_runtime::with_local_stats(|s| s.budget_exhausted());
            for _ in 0..8 {
                b.recv().await.unwrap().unwrap();
            }
            corewire_runtime::with_local_stats(|s| s.budget_exhausted()) - before
        })
        .unwrap();
    // 4 KiB per round: one yield between the first four frames and the last four.
    assert_eq!(yields, 1);
}

#[test]
fn closing_one_end_ends_the_other_after_what_was_queued() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let (first, end) = rt
        .run_on(0, || async {
            let (a, b) = pair(MemOptions::default());
            a.send(&FrameHeader::request(1, 0, 7), Bytes::new(), Bytes::new())
                .await
                .unwrap();
            drop(a);
            let first = b.recv().await.unwrap().map(|f| f.header.correlation_id);
            let end = b.recv().await.unwrap().is_none();
            (first, end)
        })
        .unwrap();
    assert_eq!(first, Some(7));
    assert!(end);
}
