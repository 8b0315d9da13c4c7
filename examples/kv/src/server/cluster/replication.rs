//! Where cluster mode meets replication: the node's role in the cluster decides what the
//! data path does (replicate a primary, or serve as one), and failover needs the
//! replication offset and a write pause for a planned switch.
//!
//! The data path is the replica side's (`server::replica`: the link to a primary,
//! promotion) and the primary side's (`server::repl_master`: the stream, its offset, which a
//! replica's follows too).

use crate::cluster::node::NodeId;

/// Start replicating the primary `id` at `host:port` (dropping what this node holds).
pub(super) fn follow(id: &NodeId, host: &str, port: u16) {
    tracing::warn!(primary = %id, host, port, "cluster: replicating a primary");
    let shard = super::super::shard::current();
    super::super::replica::replicate_from(&shard, host.to_owned(), port);
}

/// Stop replicating and accept writes; ends once writes are taken.
pub(super) async fn promote() {
    tracing::warn!("cluster: serving as a primary");
    let shard = super::super::shard::current();
    if let Some(promoted) = super::super::replica::promote(&shard) {
        promoted.await;
    }
}

/// This node's replication offset: a primary's produced stream, a replica's applied one.
pub(super) fn offset() -> u64 {
    super::super::repl_master::identity().master_repl_offset
}

/// A manual failover: hold writes until `until_ms` (Unix ms) or [`unpause_writes`].
pub(super) fn pause_writes(until_ms: u64) {
    super::super::shard::current()
        .shared
        .session
        .clients
        .pause(until_ms, false);
}

/// The manual failover ended. It also ends a CLIENT PAUSE that was in force (Redis keeps
/// the two apart; a manual failover is short and rare).
pub(super) fn unpause_writes() {
    super::super::shard::current()
        .shared
        .session
        .clients
        .unpause();
}
