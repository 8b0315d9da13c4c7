//! Accepting connections on a runtime's shards, with no central accept thread.
//!
//! Every transport's listener shares the same pieces: a [`Handoff`] (placement policy,
//! per-shard connection counts, the counters and the guard that keeps them true), a
//! [`StopSignal`], and the [`ListenerHandle`] it returns. [`TcpEndpoint`] is TCP's listener
//! (RDMA's lives in the transport crate); it accepts in one of two modes:
//! - `ReusePort`: every shard binds its own SO_REUSEPORT listener; the kernel spreads
//!   connections by hash (cheapest, but blind to load).
//! - `Handoff`: acceptor shard(s) accept and hand each connection to the shard a
//!   [`Placement`] policy picks (least-connections by default), like glommio's
//!   `shared_accept` + `bind_to_executor` or Seastar's load balancing.

mod handle;
mod handoff;
mod placement;
mod stop;
mod tcp;

pub use handle::ListenerHandle;
pub use handoff::{Arrived, Handoff, Placed};
pub use placement::{ConnCounts, ConnGuard, Placement, PlacementFn, PlacementInput};
pub use stop::StopSignal;
pub use tcp::{AcceptMode, Accepted, TcpEndpoint};
