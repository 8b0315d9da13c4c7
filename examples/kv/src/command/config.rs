//! CONFIG SET's run-time settings: what the shards apply once the session has validated a
//! CONFIG SET (see `session/config_set.rs`).

use crate::store::EvictionPolicy;

/// A setting that changes what the shards do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `maxmemory`, bytes for the whole server (0: no limit); each shard takes its share.
    MaxMemory(u64),
    MaxMemoryPolicy(EvictionPolicy),
    MaxClients(usize),
    /// `protected-mode yes|no`.
    ProtectedMode(bool),
}
