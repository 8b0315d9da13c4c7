//! Shard links on the replica: once the master consented (`+SHARD-STREAMS N`, see
//! `repl::shards`), replica shard `i` runs its own link to master shard `i` on its own
//! thread: handshake (`REPLCONF shard-streams N key-map M shard i`, then PSYNC with shard
//! `i`'s own resume point), its part of the snapshot loaded into its own store only
//! (`load::shard_part`), then its shard's stream applied here. Each link reconnects and
//! resumes on its own (a cut link resynchronizes its shard alone, partially when the
//! master's shard backlog still has it); the node-level state is their aggregate
//! (`ReplicaShared`).
//!
//! The links' full syncs are one cut of the master for all of them (the master gathers
//! them: `repl::shard_link`'s rounds), and the node answers `-LOADING` from the first
//! link's `+FULLRESYNC` until every link loaded its part of that cut; a link that would
//! continue its old stream meanwhile syncs in full too. A transaction over several shards
//! is held at its barrier on each involved shard until every part arrived
//! (`barriers.rs`).
//!
//! When shard links are used, and when not:
//! - only when this build applies them ([`offers`]: `repl::shards::SERVED`),
//!   `repl-shard-links` is not `no` and the node is not in a cluster (a cluster replica's
//!   failover compares single-stream offsets), with more than one shard, and only on the master's
//!   exact consent (same shard count and key map; anything else keeps the single stream);
//! - not on a node asked for a stream by a sub-replica: shard links cannot be passed on
//!   (a chain needs one stream with one offset), so such a node goes back to the single
//!   stream (a full sync) until the next REPLICAOF, and the sub-replica, refused meanwhile
//!   (`-NOMASTERLINK`), retries and follows it;
//! - a shard link refused by the master (it restarted with another shard count, or
//!   follows a master now) ends every shard link: the node goes back to the single stream
//!   until the next REPLICAOF.
//!
//! A promotion (REPLICAOF NO ONE, failover) stops the links after what each dispatched
//! ran; the node's new history starts at the sum of the shards' applied offsets (the
//! master side's identity is set to it here, under an id no one else has, so no
//! sub-replica continues a history it did not see).

use std::rc::Rc;
use std::sync::atomic::Ordering;

use corewire::runtime::spawn_local;

use super::super::shard::{self, Shard};
use super::super::shared::ServerShared;
use super::link::{run_link, Link};
use super::Which;
use crate::repl::MasterLinkState as LinkState;

/// Whether this node offers shard links to its master now. A cluster replica does not: its
/// failover (CLUSTER FAILOVER's wait for the primary's offset, the election's rank by offset)
/// speaks of the single stream's offset.
pub(super) fn offers(shared: &ServerShared) -> bool {
    super::super::repl_master::shard_links_served()
        && !shared.cluster_enabled
        && shared.session.live.get("repl-shard-links").as_deref() != Some("no")
        && !shared.replica.single_only.load(Ordering::Relaxed)
}

/// Runs `n` shard links (one on each shard) for REPLICAOF `generation` until they end:
/// this REPLICAOF was replaced (or the node promoted), a shard link was refused, or a
/// sub-replica asked for a stream. On shard 0, from the single stream's link task.
pub(super) async fn run_all(shard: &Rc<Shard>, generation: u64, n: usize) {
    let shared = shard.shared.clone();
    let replica = &shared.replica;
    if n != shard.count || n > replica.shard_slots.len() {
        return;
    }
    tracing::info!(links = n, "the master consented to shard links");
    // The node's stream (and its history) is no longer one its sub-replicas can follow.
    super::super::repl_master::drop_replicas();
    let history = crate::repl::random_replid();
    super::super::repl_master::follow(history.clone(), 0, true);
    replica.links_ended.store(false, Ordering::Relaxed);
    for slot in &replica.shard_slots[..n] {
        slot.state
            .store(LinkState::Connect.as_u8(), Ordering::Relaxed);
    }
    replica.use_shard_links(n);
    replica.shard_tasks.fetch_add(n, Ordering::Relaxed);
    super::sync_gate(&shared);
    // Spawned at once (a `submit_to` is only sent when polled).
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            spawn_local(corewire::runtime::submit_to(i, move || async move {
                let here = shard::current();
                let link = Link::new(here.shared.clone());
                let mut seq = 0;
                let which = Which::Shard { i, n };
                if run_link(&here, &link, which, generation, &mut seq)
                    .await
                    .is_err()
                {
                    here.shared
                        .replica
                        .links_ended
                        .store(true, Ordering::Relaxed);
                    super::wake_link(&here);
                }
            }))
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    // What the links applied is this node's data: a promotion (no target left) continues
    // from there, before it shifts the history (it waits for `shard_tasks`). A new
    // REPLICAOF's or the single stream's link sets the history itself once it syncs.
    if replica.target().is_none() {
        let applied: u64 = (replica.shard_slots[..n].iter())
            .map(|slot| slot.applied_offset.load(Ordering::Relaxed))
            .sum();
        super::super::repl_master::follow(history, applied, true);
    }
    // Back to the single stream's view (its link's next session, or none after a
    // promotion). A refused link keeps it there until the next REPLICAOF (the master
    // that consented refused: offering again would only repeat it).
    replica.shard_links.store(0, Ordering::Relaxed);
    replica.cut_abandoned();
    if replica.links_ended.load(Ordering::Relaxed) {
        replica.single_only.store(true, Ordering::Relaxed);
    }
    replica.shard_tasks.fetch_sub(n, Ordering::Relaxed);
    super::sync_gate(&shared);
}
