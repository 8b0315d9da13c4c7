//! The node's authoritative cluster configuration: who is in the cluster, who owns each
//! slot under which epoch, which slots are moving, and the bus bookkeeping. One instance per
//! node, owned by shard 0; every other shard gets the [`SlotMap`] it builds.
//!
//! How configuration spreads (Redis's rules, minus failover): every node pings every node it
//! knows about once a second, and at once after its configuration changes. A ping carries
//! the sender's epochs, the slots it claims and some nodes it knows. A receiver takes a slot
//! claim when the slot is unassigned or its current owner's config epoch is lower; a node
//! that finishes importing a slot bumps its config epoch first (CLUSTER SETSLOT NODE), so
//! its claim wins everywhere. That is enough without failover: only an operator moves
//! slots, one owner claims each slot at a time, and the epoch orders successive owners.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use super::gossip::{GossipEntry, Message, MessageKind, MAX_GOSSIP};
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
    pub sent: [u64; 3],
    pub received: [u64; 3],
}

fn kind_index(kind: MessageKind) -> usize {
    match kind {
        MessageKind::Ping => 0,
        MessageKind::Pong => 1,
        MessageKind::Meet => 2,
    }
}

impl BusStats {
    /// `(type name, sent, received)` in Redis's order.
    pub fn by_kind(&self) -> [(&'static str, u64, u64); 3] {
        [MessageKind::Ping, MessageKind::Pong, MessageKind::Meet].map(|k| {
            (
                k.name(),
                self.sent[kind_index(k)],
                self.received[kind_index(k)],
            )
        })
    }
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
            stats: BusStats::default(),
        }
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

    /// Every slot has an owner (`cluster_state:ok`).
    pub fn is_ok(&self) -> bool {
        self.owners.iter().all(|&o| o != NO_NODE)
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
        for (slot, &owner) in self.owners.iter().enumerate() {
            map.assign(slot as u16, owner);
        }
        for (&slot, &to) in &self.migrating_to {
            map.set_migrating(slot, to);
        }
        for (&slot, &from) in &self.importing_from {
            map.set_importing(slot, from);
        }
        map.seal()
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
        self.changed();
        node.id
    }

    // ---- the bus ---------------------------------------------------------------------------

    /// The message this node sends now (counted as sent).
    pub fn message(&mut self, kind: MessageKind) -> Message {
        self.stats.sent[kind_index(kind)] += 1;
        let me = self.myself();
        let gossip = self
            .nodes()
            .filter(|(i, n)| *i != self.myself && !n.addr.ip.is_empty())
            .take(MAX_GOSSIP)
            .map(|(_, n)| GossipEntry {
                id: n.id,
                addr: n.addr.clone(),
            })
            .collect();
        Message {
            kind,
            sender: me.id,
            addr: me.addr.clone(),
            current_epoch: self.current_epoch,
            config_epoch: me.config_epoch,
            slots: self.slots_of(self.myself),
            gossip,
        }
    }

    /// A ping to `node` leaves now.
    pub fn ping_sent(&mut self, node: &NodeId, now: u64) {
        if let Some(n) = self
            .find(node)
            .and_then(|i| self.nodes[usize::from(i)].as_mut())
        {
            if n.ping_sent == 0 {
                n.ping_sent = now;
            }
        }
    }

    /// Our bus connection to `node` went up or down.
    pub fn set_link(&mut self, node: &NodeId, up: bool) {
        if let Some(n) = self
            .find(node)
            .and_then(|i| self.nodes[usize::from(i)].as_mut())
        {
            n.link_up = up;
        }
    }

    /// Handles a message; returns the reply to send on the same connection (a PONG for a
    /// PING or MEET).
    pub fn receive(&mut self, msg: &Message, link: &Link, now: u64) -> Option<Message> {
        self.stats.received[kind_index(msg.kind)] += 1;
        if let Link::Inbound { local_ip, .. } = link {
            if msg.kind == MessageKind::Meet && self.myself().addr.ip.is_empty() {
                // Learn our own address the way the node that met us reaches us.
                self.myself_mut().addr.ip = local_ip.clone();
                self.changed();
            }
        }
        let sender = self.sender_of(msg, link);
        if let Some(sender) = sender {
            self.heard_from(sender, msg, now);
        }
        match msg.kind {
            MessageKind::Ping | MessageKind::Meet => Some(self.message(MessageKind::Pong)),
            MessageKind::Pong => None,
        }
    }

    /// The known node that sent `msg`, adding it when the message introduces it.
    fn sender_of(&mut self, msg: &Message, link: &Link) -> Option<NodeIndex> {
        if let Link::Handshake(dialed) = link {
            // Answered: done, whoever it was (even this node, met at its own address).
            self.handshakes.retain(|h| h.addr != *dialed);
        }
        if msg.sender == self.myself().id {
            return None;
        }
        let known = self.find(&msg.sender);
        match link {
            Link::ToNode(expected) if *expected != msg.sender => {
                tracing::warn!(expected = %expected, got = %msg.sender, "bus peer changed id; ignoring it");
                None
            }
            Link::Handshake(dialed) if msg.kind == MessageKind::Pong => {
                known.or_else(|| Some(self.add_node(msg.sender, dialed.clone())))
            }
            Link::Inbound { peer_ip, .. } if known.is_none() && msg.kind == MessageKind::Meet => {
                let ip = if msg.addr.ip.is_empty() {
                    peer_ip.clone()
                } else {
                    msg.addr.ip.clone()
                };
                Some(self.add_node(
                    msg.sender,
                    NodeAddr {
                        ip,
                        ..msg.addr.clone()
                    },
                ))
            }
            _ => known,
        }
    }

    fn add_node(&mut self, id: NodeId, addr: NodeAddr) -> NodeIndex {
        self.forgotten.retain(|(f, _)| *f != id);
        tracing::info!(node = %id, ip = %addr.ip, port = addr.port, "cluster node added");
        let index = self.insert_node(Node::new(id, addr));
        self.changed();
        index
    }

    fn heard_from(&mut self, sender: NodeIndex, msg: &Message, now: u64) {
        let mut changed = false;
        {
            let node = self.nodes[usize::from(sender)]
                .as_mut()
                .expect("sender is known");
            if msg.kind == MessageKind::Pong {
                node.pong_received = now;
                node.ping_sent = 0;
                node.pfail = false;
            }
            let addr = &msg.addr;
            if addr.port != node.addr.port || addr.cport != node.addr.cport {
                node.addr.port = addr.port;
                node.addr.cport = addr.cport;
                changed = true;
            }
            if !addr.ip.is_empty() && addr.ip != node.addr.ip {
                node.addr.ip = addr.ip.clone();
                changed = true;
            }
            if msg.config_epoch > node.config_epoch {
                node.config_epoch = msg.config_epoch;
                changed = true;
            }
        }
        if msg.current_epoch > self.current_epoch {
            self.current_epoch = msg.current_epoch;
            changed = true;
        }
        changed |= self.take_claims(sender, &msg.slots, msg.config_epoch);
        changed |= self.resolve_epoch_collision(sender);
        changed |= self.learn_gossip(&msg.gossip, now);
        if changed {
            self.changed();
        }
    }

    /// Redis's `clusterUpdateSlotsConfigWith`: a claim wins a slot that is unassigned or
    /// held under a lower config epoch, unless we are importing that slot ourselves.
    fn take_claims(&mut self, sender: NodeIndex, claimed: &SlotSet, epoch: u64) -> bool {
        let mut changed = false;
        for slot in claimed.iter() {
            let owner = self.owners[usize::from(slot)];
            if owner == sender || self.importing_from.contains_key(&slot) {
                continue;
            }
            let wins = owner == NO_NODE
                || self
                    .node(owner)
                    .is_none_or(|current| current.config_epoch < epoch);
            if wins {
                if owner == self.myself {
                    tracing::warn!(slot, "slot taken over by a node with a newer config epoch");
                }
                self.owners[usize::from(slot)] = sender;
                changed = true;
            }
        }
        changed
    }

    /// Two nodes with the same config epoch: the one with the smaller id takes a new one.
    fn resolve_epoch_collision(&mut self, sender: NodeIndex) -> bool {
        let (mine, my_id) = (self.myself().config_epoch, self.myself().id);
        let Some(other) = self.node(sender) else {
            return false;
        };
        if other.config_epoch != mine || other.id <= my_id {
            return false;
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.myself_mut().config_epoch = epoch;
        tracing::info!(epoch, "config epoch collision resolved");
        true
    }

    fn learn_gossip(&mut self, gossip: &[GossipEntry], now: u64) -> bool {
        let mut changed = false;
        for entry in gossip {
            let banned = self
                .forgotten
                .iter()
                .any(|(id, until)| *id == entry.id && *until > now);
            if entry.id == self.myself().id || banned || self.find(&entry.id).is_some() {
                continue;
            }
            self.add_node(entry.id, entry.addr.clone());
            changed = true;
        }
        changed
    }

    /// Timers, every tick: mark silent nodes `fail?`, give up stale handshakes, lift
    /// expired FORGET bans.
    pub fn cron(&mut self, now: u64) {
        let timeout = self.node_timeout_ms;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if let Some(node) = node {
                if i != usize::from(self.myself) && node.ping_sent != 0 {
                    node.pfail = now.saturating_sub(node.ping_sent) > timeout;
                }
            }
        }
        let handshake_timeout = timeout.max(1000);
        self.handshakes
            .retain(|h| now.saturating_sub(h.started_ms) <= handshake_timeout);
        self.forgotten.retain(|(_, until)| *until > now);
    }
}

#[cfg(test)]
mod tests;
