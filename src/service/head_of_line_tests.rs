//! The head-of-line count on a simulated shard: busy connections and a probe over in-memory
//! pairs on one real shard, messages fed in a fixed order, counts asserted. No timing: the
//! count is in messages, and the shard's order of work is the same on every run.

use std::sync::Arc;

use bytes::Bytes;
use corewire_runtime::head_of_line::{HeadOfLine, HeadOfLineSnapshot};
use corewire_runtime::{spawn_local, yield_now, Budget};
use corewire_transport::frame::{FrameHeader, FrameKind};
use corewire_transport::mem::{pair, MemConnection, MemOptions};
use corewire_transport::Connection;

use super::tests::{on_a_shard, Test};
use super::{dispatch, Server, Service};

/// Serve `Test` on a fresh pair whose ends have `budget`, recording into `head_of_line`.
fn serve(budget: Budget, head_of_line: &Arc<HeadOfLine>) -> MemConnection {
    let server = Server::builder().service(|_| Test).build();
    let (ours, theirs) = pair({
        let mut o = MemOptions::default();
        o.budget = budget;
        o
    });
    let record = Some(head_of_line.clone());
    spawn_local(async move {
        let services = server.services_here();
        dispatch::serve(theirs, services, server.options(), record).await
    });
    ours
}

/// `hot` connections each with `backlog` requests queued, then one probe request: all arrive
/// while every server reader is idle, hot ones first. Returns the probe's head-of-line
/// histogram (one request) and the hot connections'.
fn probe_behind(hot: usize, backlog: u64, budget: Budget) -> (HeadOfLineSnapshot, u64) {
    on_a_shard(move || async move {
        let hot_hol = Arc::new(HeadOfLine::new());
        let probe_hol = Arc::new(HeadOfLine::new());
        let hot_peers: Vec<_> = (0..hot).map(|_| serve(budget, &hot_hol)).collect();
        let probe = serve(budget, &probe_hol);
        // Every server reader runs once and waits in `recv`.
        yield_now().await;
        for peer in &hot_peers {
            for id in 0..backlog {
                let h = FrameHeader::request(Test::ID, 0, id);
                peer.send(&h, Bytes::from_static(b"hot"), Bytes::new())
                    .await
                    .unwrap();
            }
        }
        let h = FrameHeader::request(Test::ID, 0, 0);
        probe
            .send(&h, Bytes::from_static(b"probe"), Bytes::new())
            .await
            .unwrap();
        let reply = probe.recv().await.unwrap().unwrap();
        assert_eq!(reply.header.kind, FrameKind::Response);
        // Every hot request is answered too.
        for peer in &hot_peers {
            for _ in 0..backlog {
                peer.recv().await.unwrap().unwrap();
            }
        }
        (probe_hol.snapshot(), hot_hol.snapshot().count)
    })
}

const HOT: usize = 8;
const DEEP: u64 = 256;

#[test]
fn with_a_budget_the_probe_waits_for_about_one_round_of_each_hot_connection() {
    for b in [4u32, 16, 32] {
        let (probe, hot_answered) = probe_behind(HOT, DEEP, Budget::messages(b));
        let round = u64::from(b) * HOT as u64;
        assert_eq!(probe.count, 1);
        assert_eq!(
            hot_answered,
            HOT as u64 * DEEP,
            "every hot request recorded"
        );
        assert!(
            probe.max >= round && probe.max <= round + u64::from(b),
            "budget {b}: probe waited behind {} messages, bound {round} + one batch",
            probe.max
        );
    }
}

#[test]
fn unlimited_the_probe_waits_for_the_whole_backlog() {
    let (shallow, _) = probe_behind(HOT, DEEP / 4, Budget::UNLIMITED);
    let (deep, _) = probe_behind(HOT, DEEP, Budget::UNLIMITED);
    let (budgeted, _) = probe_behind(HOT, DEEP, Budget::messages(32));
    assert!(
        deep.max >= HOT as u64 * DEEP,
        "probe waited behind {} messages, backlog {}",
        deep.max,
        HOT as u64 * DEEP
    );
    assert!(
        deep.max > 3 * shallow.max,
        "the count grows with the backlog: {} at depth {}, {} at depth {DEEP}",
        shallow.max,
        DEEP / 4,
        deep.max
    );
    assert!(
        deep.max >= 4 * budgeted.max,
        "budget 32 bounds it: {} against {} unlimited",
        budgeted.max,
        deep.max
    );
}
