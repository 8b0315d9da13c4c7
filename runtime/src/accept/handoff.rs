//! The one handoff every transport's listener uses: pick the shard a new connection goes to,
//! count it there for as long as it lives, and keep the shard counters (`handoffs_out`,
//! `handoffs_in`, `open_connections`) true however the connection ends. TCP and RDMA
//! listeners differ only in what they accept and what they run on the chosen shard.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;

use super::placement::{ConnCounts, ConnGuard, Placement};
use crate::mesh;
use crate::shard::{context, ShardId};

/// Where one listener's connections go, and how many each shard holds.
#[derive(Clone)]
pub struct Handoff {
    counts: Arc<ConnCounts>,
    /// `None`: every connection stays on the shard that accepted it (SO_REUSEPORT listeners).
    placement: Option<Placement>,
}

impl Handoff {
    /// A handoff over `shards` shards; `placement` `None` keeps connections where accepted.
    pub fn new(shards: usize, placement: Option<Placement>) -> Handoff {
        Handoff {
            counts: Arc::new(ConnCounts::new(shards)),
            placement,
        }
    }

    /// The per-shard counts of this listener's connections.
    pub fn counts(&self) -> &Arc<ConnCounts> {
        &self.counts
    }

    /// On the accepting shard: choose the shard for a connection from `peer` and count it
    /// there from now on (until the returned ticket, or what it becomes, is dropped).
    pub fn place(&self, peer: Option<SocketAddr>) -> Placed {
        let from = context::current().id;
        let to = match &self.placement {
            None => from,
            Some(p) => self.counts.choose(p, from, peer),
        };
        Placed {
            from,
            to,
            guard: self.counts.open_guard(to),
        }
    }

    /// Run `start` on the placed shard: at once when that is this shard, else as a
    /// cross-shard message (waiting while the target's inbox is full). `start` receives the
    /// connection's [`Arrived`] token, to hold for as long as the connection lives.
    pub async fn deliver<F>(&self, placed: Placed, start: F)
    where
        F: FnOnce(Arrived) + Send + 'static,
    {
        let ctx = context::current();
        if placed.to == ctx.id {
            start(placed.arrive());
            return;
        }
        ctx.remote.stats.handoffs_out.incr();
        let to = placed.to;
        if mesh::send_to(to, move || start(placed.arrive()))
            .await
            .is_err()
        {
            // The message (and with it the ticket) was dropped: the count is already undone.
            tracing::error!(target = to, "handoff to a missing shard");
        }
    }
}

/// A connection counted on its shard but not there yet: `Send`, it travels with the
/// connection. Dropped on the way (the connection refused, the message lost), it uncounts.
pub struct Placed {
    from: ShardId,
    to: ShardId,
    guard: ConnGuard,
}

impl Placed {
    /// The shard the connection goes to.
    pub fn shard(&self) -> ShardId {
        self.to
    }

    /// On the target shard: the connection is here now.
    pub fn arrive(self) -> Arrived {
        let ctx = context::current();
        debug_assert_eq!(
            ctx.id, self.to,
            "a placed connection arrived on another shard"
        );
        if self.from != self.to {
            ctx.remote.stats.handoffs_in.incr();
        }
        ctx.remote.stats.open_connections.incr();
        Arrived {
            _guard: self.guard,
            _open: OpenConnection,
            _shard_bound: PhantomData,
        }
    }
}

/// A connection owned by this shard: hold it for as long as the connection lives. Dropping it
/// uncounts the connection from the listener's counts and the shard's `open_connections`.
/// `!Send`: it counts on the shard it arrived on.
pub struct Arrived {
    _guard: ConnGuard,
    _open: OpenConnection,
    _shard_bound: PhantomData<*const ()>,
}

/// Keeps the shard's `open_connections` gauge true however the connection task ends.
struct OpenConnection;

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if let Some(ctx) = context::try_current() {
            ctx.remote.stats.open_connections.sub(1);
        }
    }
}
