//! The node's authoritative cluster configuration: who is in the cluster, who owns each
//! slot under which epoch, which slots are moving, and the bus bookkeeping. One instance per
//! node, owned by shard 0; every other shard gets the [`SlotMap`] it builds.
//!
//! How configuration spreads (Redis's rules): every node pings every node it knows about
//! once a second, and at once after its configuration changes. A ping carries the sender's
//! epochs, role, replication offset, the slots it claims and what it thinks of the nodes it
//! knows. A receiver takes a slot claim when the slot is unassigned or its current owner's
//! config epoch is lower; a node that finishes importing a slot bumps its config epoch first
//! (CLUSTER SETSLOT NODE), and a replica that replaces its primary claims the slots under
//! the epoch it was elected in, so the newest claim wins everywhere.
//!
//! Replicas and failover live in the submodules: `replicas` (roles, CLUSTER REPLICATE,
//! following a new primary), `failure` (PFAIL, failure reports, FAIL, the cluster state)
//! and `election` (votes, automatic and manual failover). Whatever must go out besides the
//! reply on a link is queued ([`Topology::take_outbox`], [`Topology::take_effects`]) for the
//! glue, so every decision here is made without I/O.

mod bus;
mod election;
mod failure;
mod replicas;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::IpAddr;

pub use election::{Election, FailoverMode, ManualFailover, MF_TIMEOUT_MS};

use super::gossip::{Message, MessageKind};
use super::node::{Node, NodeAddr, NodeId};
use super::slots::{SlotSet, SLOTS, SLOT_COUNT};
use super::view::{NodeIndex, SlotMap, NO_NODE};
use crate::reply::Reply;

/// How long a forgotten node stays out (CLUSTER FORGET's ban, as Redis).
pub const FORGET_BAN_MS: u64 = 60_000;

/// A refused cluster command, with Redis's error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterError(pub String);

impl ClusterError {
    fn err(text: impl fmt::Display) -> ClusterError {
        ClusterError(format!("ERR {text}"))
    }
}

impl From<ClusterError> for Reply {
    fn from(error: ClusterError) -> Reply {
        Reply::error(error.0)
    }
}

/// A CLUSTER MEET in progress: pinged with MEET until it answers (it has no id yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    pub addr: NodeAddr,
    pub started_ms: u64,
}

/// Which connection a bus message came in on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// The peer connected to our bus port; PING and MEET arrive here and get a PONG.
    Inbound {
        peer_ip: String,
        /// Our address on that connection: how the peer reaches us.
        local_ip: String,
    },
    /// Our connection to a known node; its PONGs arrive here.
    ToNode(NodeId),
    /// Our connection opened by CLUSTER MEET; the first PONG names the node.
    Handshake(NodeAddr),
}

/// Bus messages sent and received, by type (CLUSTER INFO's `cluster_stats_messages_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BusStats {
    pub sent: [u64; MessageKind::ALL.len()],
    pub received: [u64; MessageKind::ALL.len()],
}

impl BusStats {
    /// `(type name, sent, received)` in Redis's order.
    pub fn by_kind(&self) -> [(&'static str, u64, u64); MessageKind::ALL.len()] {
        MessageKind::ALL.map(|k| (k.name(), self.sent[k.index()], self.received[k.index()]))
    }
}

/// Where a queued message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Every known node with an address.
    All,
    Node(NodeId),
}

/// A message for the glue to send on its link to the destination, ahead of its next ping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub to: Destination,
    pub message: Message,
}

/// Messages queued at most; the oldest goes first when full (a lost one is repeated: FAIL by
/// the next node to notice, votes by the next election).
pub const MAX_OUTBOX: usize = 1024;

/// What the glue must do to the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// A replica asked for a manual failover: pause writes until this Unix ms, then report
    /// the final offset ([`Topology::writes_paused`]).
    PauseWrites { until_ms: u64 },
    /// The manual failover ended (done, or timed out): writes may go on.
    UnpauseWrites,
}

#[derive(Debug, Clone)]
pub struct Topology {
    /// Indexed by [`NodeIndex`]; forgotten nodes leave a hole so indexes stay stable.
    nodes: Vec<Option<Node>>,
    myself: NodeIndex,
    owners: Box<[NodeIndex]>,
    migrating_to: BTreeMap<u16, NodeIndex>,
    importing_from: BTreeMap<u16, NodeIndex>,
    current_epoch: u64,
    last_vote_epoch: u64,
    handshakes: Vec<Handshake>,
    forgotten: Vec<(NodeId, u64)>,
    /// Bumped by every change that must be saved and propagated.
    version: u64,
    node_timeout_ms: u64,
    /// `cluster-require-full-coverage`: a slot without a working owner stops the cluster.
    require_full_coverage: bool,
    /// `cluster-replica-no-failover`: this replica never starts an election by itself.
    no_failover: bool,
    /// The cluster state last computed (`cluster_state:ok`).
    state_ok: bool,
    /// This node's replication offset, as the glue last reported it.
    my_offset: u64,
    election: Election,
    manual: ManualFailover,
    outbox: VecDeque<Outgoing>,
    effects: Vec<Effect>,
    /// xorshift state for the election's random delay (seeded by the glue).
    rng: u64,
    pub stats: BusStats,
}

impl Topology {
    /// A node alone in its cluster, owning nothing.
    pub fn new(id: NodeId, addr: NodeAddr, node_timeout_ms: u64) -> Topology {
        Topology {
            nodes: vec![Some(Node::new(id, addr))],
            myself: 0,
            owners: vec![NO_NODE; SLOTS].into_boxed_slice(),
            migrating_to: BTreeMap::new(),
            importing_from: BTreeMap::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            handshakes: Vec::new(),
            forgotten: Vec::new(),
            version: 0,
            node_timeout_ms,
            require_full_coverage: true,
            no_failover: false,
            state_ok: false,
            my_offset: 0,
            election: Election::default(),
            manual: ManualFailover::default(),
            outbox: VecDeque::new(),
            effects: Vec::new(),
            rng: 0x9e37_79b9_7f4a_7c15,
            stats: BusStats::default(),
        }
    }

    /// `cluster-require-full-coverage` and `cluster-replica-no-failover`.
    pub fn set_options(&mut self, require_full_coverage: bool, no_failover: bool) {
        self.require_full_coverage = require_full_coverage;
        self.no_failover = no_failover;
        self.update_state();
    }

    /// Seeds the election's random delay (the glue passes OS randomness).
    pub fn seed(&mut self, seed: u64) {
        self.rng = seed | 1;
    }

    fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// This node's replication offset now (a primary's: what it has produced; a replica's:
    /// what it has applied).
    pub fn set_my_offset(&mut self, offset: u64) {
        self.my_offset = offset;
    }

    pub fn my_offset(&self) -> u64 {
        self.my_offset
    }

    /// Messages to send, oldest first.
    pub fn take_outbox(&mut self) -> Vec<Outgoing> {
        self.outbox.drain(..).collect()
    }

    /// What the data path must do, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    fn send(&mut self, to: Destination, kind: MessageKind) {
        let message = self.message(kind);
        self.queue(to, message);
    }

    fn queue(&mut self, to: Destination, message: Message) {
        if self.outbox.len() == MAX_OUTBOX {
            self.outbox.pop_front();
        }
        self.outbox.push_back(Outgoing { to, message });
    }

    // ---- reading -------------------------------------------------------------------------

    /// Changes whenever something that must be saved and propagated changed.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn myself(&self) -> &Node {
        self.node(self.myself).expect("myself is never removed")
    }

    pub fn myself_index(&self) -> NodeIndex {
        self.myself
    }

    pub fn node(&self, index: NodeIndex) -> Option<&Node> {
        self.nodes.get(usize::from(index))?.as_ref()
    }

    pub fn nodes(&self) -> impl Iterator<Item = (NodeIndex, &Node)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some((i as NodeIndex, n.as_ref()?)))
    }

    pub fn find(&self, id: &NodeId) -> Option<NodeIndex> {
        self.nodes().find(|(_, n)| n.id == *id).map(|(i, _)| i)
    }

    fn find_arg(&self, id: &[u8]) -> Option<NodeIndex> {
        NodeId::parse(id).and_then(|id| self.find(&id))
    }

    pub fn owner(&self, slot: u16) -> Option<NodeIndex> {
        let owner = *self.owners.get(usize::from(slot))?;
        (owner != NO_NODE).then_some(owner)
    }

    pub fn slots_of(&self, node: NodeIndex) -> SlotSet {
        (0..SLOT_COUNT)
            .filter(|&s| self.owners[usize::from(s)] == node)
            .collect()
    }

    pub fn migrating(&self) -> impl Iterator<Item = (u16, NodeIndex)> + '_ {
        self.migrating_to.iter().map(|(&s, &n)| (s, n))
    }

    pub fn importing(&self) -> impl Iterator<Item = (u16, NodeIndex)> + '_ {
        self.importing_from.iter().map(|(&s, &n)| (s, n))
    }

    pub fn current_epoch(&self) -> u64 {
        self.current_epoch
    }

    pub fn last_vote_epoch(&self) -> u64 {
        self.last_vote_epoch
    }

    pub fn handshakes(&self) -> &[Handshake] {
        &self.handshakes
    }

    pub fn node_timeout_ms(&self) -> u64 {
        self.node_timeout_ms
    }

    /// Whether no other node claims a config epoch as high as ours.
    pub fn config_epoch_is_highest(&self) -> bool {
        let mine = self.myself().config_epoch;
        self.nodes()
            .all(|(i, n)| i == self.myself || n.config_epoch < mine)
    }

    /// `cluster_state:ok` (see `failure`).
    pub fn is_ok(&self) -> bool {
        self.state_ok
    }

    /// The node's primary: itself when it is one, the node it replicates otherwise (`None`:
    /// a replica of a node it does not know).
    pub fn my_primary(&self) -> Option<NodeIndex> {
        match self.myself().primary {
            None => Some(self.myself),
            Some(id) => self.find(&id),
        }
    }

    /// Known replicas of `primary`.
    pub fn replicas_of(&self, primary: NodeIndex) -> Vec<NodeIndex> {
        let Some(id) = self.node(primary).map(|n| n.id) else {
            return Vec::new();
        };
        self.nodes()
            .filter(|(_, n)| n.primary == Some(id))
            .map(|(i, _)| i)
            .collect()
    }

    /// Primaries serving at least one slot: the voters (Redis's `cluster->size`).
    pub fn size(&self) -> usize {
        let mut serving = vec![false; self.nodes.len()];
        for &owner in self.owners.iter() {
            if let Some(flag) = serving.get_mut(usize::from(owner)) {
                *flag = true;
            }
        }
        self.nodes()
            .filter(|(i, n)| !n.is_replica() && serving[usize::from(*i)])
            .count()
    }

    /// Votes or reports that make a majority of the voters.
    pub fn quorum(&self) -> usize {
        self.size() / 2 + 1
    }

    pub fn num_slots(&self, node: NodeIndex) -> usize {
        self.owners.iter().filter(|&&o| o == node).count()
    }

    pub fn manual_failover(&self) -> &ManualFailover {
        &self.manual
    }

    /// The routing snapshot for the shards.
    pub fn slot_map(&self) -> SlotMap {
        let endpoints = self
            .nodes
            .iter()
            .map(|n| {
                n.as_ref()
                    .map_or(String::new(), |n| n.addr.client_endpoint())
            })
            .collect();
        let mut map = SlotMap::new(self.myself, endpoints);
        if self.myself().is_replica() {
            map.set_primary(self.my_primary().unwrap_or(NO_NODE));
        }
        for (slot, &owner) in self.owners.iter().enumerate() {
            map.assign(slot as u16, owner);
        }
        for (&slot, &to) in &self.migrating_to {
            map.set_migrating(slot, to);
        }
        for (&slot, &from) in &self.importing_from {
            map.set_importing(slot, from);
        }
        map.seal(self.state_ok)
    }

    // ---- restoring from nodes.conf ---------------------------------------------------------

    /// Adds a node read from the saved configuration (`myself` marks this node's line).
    pub(super) fn restore_node(&mut self, node: Node, myself: bool) -> NodeIndex {
        if myself {
            self.nodes[usize::from(self.myself)] = Some(node);
            return self.myself;
        }
        self.insert_node(node)
    }

    pub(super) fn restore_owner(&mut self, slot: u16, owner: NodeIndex) {
        self.owners[usize::from(slot)] = owner;
    }

    pub(super) fn restore_open_slot(&mut self, slot: u16, peer: NodeIndex, migrating: bool) {
        if migrating {
            self.migrating_to.insert(slot, peer);
        } else {
            self.importing_from.insert(slot, peer);
        }
    }

    pub(super) fn restore_epochs(&mut self, current: u64, last_vote: u64) {
        self.current_epoch = current;
        self.last_vote_epoch = last_vote;
        self.update_state();
    }

    /// This node's address now (at start-up): the ports it listens on, and its IP when
    /// configured (`ip` empty: keep the known one, or learn it when met).
    pub fn update_my_addr(&mut self, addr: NodeAddr) {
        let me = self.myself_mut();
        let ip = if addr.ip.is_empty() {
            me.addr.ip.clone()
        } else {
            addr.ip
        };
        let addr = NodeAddr { ip, ..addr };
        if me.addr != addr {
            me.addr = addr;
            self.changed();
        }
    }

    // ---- CLUSTER commands ------------------------------------------------------------------

    fn changed(&mut self) {
        self.version += 1;
        self.update_state();
    }

    fn myself_mut(&mut self) -> &mut Node {
        self.nodes[usize::from(self.myself)]
            .as_mut()
            .expect("myself is never removed")
    }

    /// CLUSTER ADDSLOTS / ADDSLOTSRANGE (as ranges) or DELSLOTS / DELSLOTSRANGE.
    pub fn update_slots(
        &mut self,
        ranges: &[(u16, u16)],
        delete: bool,
    ) -> Result<(), ClusterError> {
        let mut seen = SlotSet::default();
        for &(start, end) in ranges {
            if start > end {
                return Err(ClusterError::err(format!(
                    "start slot number {start} is greater than end slot number {end}"
                )));
            }
            for slot in start..=end {
                let owner = self.owners[usize::from(slot)];
                if delete && owner == NO_NODE {
                    return Err(ClusterError::err(format!(
                        "Slot {slot} is already unassigned"
                    )));
                }
                if !delete && owner != NO_NODE {
                    return Err(ClusterError::err(format!("Slot {slot} is already busy")));
                }
                if seen.contains(slot) {
                    return Err(ClusterError::err(format!(
                        "Slot {slot} specified multiple times"
                    )));
                }
                seen.insert(slot);
            }
        }
        for slot in seen.iter() {
            if delete {
                self.owners[usize::from(slot)] = NO_NODE;
            } else {
                // Owning it now, we are no longer importing it.
                self.importing_from.remove(&slot);
                self.owners[usize::from(slot)] = self.myself;
            }
        }
        self.changed();
        Ok(())
    }

    fn lookup(&self, id: &[u8], unknown: &str) -> Result<NodeIndex, ClusterError> {
        self.find_arg(id)
            .ok_or_else(|| ClusterError::err(format!("{unknown} {}", String::from_utf8_lossy(id))))
    }

    /// CLUSTER SETSLOT slot MIGRATING node.
    pub fn set_migrating(&mut self, slot: u16, to: &[u8]) -> Result<(), ClusterError> {
        if self.owners[usize::from(slot)] != self.myself {
            return Err(ClusterError::err(format!(
                "I'm not the owner of hash slot {slot}"
            )));
        }
        let to = self.lookup(to, "I don't know about node")?;
        self.migrating_to.insert(slot, to);
        self.changed();
        Ok(())
    }

    /// CLUSTER SETSLOT slot IMPORTING node.
    pub fn set_importing(&mut self, slot: u16, from: &[u8]) -> Result<(), ClusterError> {
        if self.owners[usize::from(slot)] == self.myself {
            return Err(ClusterError::err(format!(
                "I'm already the owner of hash slot {slot}"
            )));
        }
        let from = self.lookup(from, "I don't know about node")?;
        self.importing_from.insert(slot, from);
        self.changed();
        Ok(())
    }

    /// CLUSTER SETSLOT slot STABLE.
    pub fn set_stable(&mut self, slot: u16) {
        self.migrating_to.remove(&slot);
        self.importing_from.remove(&slot);
        self.changed();
    }

    /// CLUSTER SETSLOT slot NODE id, first half: the node it names, and whether the slot is
    /// ours and goes elsewhere (then the caller must make sure no key of the slot is left
    /// here, and pass the count to [`Self::set_owner`]).
    pub fn check_set_owner(&self, id: &[u8]) -> Result<NodeIndex, ClusterError> {
        self.lookup(id, "Unknown node")
    }

    pub fn gives_away(&self, slot: u16, to: NodeIndex) -> bool {
        self.owners[usize::from(slot)] == self.myself && to != self.myself
    }

    /// CLUSTER SETSLOT slot NODE id, second half. `keys_here`: keys of the slot this node
    /// still holds.
    pub fn set_owner(
        &mut self,
        slot: u16,
        to: NodeIndex,
        keys_here: u64,
    ) -> Result<(), ClusterError> {
        if self.gives_away(slot, to) && keys_here != 0 {
            return Err(ClusterError::err(format!(
                "Can't assign hashslot {slot} to a different node while I still hold keys for \
                 this hash slot."
            )));
        }
        if keys_here == 0 {
            self.migrating_to.remove(&slot);
        }
        self.owners[usize::from(slot)] = to;
        if to == self.myself && self.importing_from.remove(&slot).is_some() {
            // A manually moved slot: claim it under a new epoch so the claim wins.
            self.bump_epoch();
        }
        self.changed();
        Ok(())
    }

    /// CLUSTER SET-CONFIG-EPOCH.
    pub fn set_config_epoch(&mut self, epoch: i64) -> Result<(), ClusterError> {
        if epoch < 0 {
            return Err(ClusterError::err(format!(
                "Invalid config epoch specified: {epoch}"
            )));
        }
        if self.nodes().count() > 1 {
            return Err(ClusterError::err(
                "The user can assign a config epoch only when the node does not know any other \
                 node.",
            ));
        }
        if self.myself().config_epoch != 0 {
            return Err(ClusterError::err("Node config epoch is already non-zero"));
        }
        let epoch = epoch as u64;
        self.myself_mut().config_epoch = epoch;
        self.current_epoch = self.current_epoch.max(epoch);
        self.changed();
        Ok(())
    }

    /// CLUSTER BUMPEPOCH (and a finished import): a new config epoch unless ours is already
    /// the unique highest. Returns whether it bumped, and the epoch.
    pub fn bump_epoch(&mut self) -> (bool, u64) {
        let mine = self.myself().config_epoch;
        let highest = self
            .nodes()
            .map(|(_, n)| n.config_epoch)
            .fold(self.current_epoch, u64::max);
        if mine == 0 || mine != highest {
            self.current_epoch += 1;
            let epoch = self.current_epoch;
            self.myself_mut().config_epoch = epoch;
            self.changed();
            return (true, epoch);
        }
        (false, mine)
    }

    /// CLUSTER MEET `ip port [cport]`: starts pinging that address with MEET.
    pub fn meet(&mut self, ip: &[u8], port: i64, cport: i64, now: u64) -> Result<(), ClusterError> {
        let ip_text = String::from_utf8_lossy(ip).into_owned();
        let addr = match (
            ip_text.parse::<IpAddr>(),
            u16::try_from(port),
            u16::try_from(cport),
        ) {
            (Ok(parsed), Ok(port), Ok(cport)) if port != 0 && cport != 0 => NodeAddr {
                ip: parsed.to_string(),
                port,
                cport,
            },
            _ => {
                return Err(ClusterError::err(format!(
                    "Invalid node address specified: {ip_text}:{port}"
                )))
            }
        };
        let known = self
            .nodes()
            .any(|(_, n)| n.addr.ip == addr.ip && n.addr.port == addr.port);
        if !known && !self.handshakes.iter().any(|h| h.addr == addr) {
            self.handshakes.push(Handshake {
                addr,
                started_ms: now,
            });
        }
        Ok(())
    }

    /// CLUSTER FORGET id: drops the node and keeps it out for a minute.
    pub fn forget(&mut self, id: &[u8], now: u64) -> Result<(), ClusterError> {
        let index = self.lookup(id, "Unknown node")?;
        if index == self.myself {
            return Err(ClusterError::err(
                "I tried hard but I can't forget myself...",
            ));
        }
        let node_id = self.remove_node(index);
        self.forgotten.push((node_id, now + FORGET_BAN_MS));
        Ok(())
    }

    /// CLUSTER RESET: forget every other node and every slot; HARD also takes a new id and
    /// zeroes the epochs. The caller checks that no key is stored.
    pub fn reset(&mut self, new_id: Option<NodeId>) {
        let others: Vec<NodeIndex> = self
            .nodes()
            .map(|(i, _)| i)
            .filter(|&i| i != self.myself)
            .collect();
        for index in others {
            self.remove_node(index);
        }
        self.owners.fill(NO_NODE);
        self.migrating_to.clear();
        self.importing_from.clear();
        self.handshakes.clear();
        self.myself_mut().primary = None;
        self.reset_manual_failover();
        self.election = Election::default();
        if let Some(id) = new_id {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            let me = self.myself_mut();
            me.id = id;
            me.config_epoch = 0;
        }
        self.changed();
    }

    fn insert_node(&mut self, node: Node) -> NodeIndex {
        match self.nodes.iter().position(Option::is_none) {
            Some(free) => {
                self.nodes[free] = Some(node);
                free as NodeIndex
            }
            None => {
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as NodeIndex
            }
        }
    }

    fn remove_node(&mut self, index: NodeIndex) -> NodeId {
        let node = self.nodes[usize::from(index)]
            .take()
            .expect("removing a node that exists");
        for owner in self.owners.iter_mut().filter(|o| **o == index) {
            *owner = NO_NODE;
        }
        self.migrating_to.retain(|_, n| *n != index);
        self.importing_from.retain(|_, n| *n != index);
        for other in self.nodes.iter_mut().flatten() {
            other.failure_reports.retain(|r| r.reporter != node.id);
        }
        self.changed();
        node.id
    }
}

#[cfg(test)]
mod failover_tests;
#[cfg(test)]
mod tests;
