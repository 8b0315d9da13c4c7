//! Which shard owns a key, how a command splits into per-shard parts, and how the parts'
//! replies merge back into one client reply.

pub mod atomic;
mod keyops;
mod merge;
mod plan;
mod slot;

pub use keyops::{join_cursor, split_cursor};
pub use merge::{MergeError, MergeFn, Merger};
pub use plan::{
    broadcast_merged, route, route_clients, single_shard, split_keys_merged, to_shards, FanOut,
    Route, ShardPart,
};
pub use slot::{key_slot, shard_of, SLOT_COUNT};

#[cfg(test)]
mod tests;
