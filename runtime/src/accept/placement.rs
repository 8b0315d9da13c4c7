//! Where a new connection goes.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::shard::ShardId;

/// What a placement policy may look at.
#[non_exhaustive]
pub struct PlacementInput<'a> {
    /// The address of the connecting peer, when known.
    pub peer: Option<SocketAddr>,
    /// The shard that accepted the connection.
    pub acceptor: ShardId,
    /// Open connections of this server on each shard, right now.
    pub open: &'a [usize],
}

/// A custom placement: picks the shard of each new connection.
pub type PlacementFn = Arc<dyn Fn(&PlacementInput<'_>) -> ShardId + Send + Sync>;

/// The policy of an accept handoff (Seastar's load-balancing choices, plus a user function).
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Placement {
    /// The shard with the fewest open connections of this server (ties rotate).
    #[default]
    LeastConnections,
    /// Each shard in turn.
    RoundRobin,
    /// Every connection on one shard.
    Fixed(ShardId),
    /// Whatever the function returns (an out-of-range shard falls back to the acceptor).
    Custom(PlacementFn),
}

impl fmt::Debug for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::LeastConnections => f.write_str("LeastConnections"),
            Placement::RoundRobin => f.write_str("RoundRobin"),
            Placement::Fixed(s) => write!(f, "Fixed({s})"),
            Placement::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// Per-shard connection counts of one server, shared by its acceptors and shards.
pub struct ConnCounts {
    open: Box<[AtomicUsize]>,
    accepted: Box<[AtomicU64]>,
    rotation: AtomicUsize,
}

impl ConnCounts {
    /// Counts for `shards` shards, all zero.
    pub fn new(shards: usize) -> ConnCounts {
        ConnCounts {
            open: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
            accepted: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            rotation: AtomicUsize::new(0),
        }
    }

    /// Open connections per shard.
    pub fn open(&self) -> Vec<usize> {
        self.open
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Connections placed on each shard since the server started.
    pub fn placed(&self) -> Vec<u64> {
        self.accepted
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Count a connection on `shard` from now until the guard drops.
    pub fn open_guard(self: &Arc<Self>, shard: ShardId) -> ConnGuard {
        self.open[shard].fetch_add(1, Ordering::Relaxed);
        self.accepted[shard].fetch_add(1, Ordering::Relaxed);
        ConnGuard {
            counts: self.clone(),
            shard,
        }
    }

    /// The shard `placement` puts a new connection from `peer` on, accepted on `acceptor`.
    pub fn choose(
        &self,
        placement: &Placement,
        acceptor: ShardId,
        peer: Option<SocketAddr>,
    ) -> ShardId {
        let n = self.open.len();
        let turn = self.rotation.fetch_add(1, Ordering::Relaxed);
        let chosen = match placement {
            Placement::Fixed(s) => *s,
            Placement::RoundRobin => turn % n,
            Placement::LeastConnections => {
                // Shards within one open connection of the least loaded count as equally
                // loaded (a one-connection difference is often just a handoff in flight);
                // among them the one with the fewest placed so far wins, so a storm of
                // short-lived connections spreads evenly; exact ties rotate.
                let open = self.open();
                let placed = self.placed();
                let min_open = open.iter().copied().min().unwrap_or(0);
                let near: Vec<ShardId> = (0..n).filter(|&i| open[i] <= min_open + 1).collect();
                let min_placed = near.iter().map(|&i| placed[i]).min().unwrap_or(0);
                let ties: Vec<ShardId> = near
                    .into_iter()
                    .filter(|&i| placed[i] == min_placed)
                    .collect();
                ties[turn % ties.len()]
            }
            Placement::Custom(f) => f(&PlacementInput {
                peer,
                acceptor,
                open: &self.open(),
            }),
        };
        if chosen < n {
            chosen
        } else {
            tracing::warn!(
                chosen,
                shards = n,
                "placement chose a shard that does not exist"
            );
            acceptor
        }
    }
}

/// Decrements the shard's open count when the connection's task ends.
pub struct ConnGuard {
    counts: Arc<ConnCounts>,
    shard: ShardId,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.counts.open[self.shard].fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_cycles() {
        let c = ConnCounts::new(3);
        let got: Vec<_> = (0..6)
            .map(|_| c.choose(&Placement::RoundRobin, 0, None))
            .collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn least_connections_prefers_emptier_shard() {
        let c = Arc::new(ConnCounts::new(3));
        let _a = c.open_guard(0);
        let _b = c.open_guard(0);
        let _d = c.open_guard(2);
        for _ in 0..5 {
            assert_eq!(c.choose(&Placement::LeastConnections, 0, None), 1);
        }
    }

    #[test]
    fn least_connections_spreads_ties() {
        let c = ConnCounts::new(4);
        let mut hits = [0; 4];
        for _ in 0..400 {
            hits[c.choose(&Placement::LeastConnections, 0, None)] += 1;
        }
        assert_eq!(hits, [100; 4]);
    }

    #[test]
    fn guards_count_open_and_placed() {
        let c = Arc::new(ConnCounts::new(2));
        let g = c.open_guard(1);
        assert_eq!(c.open(), vec![0, 1]);
        drop(g);
        assert_eq!(c.open(), vec![0, 0]);
        assert_eq!(c.placed(), vec![0, 1]);
    }

    #[test]
    fn fixed_and_custom() {
        let c = ConnCounts::new(4);
        assert_eq!(c.choose(&Placement::Fixed(3), 0, None), 3);
        let custom = Placement::Custom(Arc::new(|i: &PlacementInput<'_>| i.acceptor + 1));
        assert_eq!(c.choose(&custom, 2, None), 3);
        // Out of range falls back to the acceptor instead of panicking.
        assert_eq!(c.choose(&Placement::Fixed(9), 1, None), 1);
    }
}
