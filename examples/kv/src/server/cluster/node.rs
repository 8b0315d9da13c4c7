//! The node's configuration on shard 0: the CLUSTER commands that read or change it, and
//! the commit that follows every change (save `nodes.conf`, send the new routing snapshot to
//! every shard, ping the other nodes) before the change is acknowledged.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use corewire::runtime::net::TcpListener;
use corewire::runtime::spawn_local;
use corewire::runtime::sync::{Mutex, Notify};

use super::super::shard::{self, now_ms};
use super::super::sink::Origin;
use super::conf_file::{random_node_id, ConfFile};
use super::{bulk, bus, count_and_fence, publish, replication, total_keys, unfence};
use crate::cluster::command::{SetSlot, HELP};
use crate::cluster::node::{NodeAddr, NodeId};
use crate::cluster::slots::ranges;
use crate::cluster::topology::{ClusterError, Effect};
use crate::cluster::{nodes_conf, render, NodeCommand, Topology};
use crate::reply::Reply;

pub(crate) struct ClusterNode {
    topology: RefCell<Topology>,
    file: ConfFile,
    shards: usize,
    /// One configuration-changing command at a time (SETSLOT NODE waits on a shard).
    admin: Mutex<()>,
    /// One save-and-publish at a time; `published` is the version it last completed.
    commit_lock: Mutex<()>,
    published: Cell<u64>,
    /// The primary the data path replicates (with its address), `None`: serving as a
    /// primary. What [`ClusterNode::follow_role`] last asked for.
    following: RefCell<Option<(NodeId, Option<NodeAddr>)>>,
    /// Wakes every bus link to ping now.
    pub(super) announce: Notify,
    pub(super) links: RefCell<bus::Links>,
}

impl ClusterNode {
    pub fn new(topology: Topology, file: ConfFile, shards: usize) -> Rc<ClusterNode> {
        Rc::new(ClusterNode {
            topology: RefCell::new(topology),
            file,
            shards,
            admin: Mutex::new(()),
            commit_lock: Mutex::new(()),
            // Never published yet: the first commit saves and publishes.
            published: Cell::new(u64::MAX),
            following: RefCell::new(None),
            announce: Notify::new(),
            links: RefCell::default(),
        })
    }

    /// Starts the bus (on shard 0) and makes the loaded configuration current everywhere.
    pub async fn start(self: &Rc<Self>, listener: TcpListener) {
        {
            use std::hash::{BuildHasher, Hasher};
            // Only the election's random delay uses it: the hasher's per-process keys do.
            let seed = std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish();
            let mut topology = self.topology_mut();
            topology.seed(seed);
            topology.set_my_offset(replication::offset());
        }
        self.commit().await;
        spawn_local(bus::listen(self.clone(), listener));
        spawn_local(bus::supervise(self.clone()));
    }

    pub(super) fn topology(&self) -> std::cell::Ref<'_, Topology> {
        self.topology.borrow()
    }

    pub(super) fn topology_mut(&self) -> std::cell::RefMut<'_, Topology> {
        self.topology.borrow_mut()
    }

    /// A CLUSTER subcommand that needs the node's configuration. Reads answer at once;
    /// changes answer once saved and published (`None`: delivered later).
    pub fn run(self: &Rc<Self>, origin: Origin, request: NodeCommand) -> Option<Reply> {
        if let Some(reply) = self.read(&request) {
            return Some(reply);
        }
        let node = self.clone();
        spawn_local(async move {
            let reply = node.change(request).await;
            shard::current().deliver(origin, reply);
        });
        None
    }

    fn read(&self, request: &NodeCommand) -> Option<Reply> {
        let topology = self.topology();
        let known = |id: &Bytes| {
            NodeId::parse(id)
                .and_then(|id| topology.find(&id))
                .is_some()
        };
        let unknown =
            |id: &Bytes| Reply::error(format!("ERR Unknown node {}", String::from_utf8_lossy(id)));
        Some(match request {
            NodeCommand::Info => render::info(&topology),
            NodeCommand::MyId => {
                Reply::Bulk(Bytes::copy_from_slice(topology.myself().id.as_bytes()))
            }
            NodeCommand::Nodes => render::nodes(&topology),
            NodeCommand::Slots => render::slots(&topology),
            NodeCommand::Shards => render::shards(&topology),
            NodeCommand::Links => links(&topology),
            NodeCommand::Help => help(),
            NodeCommand::CountFailureReports(id) if known(id) => {
                let index = NodeId::parse(id).and_then(|id| topology.find(&id));
                let count = index.map_or(0, |i| topology.count_failure_reports(i, now_ms()));
                Reply::Integer(count as i64)
            }
            NodeCommand::Replicas(id) if known(id) => {
                let index = NodeId::parse(id).and_then(|id| topology.find(&id));
                match index {
                    Some(i) if topology.node(i).is_some_and(|n| !n.is_replica()) => {
                        render::replicas(&topology, i)
                    }
                    _ => Reply::error("ERR The specified node is not a master"),
                }
            }
            NodeCommand::CountFailureReports(id) | NodeCommand::Replicas(id) => unknown(id),
            _ => return None,
        })
    }

    async fn change(self: &Rc<Self>, request: NodeCommand) -> Reply {
        let _admin = self.admin.lock().await;
        let now = now_ms();
        let result = match request {
            NodeCommand::UpdateSlots { ranges, delete } => {
                self.topology_mut().update_slots(&ranges, delete)
            }
            NodeCommand::FlushSlots => self.flush_slots().await,
            NodeCommand::SetSlot { slot, action } => self.set_slot(slot, action).await,
            NodeCommand::Meet { ip, port, cport } => {
                let met = self.topology_mut().meet(&ip, port, cport, now);
                self.announce.notify_waiters();
                met
            }
            NodeCommand::Forget(id) => self.topology_mut().forget(&id, now),
            NodeCommand::Reset { hard } => self.reset(hard).await,
            NodeCommand::SaveConfig => {
                let text = nodes_conf::render(&self.topology());
                if let Err(error) = self.file.save(text).await {
                    return Reply::error(format!(
                        "ERR error saving the cluster node config: {error}"
                    ));
                }
                Ok(())
            }
            NodeCommand::SetConfigEpoch(epoch) => self.topology_mut().set_config_epoch(epoch),
            NodeCommand::Replicate(id) => {
                let keys = total_keys(self.shards).await;
                self.topology_mut().replicate(&id, keys)
            }
            NodeCommand::Failover(mode) => {
                self.topology_mut().set_my_offset(replication::offset());
                self.topology_mut().failover(mode, now)
            }
            NodeCommand::BumpEpoch => {
                let (bumped, epoch) = self.topology_mut().bump_epoch();
                self.commit().await;
                let word = if bumped { "BUMPED" } else { "STILL" };
                return Reply::Simple(Bytes::from(format!("{word} {epoch}")));
            }
            read => return self.read(&read).unwrap_or_else(Reply::ok),
        };
        self.commit().await;
        result.map_or_else(Reply::from, |()| Reply::ok())
    }

    async fn flush_slots(&self) -> Result<(), ClusterError> {
        if total_keys(self.shards).await != 0 {
            return Err(ClusterError(
                "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.".into(),
            ));
        }
        let mut topology = self.topology_mut();
        let mine = ranges(topology.slots_of(topology.myself_index()).iter());
        if mine.is_empty() {
            return Ok(());
        }
        topology.update_slots(&mine, true)
    }

    async fn reset(&self, hard: bool) -> Result<(), ClusterError> {
        // A replica's keys are its primary's copy: Redis lets it reset (and drops them).
        let replica = self.topology().myself().is_replica();
        if !replica && total_keys(self.shards).await != 0 {
            return Err(ClusterError(
                "ERR CLUSTER RESET can't be called with master nodes containing keys".into(),
            ));
        }
        let new_id = match hard {
            true => Some(random_node_id().map_err(|e| ClusterError(format!("ERR {e}")))?),
            false => None,
        };
        self.topology_mut().reset(new_id);
        Ok(())
    }

    /// CLUSTER SETSLOT. Handing a slot to another node checks, on the shard holding the
    /// slot, that none of its keys is left and closes the slot there in the same turn, so
    /// no write can land in between; the new configuration then replaces the closure.
    async fn set_slot(self: &Rc<Self>, slot: u16, action: SetSlot) -> Result<(), ClusterError> {
        match action {
            SetSlot::Migrating(id) => self.topology_mut().set_migrating(slot, &id),
            SetSlot::Importing(id) => self.topology_mut().set_importing(slot, &id),
            SetSlot::Stable => {
                self.topology_mut().set_stable(slot);
                Ok(())
            }
            SetSlot::Node(id) => {
                let (to, gives_away, endpoint) = {
                    let topology = self.topology();
                    let to = topology.check_set_owner(&id)?;
                    let endpoint = topology
                        .node(to)
                        .map(|n| n.addr.client_endpoint())
                        .unwrap_or_default();
                    (to, topology.gives_away(slot, to), endpoint)
                };
                let holder = usize::from(slot) % self.shards;
                let keys = count_and_fence(holder, slot, gives_away.then_some(endpoint)).await;
                let set = self.topology_mut().set_owner(slot, to, keys);
                if gives_away && keys == 0 {
                    self.commit().await;
                    unfence(holder, slot).await;
                }
                set
            }
        }
    }

    /// Saves and publishes the configuration if it changed since the last commit, then does
    /// what the change asks of the data path and the bus: replicate or stop replicating,
    /// pause writes for a manual failover, send the queued messages. A node that cannot
    /// save its configuration stops, as Redis does: acknowledging a change (or a vote) it
    /// would forget on restart is worse.
    pub(super) async fn commit(self: &Rc<Self>) {
        {
            let _commit = self.commit_lock.lock().await;
            // The role is read with the map it goes with: a change that lands while this
            // commit saves must not make the node a replica under a map that still gives it
            // slots (its writes would meet READONLY rather than MOVED); the next commit
            // publishes that change with its role.
            let wanted = self.wanted_role();
            let (version, text, map) = {
                let topology = self.topology();
                if topology.version() == self.published.get() {
                    (None, String::new(), None)
                } else {
                    (
                        Some(topology.version()),
                        nodes_conf::render(&topology),
                        Some(Arc::new(topology.slot_map())),
                    )
                }
            };
            if let (Some(version), Some(map)) = (version, map) {
                if let Err(error) = self.file.save(text).await {
                    eprintln!(
                        "corewire-kv: can't save the cluster config file {}: {error}; exiting",
                        self.file.path().display()
                    );
                    std::process::exit(1);
                }
                // A node taking over as a primary publishes the map that names it one only
                // once it takes writes (Redis changes the two in one step): before, a write
                // routed to it would meet a replica's READONLY.
                if wanted.is_none() && self.following.borrow().is_some() {
                    replication::promote().await;
                    *self.following.borrow_mut() = None;
                }
                publish(map, self.shards).await;
                self.published.set(version);
                self.announce.notify_waiters();
            }
            self.follow_role(wanted);
        }
        self.apply_effects();
        let outgoing = self.topology_mut().take_outbox();
        if !outgoing.is_empty() {
            bus::queue(self, outgoing);
        }
    }

    /// Makes the data path match the role `wanted` (from the configuration just
    /// published): replicate the primary it names (again when its address changed), or
    /// serve as a primary.
    fn follow_role(self: &Rc<Self>, wanted: Option<(NodeId, Option<NodeAddr>)>) {
        let mut following = self.following.borrow_mut();
        if *following == wanted {
            return;
        }
        match &wanted {
            // (Only when the map did not change, e.g. a primary with an empty address that
            // was replaced; `commit` promotes before it publishes a map naming this node.
            // The promotion waits for this commit to end.)
            None => {
                let node = self.clone();
                spawn_local(async move {
                    let _commit = node.commit_lock.lock().await;
                    replication::promote().await;
                });
            }
            Some((id, Some(addr))) => replication::follow(id, &addr.ip, addr.port),
            // A primary we know nothing about yet: wait for its address.
            Some((_, None)) => {}
        }
        *following = wanted;
    }

    /// The primary this node's configuration says it replicates (with its address once
    /// known), or `None` for a primary.
    fn wanted_role(&self) -> Option<(NodeId, Option<NodeAddr>)> {
        let topology = self.topology();
        let id = topology.myself().primary?;
        let addr = topology
            .find(&id)
            .and_then(|i| topology.node(i))
            .map(|n| n.addr.clone())
            .filter(|a| !a.ip.is_empty());
        Some((id, addr))
    }

    /// Pauses or resumes writes for a manual failover.
    fn apply_effects(self: &Rc<Self>) {
        let effects = self.topology_mut().take_effects();
        for effect in effects {
            match effect {
                Effect::PauseWrites { until_ms } => {
                    replication::pause_writes(until_ms);
                    let node = self.clone();
                    spawn_local(async move {
                        // Writes admitted before the pause finish first: each shard runs
                        // what it was sent in order, so one round trip to each settles them.
                        total_keys(node.shards).await;
                        let offset = replication::offset();
                        node.topology_mut().writes_paused(offset);
                        node.announce.notify_waiters();
                    });
                }
                Effect::UnpauseWrites => replication::unpause_writes(),
            }
        }
    }
}

/// CLUSTER LINKS: this node's outgoing bus links that are up.
fn links(topology: &Topology) -> Reply {
    let links = topology
        .nodes()
        .filter(|(i, n)| *i != topology.myself_index() && n.link_up)
        .map(|(_, n)| {
            Reply::Array(vec![
                bulk("direction"),
                bulk("to"),
                bulk("node"),
                Reply::Bulk(Bytes::copy_from_slice(n.id.as_bytes())),
                bulk("create-time"),
                Reply::Integer(0),
                bulk("events"),
                bulk("rw"),
                bulk("send-buffer-allocated"),
                Reply::Integer(0),
                bulk("send-buffer-used"),
                Reply::Integer(0),
            ])
        })
        .collect();
    Reply::Array(links)
}

/// CLUSTER HELP, laid out as Redis's help replies.
fn help() -> Reply {
    let mut lines =
        vec!["CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".to_owned()];
    lines.extend(HELP.iter().map(|l| l.to_string()));
    lines.push("HELP".into());
    lines.push("    Print this help.".into());
    Reply::Array(
        lines
            .into_iter()
            .map(|l| Reply::Simple(Bytes::from(l)))
            .collect(),
    )
}
