//! The I/O side of cluster mode and MIGRATE.
//!
//! - Shard 0 owns the node's [`Topology`] ([`node::ClusterNode`]): it runs the CLUSTER
//!   commands that change it, the cluster bus ([`bus`]), and after every change saves
//!   `nodes.conf` ([`conf_file`]) and sends the new [`SlotMap`] to every shard before the
//!   change is acknowledged.
//! - Every shard holds its [`SlotMap`] ([`ClusterShard`]); its connections check requests
//!   against it, and [`execute`] checks again, in the same turn as the command, on the shard
//!   that owns the keys.
//! - MIGRATE runs on the shard that holds its keys ([`migrate`]).
//! - The node's role (replica or primary) drives replication ([`replication`]).

mod bus;
pub(crate) mod conf_file;
mod migrate;
mod node;
mod peer;
mod replication;

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;

pub(crate) use migrate::Migrations;
pub(crate) use node::ClusterNode;

use super::shard::{self, Shard};
use super::sink::Origin;
use crate::cluster::command::ClusterRequest;
use crate::cluster::slots::key_slot;
use crate::cluster::{redirect, ClusterGate, SharedMap, SlotMap};
use crate::command::Command;
use crate::reply::Reply;

/// A shard's part of cluster mode (and of MIGRATE, which also works without it).
pub(crate) struct ClusterShard {
    /// The routing snapshot; `None` without `--cluster-enabled`.
    map: Option<SharedMap>,
    /// Slots this shard is handing to another node (CLUSTER SETSLOT NODE): checked empty
    /// and closed in one turn, until the new configuration arrives. Value: the new owner's
    /// `ip:port`.
    fenced: RefCell<HashMap<u16, String>>,
    pub migrations: Migrations,
    /// Shard 0 in cluster mode: the node's configuration and its bus.
    pub node: OnceCell<Rc<ClusterNode>>,
}

impl ClusterShard {
    pub fn new(map: Option<Arc<SlotMap>>) -> ClusterShard {
        ClusterShard {
            map: map.map(|map| Rc::new(RefCell::new(map))),
            fenced: RefCell::default(),
            migrations: Migrations::default(),
            node: OnceCell::new(),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.map.is_some()
    }

    /// The per-connection half, for a new connection on this shard.
    pub fn gate(&self) -> Option<ClusterGate> {
        self.map.clone().map(ClusterGate::new)
    }

    fn install(&self, map: Arc<SlotMap>) {
        if let Some(current) = &self.map {
            *current.borrow_mut() = map;
        }
    }

    fn fence(&self, slot: u16, new_owner: String) {
        self.fenced.borrow_mut().insert(slot, new_owner);
    }

    fn unfence(&self, slot: u16) {
        self.fenced.borrow_mut().remove(&slot);
    }

    /// The cluster check on the shard that owns the keys.
    fn check(&self, shard: &Shard, command: &Command, now: u64) -> Option<Reply> {
        let map = self.map.as_ref()?.borrow();
        let keys = command.keys();
        let migrate = matches!(command, Command::Cluster(ClusterRequest::Migrate(_)));
        let read = !command.is_write();
        let redirect = shard.with_store(|store| {
            redirect::at_owner(&map, &keys, migrate, read, |key| {
                store.contains_live(key, now)
            })
        });
        if redirect.is_some() {
            return redirect;
        }
        let fenced = self.fenced.borrow();
        let slot = keys.first().map(|key| key_slot(key))?;
        let owner = fenced.get(&slot)?;
        Some(Reply::error(format!("MOVED {slot} {owner}")))
    }
}

/// Runs a command on the shard that owns it: waits while a MIGRATE holds its keys, applies
/// the cluster check, and runs what needs the glue (MIGRATE, the node's CLUSTER commands).
/// `None`: the reply comes later, through [`Shard::deliver`]. Inlined (see
/// [`Shard::execute`]).
#[inline]
pub(crate) fn execute(shard: &Shard, origin: Origin, command: Command, now: u64) -> Option<Reply> {
    let cluster = &shard.cluster;
    if let Command::Cluster(ClusterRequest::MigrateCommit { .. }) = command {
        // MIGRATE's own last step: it holds the keys' lock.
        return shard.execute_plain(origin, command, now);
    }
    if cluster.migrations.holds_any(&command) {
        cluster.migrations.defer(origin, command);
        return None;
    }
    // A replica applies its master's stream whatever slots it serves itself.
    let from_master = shard.shared.replica.is_master_origin(&origin);
    if let Some(reply) = cluster.check(shard, &command, now).filter(|_| !from_master) {
        return Some(reply);
    }
    match command {
        Command::Cluster(ClusterRequest::Migrate(request)) => {
            migrate::start(shard, origin, *request, now)
        }
        Command::Cluster(ClusterRequest::Node(request)) => match cluster.node.get() {
            Some(node) => node.run(origin, request),
            None => Some(Reply::error(
                "ERR This instance has cluster support disabled",
            )),
        },
        command => shard.execute_plain(origin, command, now),
    }
}

/// Sends the new routing snapshot to every shard (FIFO after anything shard 0 sent before).
async fn publish(map: Arc<SlotMap>, shards: usize) {
    for target in 0..shards {
        let map = map.clone();
        let install = move || shard::with(|s| s.cluster.install(map));
        if target == shard::current().id {
            install();
        } else if corewire::runtime::send_to(target, install).await.is_err() {
            tracing::error!(target, "cluster configuration for a missing shard");
        }
    }
}

/// Asks shard `target` for the live keys of `slot`; with `fence_to` and none left, closes
/// the slot there in the same turn (see [`ClusterShard::fenced`]).
async fn count_and_fence(target: usize, slot: u16, fence_to: Option<String>) -> u64 {
    let run = move || {
        shard::with(|s| {
            let count = s.with_store(|store| store.count_keys_in_slot(slot, shard::now_ms()));
            if let (0, Some(owner)) = (count, fence_to) {
                s.cluster.fence(slot, owner);
            }
            count as u64
        })
    };
    if target == shard::current().id {
        return run();
    }
    corewire::runtime::submit_to(target, move || async move { run() })
        .await
        .unwrap_or(u64::MAX)
}

async fn unfence(target: usize, slot: u16) {
    let run = move || shard::with(|s| s.cluster.unfence(slot));
    if target == shard::current().id {
        run();
    } else if corewire::runtime::send_to(target, run).await.is_err() {
        tracing::error!(target, "unfence for a missing shard");
    }
}

/// Keys stored on every shard together.
async fn total_keys(shards: usize) -> u64 {
    let mut total = 0;
    for target in 0..shards {
        let count = move || shard::with(|s| s.with_store(|store| store.len() as u64));
        total += if target == shard::current().id {
            count()
        } else {
            corewire::runtime::submit_to(target, move || async move { count() })
                .await
                .unwrap_or(u64::MAX)
        };
    }
    total
}

/// Bulk string of a static text.
fn bulk(text: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(text.as_bytes()))
}
