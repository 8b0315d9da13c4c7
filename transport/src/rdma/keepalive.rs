//! Keepalive: how a connection learns that its peer is gone when nothing is being sent.
//!
//! An RC queue pair notices a dead peer only when one of its sends runs out of transport
//! retries; rdma_cm has no keepalive of its own, and a peer whose machine died after it had
//! acknowledged every request leaves nothing to retransmit, so an idle connection (or one
//! whose calls all wait for replies) would stay open for ever. Every
//! `RdmaConfig::keepalive` interval the shard looks at each connection: one that completed
//! no work request during the whole interval posts a zero-byte RDMA WRITE, which needs no
//! receive buffer, key or CPU on the peer (its adapter acknowledges it), and which fails,
//! ending the connection with every pending call, once the retry budget is spent.
//!
//! The decision is a plain state machine ([`Keepalive`]), tested below without a device;
//! the connection (`conn/`) posts the probe and feeds completions back.

use std::rc::Weak;
use std::time::Duration;

use corewire_runtime::sleep;

use super::shard::RdmaShard;

/// One connection's keepalive state.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Keepalive {
    /// The connection's completion count at the last tick.
    seen: u64,
    /// A probe was posted and has not completed.
    outstanding: bool,
}

impl Keepalive {
    /// The interval ended with the connection's completion count at `activity`: whether to
    /// post a probe now. Never a second probe while one is in flight (its completion, or its
    /// failure once the retries run out, is the answer).
    pub fn tick(&mut self, activity: u64) -> bool {
        let idle = activity == self.seen;
        self.seen = activity;
        if !idle || self.outstanding {
            return false;
        }
        self.outstanding = true;
        true
    }

    /// The probe completed (either way).
    pub fn completed(&mut self) {
        self.outstanding = false;
    }
}

/// Every `interval`, give each connection of the shard its keepalive tick; ends with the
/// shard's RDMA state. A shard with open connections therefore wakes once per interval.
pub(crate) async fn sweep(shard: Weak<RdmaShard>, interval: Duration) {
    loop {
        sleep(interval).await;
        let Some(shard) = shard.upgrade() else {
            return;
        };
        for conn in shard.live_conns() {
            conn.keepalive_tick();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_idle_for_a_whole_interval_is_probed() {
        let mut k = Keepalive::default();
        // Traffic during the first interval: no probe.
        assert!(!k.tick(5));
        // None during the next: probe.
        assert!(k.tick(5));
        k.completed();
        // The probe's own completion counts as activity: the interval after it is quiet
        // only if nothing else happened either.
        assert!(!k.tick(6));
        assert!(k.tick(6));
    }

    #[test]
    fn never_two_probes_in_flight() {
        let mut k = Keepalive::default();
        assert!(k.tick(0), "idle from the start");
        // Still waiting for the probe (a dead peer: retries take longer than an interval).
        assert!(!k.tick(0));
        assert!(!k.tick(0));
        k.completed();
        assert!(k.tick(0));
    }

    #[test]
    fn a_busy_connection_is_never_probed() {
        let mut k = Keepalive::default();
        for activity in 1..100 {
            assert!(!k.tick(activity));
        }
    }
}
