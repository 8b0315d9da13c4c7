//! The master side of replication: the hub on shard 0 that owns the stream's backlog and
//! the replica links, and the replication commands' glue (PSYNC, SYNC, REPLCONF, WAIT,
//! ROLE, min-replicas-to-write).
//!
//! Every shard streams its writes to the hub (`repl_feed.rs`); the hub appends each batch
//! to the backlog (numbering the bytes: `master_repl_offset`) and to every replica's
//! queue. A replica's connection lives on whichever shard accepted it: its link task here
//! hands the queued bytes to that shard's connection in bounded chunks, waiting while the
//! connection has more than [`HIGH_WATER`] unsent, and drops the replica when what is
//! queued for it passes `client-output-buffer-limit replica` (so a replica that stops
//! reading costs at most the limit). A full sync is in `repl_sync.rs`.
//!
//! The decisions (partial or full, WAIT, good replicas) are in [`crate::repl`]. Here: the
//! hub's state (`hub.rs`), a transaction's parts from several shards joined into one
//! MULTI/EXEC (`group.rs`), a replica's link (`link.rs`), the commands' glue
//! (`commands.rs`) and the chain of a node that follows a master (`follow.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::shard::{self, now_ms};
use crate::repl::{Identity, ReplInfo};
use crate::reply::Reply;

/// A connection with more than this much unsent is not handed more.
pub(super) const HIGH_WATER: usize = 1 << 20;
/// Bytes handed to a connection in one message at most.
const CHUNK: usize = 256 << 10;
/// The hub's timer: WAIT timeouts, pings, limits, settings.
const TICK: Duration = Duration::from_millis(20);

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const SELECT_0: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";

/// Replication's state that every shard reads: INFO's and ROLE's snapshot, and what the
/// write path checks for min-replicas-to-write.
#[derive(Default)]
pub(crate) struct ReplShared {
    info: Mutex<Option<ReplInfo>>,
    /// The replicas good by `min-replicas-max-lag` (refreshed by the hub's timer; the
    /// `min-replicas-to-write` they are held to is the live configuration's).
    good: AtomicU64,
}

impl ReplShared {
    pub fn info(&self) -> ReplInfo {
        let mut info = (self.info.lock())
            .map(|i| i.clone())
            .unwrap_or_default()
            .unwrap_or_else(fresh_info);
        info.now_ms = now_ms();
        info
    }

    /// `-NOREPLICAS` when min-replicas-to-write (`min`, as set now: a CONFIG SET applies
    /// to the next write, not at the hub's next tick) is not met.
    pub fn write_refusal(&self, min: u64) -> Option<Reply> {
        (min > 0 && self.good.load(Ordering::Relaxed) < min)
            .then(|| Reply::error("NOREPLICAS Not enough good replicas to write."))
    }
}

/// Before the hub starts, INFO shows a master with its id and no backlog.
fn fresh_info() -> ReplInfo {
    ReplInfo {
        identity: Identity::new(startup_replid().to_owned()),
        ..ReplInfo::default()
    }
}

/// The replication id the node starts with (random per run, as Redis's).
fn startup_replid() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(crate::repl::random_replid)
}

mod commands;
mod follow;
mod group;
mod hub;
mod link;
mod shard_cut;
mod shard_link;
mod shard_sync;

pub(super) use commands::{closed, dispatch};
pub(crate) use follow::{drop_replicas, follow, follow_stream, identity, promote};
pub(super) use follow::{following, set_follow_cut};
pub(super) use hub::{
    acked, alive, clear_acked, receive, set_cuts, set_state, start_hub, sync_start,
};
pub(super) use link::{send, Gone};
pub(in crate::server) use shard_link::served as shard_links_served;
pub(super) use shard_link::tap as shard_tap;
