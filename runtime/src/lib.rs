//! corewire's runtime: one pinned shard per core, each running its own loop over an io_uring
//! ring, with `!Send` tasks, timers, pollers (the RDMA completion-queue poller plugs in here),
//! cross-shard messages, sharded TCP accept and per-connection fairness budgets.
//!
//! ```no_run
//! use corewire_runtime::{Runtime, spawn_local, sleep};
//! use std::time::Duration;
//!
//! let rt = Runtime::builder().shards(2).build().unwrap();
//! let answer = rt.run_on(1, || async {
//!     let task = spawn_local(async { 6 * 7 });
//!     sleep(Duration::from_millis(1)).await;
//!     task.await.unwrap()
//! });
//! assert_eq!(answer.unwrap(), 42);
//! ```
#![deny(missing_docs)]

pub mod accept;
mod block_guard;
mod blocking;
pub mod compat;
pub mod coop;
mod driver;
mod executor;
pub mod fs;
pub mod head_of_line;
mod helper_cpus;
pub mod io;
pub mod mesh;
pub mod metrics;
pub mod net;
pub mod poller;
pub mod protocol_error;
mod runtime;
pub mod shard;
pub mod sync;
pub mod timer;
#[cfg(feature = "tls")]
pub mod tls;

#[doc(hidden)]
pub mod __private {
    //! For `#[corewire::main]` / `#[corewire::test]` only.
    pub use crate::private::{run_main, run_test, Outcome};
}
mod private;

use std::future::Future;

pub use block_guard::assert_can_block;
pub use blocking::spawn_blocking;
pub use coop::{at_poll_end, poll_started_at, Budget, PollEnd, RoundBudget};
/// `#[main]` / `#[test]`: run an `async fn` on a fresh runtime (see `corewire-macros`).
pub use corewire_macros::{main, test};
pub use driver::{Backend, Features};
pub use executor::{yield_now, JoinError, JoinHandle};
pub use mesh::{send_to, submit_to, MeshError, RemoteHandle};
pub use poller::{register_poller, unregister_poller, PollOutcome, Poller, PollerId};
pub use protocol_error::{report_bad_call, report_protocol_error};
pub use runtime::{Runtime, RuntimeBuilder};
pub use shard::{
    shard_count, shard_id, try_shard_id, work_waiting, ShardId, ShardStats, ShardStatsSnapshot,
};
pub use timer::{interval, sleep, sleep_until, timeout, Elapsed, Interval, Sleep};

/// Spawn a `!Send` task on the current shard. Panics off a shard thread. The caller's
/// location is kept for stall reports.
#[track_caller]
pub fn spawn_local<F, T>(future: F) -> JoinHandle<T>
where
    F: Future<Output = T> + 'static,
    T: 'static,
{
    let spawned_at = std::panic::Location::caller();
    shard::context::with_executor(|e| e.spawn(future, spawned_at))
}

/// Spawn a `!Send` task whose output nobody awaits (a connection's): like [`spawn_local`]
/// with the handle dropped, without the join state that handle would need.
#[track_caller]
pub(crate) fn spawn_detached<F>(future: F)
where
    F: Future<Output = ()> + 'static,
{
    let spawned_at = std::panic::Location::caller();
    shard::context::with_executor(|e| e.spawn_detached(future, spawned_at))
}

/// The I/O backend of this thread's shard (`None` off a shard).
pub fn current_backend() -> Option<Backend> {
    shard::context::try_current().map(|ctx| ctx.driver.borrow().backend())
}

/// Look at the current shard's counters (e.g. to count protocol errors). Panics off a shard.
pub fn with_local_stats<R>(f: impl FnOnce(&ShardStats) -> R) -> R {
    f(&shard::context::current().remote.stats)
}
