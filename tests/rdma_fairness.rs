//! The fairness budget on the RDMA path, on a real soft-RoCE device
//! (`cargo xtask test` runs this binary inside the rxe VM). The CQ poller copies every
//! received message into its connection's buffer (at most `poll_batch` completions per
//! `ibv_poll_cq`); the budget then bounds how many frames the connection's `recv` hands up
//! per round. Both bounds are read from the shard's RDMA counters, so nothing here depends
//! on timing.

mod rdma_common;

use bytes::Bytes;
use corewire::transport::rdma::{self, PollerMode, RdmaConfig};
use corewire::{spawn_local, Budget, Client, ClientOptions, Service};
use rdma_common::{polling, runtime, setup, Echo};

/// Calls kept in flight at once: many frames share each 8 KiB message, so the server's reader
/// finds far more than a budget's worth buffered after one completion.
const CALLS: u32 = 300;

/// Serve with `server_config`, pipeline [`CALLS`] small calls from a client on its own
/// runtime, and return the server shard's RDMA and runtime counters.
fn pipeline(server_config: RdmaConfig) -> (rdma::RdmaStats, u64) {
    let s = setup(1, server_config);
    let client_rt = runtime(1, polling());
    let addr = s.addr;
    let n = client_rt
        .run_on(0, move || async move {
            let c = Client::connect_rdma(addr, {
                let mut o = ClientOptions::default();
                o.window = CALLS as usize;
                o
            })
            .await
            .unwrap();
            let tasks: Vec<_> = (0..CALLS)
                .map(|i| {
                    let c = c.clone();
                    spawn_local(async move {
                        let body = Bytes::from(format!("call {i:04} {}", "x".repeat(48)));
                        let r = c.call(Echo::ID, 0, body.clone()).await.unwrap();
                        assert_eq!(r, body);
                    })
                })
                .collect();
            let mut n = 0;
            for t in tasks {
                t.await.unwrap();
                n += 1;
            }
            n
        })
        .unwrap();
    assert_eq!(n, CALLS);
    let rdma_stats = rdma::stats(&s.rt)[0];
    let exhausted = s.rt.stats().iter().map(|st| st.budget_exhausted).sum();
    client_rt.shutdown();
    (rdma_stats, exhausted)
}

#[test]
fn rdma_budget_bounds_frames_per_round_and_the_batch_bounds_completions_per_poll() {
    let (st, exhausted) = pipeline({
        let mut o = polling();
        o.budget = Budget::messages(4);
        o.poll_batch = 2;
        o
    });
    assert!(
        (1..=4).contains(&st.max_round_frames),
        "a connection handed up more frames in one round than its budget of 4: {st:?}"
    );
    assert!(
        (1..=2).contains(&st.max_conn_recvs_per_poll),
        "a polling-mode pass reaps at most poll_batch completions: {st:?}"
    );
    assert!(exhausted > 0, "the budget never ran out: {st:?}");
}

/// Event mode drains the whole CQ per wake-up; the budget still bounds what is handed up.
#[test]
fn rdma_budget_bounds_frames_per_round_in_event_mode() {
    let (st, exhausted) = pipeline({
        let mut o = polling();
        o.budget = Budget::messages(4);
        o.mode = PollerMode::Event;
        o
    });
    assert!(
        (1..=4).contains(&st.max_round_frames),
        "a connection handed up more frames in one round than its budget of 4: {st:?}"
    );
    assert!(st.max_conn_recvs_per_poll >= 1, "{st:?}");
    assert!(exhausted > 0, "the budget never ran out: {st:?}");
}

/// Unlimited: the counter shows a connection handing up more than one budget's worth, so the
/// bound above comes from the budget, not from how messages happen to arrive.
#[test]
fn rdma_unlimited_budget_hands_up_whole_messages_in_one_round() {
    let (st, exhausted) = pipeline({
        let mut o = polling();
        o.budget = Budget::UNLIMITED;
        o
    });
    assert!(st.max_round_frames > 4, "{st:?}");
    assert_eq!(exhausted, 0, "an unlimited budget never runs out: {st:?}");
}
