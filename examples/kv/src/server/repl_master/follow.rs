//! A node that replicates another and serves replicas of its own (a chain, Redis's
//! PSYNC2 "sub-replicas"), on the hub: the replica side (`server/replica`) drives these.
//!
//! While it follows a master, the node's stream is exactly its master's: the link passes
//! on each byte once applied ([`follow_stream`], see `repl::forward`), and the node's
//! replication id and `master_repl_offset` are its master's, so a sub-replica can continue
//! against this node or against the master with the same history. A sub-replica's full
//! sync cuts its snapshot while the link applies nothing ([`set_follow_cut`]), at the
//! offset the stream then has. A new history from the master (a full sync, or `+CONTINUE`
//! with another id) drops the sub-replicas, so they resynchronize; a promotion keeps the
//! history as `replid2` and drops them too, so they continue partially with the new id.

use bytes::Bytes;

use super::hub::{with_hub, Hub};
use super::link::Gone;
use super::{shard, SELECT_0};
use crate::repl::{Backlog, Follow, Identity, Role};

impl Hub {
    /// Drops every replica link (Redis's `disconnectSlaves`).
    fn drop_all(&mut self) {
        for replica in &mut self.replicas {
            replica.drop_link();
        }
    }
}

/// This node now replicates history `replid` from `offset`: after its full sync (`full`),
/// or after `+CONTINUE` (with a new id when the master was promoted). Its own writes are no
/// longer streamed, the master's bytes are ([`follow_stream`]).
pub(crate) fn follow(replid: String, offset: u64, full: bool) {
    with_hub(|hub| {
        if !hub.following {
            // Its shards' own streams end with its own history.
            super::shard_link::reset_all();
            // Full syncs begun while this node was a master cut its own writes' streams.
            for replica in &mut hub.replicas {
                if replica.sync_start.is_none() && replica.cut.is_some() {
                    replica.drop_link();
                }
            }
        }
        hub.following = true;
        match hub.identity.follow(replid, offset, full) {
            Follow::Same => {}
            Follow::NewId => hub.drop_all(),
            Follow::NewHistory => {
                hub.backlog = Some(Backlog::new(hub.backlog_size, offset));
                hub.drop_all();
            }
        }
        let (size, offset) = (hub.backlog_size, hub.identity.master_repl_offset);
        hub.backlog
            .get_or_insert_with(|| Backlog::new(size, offset));
        hub.publish(&shard::current().shared.repl);
    });
}

/// Bytes of the master's stream this node applied, in order: into the backlog and to its
/// own replicas.
pub(crate) fn follow_stream(bytes: Bytes) {
    with_hub(|hub| {
        if hub.following {
            hub.stream(None, 0, bytes);
        }
    });
}

/// The replicas resynchronize (the node is about to load another snapshot).
pub(crate) fn drop_replicas() {
    with_hub(|hub| hub.drop_all());
    super::shard_link::reset_all();
}

/// Whether the node streams its master's bytes (not its own writes).
pub(in crate::server) fn following() -> bool {
    with_hub(|hub| hub.following)
}

/// A full sync's snapshot began while the master's stream was held (`hold_stream`): the
/// replica's stream starts at the offset the node has now; what was held for it meanwhile
/// is in the snapshot.
pub(in crate::server) fn set_follow_cut(id: u64) -> Result<(), Gone> {
    with_hub(|hub| {
        let offset = hub.identity.master_repl_offset;
        let following = hub.following;
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        if !following || replica.cut.take().is_none() {
            replica.drop_link();
            return Err(Gone);
        }
        replica.out.clear();
        replica.out_bytes = 0;
        replica.sync_start = Some(offset);
        tracing::info!(
            ip = %replica.ip, port = replica.port, offset,
            "full sync of a sub-replica: the snapshot is cut at the master's stream offset"
        );
        Ok(())
    })
}

/// This node's replication state (replid, offset), for the replica side.
pub(crate) fn identity() -> Identity {
    with_hub(|hub| hub.identity.clone())
}

/// The node becomes a master (REPLICAOF NO ONE, a failover), once the link's last applied
/// bytes were passed on: a new history that shares the old one up to the current offset,
/// its replicas dropped so that they continue partially with the new id, and its own
/// writes streamed from each shard's cut on.
pub(crate) async fn promote() {
    let here = shard::current();
    let _hold = crate::server::replica::hold_stream(&here).await;
    let all: Vec<usize> = (0..here.count).collect();
    let cuts = super::super::rdb_save::on_all(&all, super::super::repl_feed::start_and_cut).await;
    with_hub(|hub| {
        for (floor, cut) in hub.floor.iter_mut().zip(&cuts) {
            *floor = cut.unwrap_or(u64::MAX);
        }
        hub.following = false;
        hub.identity.shift(crate::repl::random_replid());
        hub.identity.role = Role::Master;
        hub.drop_all();
        hub.ensure_backlog();
        // The old master's stream may have left another database selected (Redis selects
        // again before the next write).
        hub.stream(None, 0, Bytes::from_static(SELECT_0));
        hub.publish(&here.shared.repl);
    });
}
