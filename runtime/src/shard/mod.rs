//! Shards: one pinned thread per core, each with its own ring, executor, timers and pollers.

pub(crate) mod context;
mod idle_spin;
mod local;
mod remote;
mod run_loop;
pub mod stall;
mod stats;

pub use context::{shard_count, shard_id, try_shard_id, work_waiting};
pub use local::ShardLocal;
pub(crate) use remote::Message;
pub use remote::ShardRemote;
pub use run_loop::ShardHook;
pub(crate) use run_loop::{run_shard, ShardConfig, ShardHooks};
pub use stall::{StallReport, StallSource};
pub use stats::{ShardStats, ShardStatsSnapshot, StatKind};

/// Index of a shard, `0..shard_count()`.
pub type ShardId = usize;
