//! The bus seen from the topology: the messages this node sends, what each message it
//! receives changes (membership, addresses, epochs, roles, slot claims, failure reports),
//! and the timers.

use super::{Link, Topology};
use crate::cluster::gossip::{GossipEntry, Message, MessageKind, FLAG_PAUSED, MAX_GOSSIP};
use crate::cluster::node::{Node, NodeAddr, NodeId};
use crate::cluster::slots::SlotSet;
use crate::cluster::view::{NodeIndex, NO_NODE};

impl Topology {
    /// The message this node sends now (counted as sent). As in Redis, a replica announces
    /// its primary's slots and config epoch: that is what a vote request is judged on.
    pub fn message(&mut self, kind: MessageKind) -> Message {
        self.stats.sent[kind.index()] += 1;
        let me = self.myself();
        // Failing nodes first, so a large cluster still spreads every failure report.
        let mut known: Vec<&Node> = self
            .nodes()
            .filter(|(i, n)| *i != self.myself && !n.addr.ip.is_empty())
            .map(|(_, n)| n)
            .collect();
        known.sort_by_key(|n| !(n.pfail || n.fail));
        let gossip = known
            .into_iter()
            .take(MAX_GOSSIP)
            .map(|n| GossipEntry {
                id: n.id,
                addr: n.addr.clone(),
                pfail: n.pfail,
                fail: n.fail,
            })
            .collect();
        let (slots, config_epoch) = match self.my_primary() {
            Some(primary) if primary != self.myself => (
                self.slots_of(primary),
                self.node(primary).map_or(0, |n| n.config_epoch),
            ),
            _ => (self.slots_of(self.myself), me.config_epoch),
        };
        let paused = self.manual.replica.is_some() && self.manual.paused;
        Message {
            kind,
            sender: me.id,
            addr: me.addr.clone(),
            current_epoch: self.current_epoch,
            config_epoch,
            slots,
            primary: me.primary,
            offset: self.my_offset,
            flags: if paused { FLAG_PAUSED } else { 0 },
            subject: None,
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
    /// PING or MEET). Anything else it causes is queued (outbox, effects).
    pub fn receive(&mut self, msg: &Message, link: &Link, now: u64) -> Option<Message> {
        self.stats.received[msg.kind.index()] += 1;
        if let Link::Inbound { local_ip, .. } = link {
            if msg.kind == MessageKind::Meet && self.myself().addr.ip.is_empty() {
                // Learn our own address the way the node that met us reaches us.
                self.myself_mut().addr.ip = local_ip.clone();
                self.changed();
            }
        }
        let sender = self.sender_of(msg, link);
        match msg.kind {
            MessageKind::Ping | MessageKind::Meet | MessageKind::Pong => {
                if let Some(sender) = sender {
                    self.heard_from(sender, msg, link, now);
                }
            }
            _ => {
                if let Some(sender) = sender {
                    self.heard_epochs(sender, msg);
                    self.handle_control(sender, msg, now);
                }
            }
        }
        match msg.kind {
            MessageKind::Ping | MessageKind::Meet => Some(self.message(MessageKind::Pong)),
            _ => None,
        }
    }

    /// FAIL, vote requests and votes, manual failover requests (senders we know only).
    fn handle_control(&mut self, sender: NodeIndex, msg: &Message, now: u64) {
        match msg.kind {
            MessageKind::Fail => {
                if let Some(subject) = msg.subject {
                    self.fail_message(&subject, now);
                }
            }
            MessageKind::AuthRequest => self.vote(sender, msg, now),
            MessageKind::AuthAck => self.count_vote(sender, msg, now),
            MessageKind::MfStart => self.manual_failover_requested(sender, now),
            MessageKind::Ping | MessageKind::Meet | MessageKind::Pong => {}
        }
    }

    /// The epochs every message carries: the newest current epoch, and the sender's config
    /// epoch (a replica's: its primary's, as Redis records it).
    fn heard_epochs(&mut self, sender: NodeIndex, msg: &Message) -> bool {
        let mut changed = false;
        if let Some(node) = self.nodes[usize::from(sender)].as_mut() {
            if msg.config_epoch > node.config_epoch {
                node.config_epoch = msg.config_epoch;
                changed = true;
            }
            node.repl_offset = msg.offset;
        }
        if msg.current_epoch > self.current_epoch {
            self.current_epoch = msg.current_epoch;
            changed = true;
        }
        if changed {
            self.changed();
        }
        changed
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

    fn heard_from(&mut self, sender: NodeIndex, msg: &Message, link: &Link, now: u64) {
        let mut changed = false;
        let mut pong_from_failed = false;
        {
            let node = self.nodes[usize::from(sender)]
                .as_mut()
                .expect("sender is known");
            if msg.kind == MessageKind::Pong && !matches!(link, Link::Inbound { .. }) {
                node.pong_received = now;
                node.ping_sent = 0;
                node.pfail = false;
                pong_from_failed = node.fail;
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
        }
        changed |= self.heard_epochs(sender, msg);
        if pong_from_failed {
            changed |= self.clear_failure_if_needed(sender, now);
        }
        self.manual_failover_offset(sender, msg);
        changed |= self.update_role(sender, msg.primary);
        let sender_is_primary = self.node(sender).is_some_and(|n| !n.is_replica());
        if sender_is_primary {
            changed |= self.take_claims(sender, &msg.slots, msg.config_epoch);
        }
        changed |= self.resolve_epoch_collision(sender);
        changed |= self.learn_gossip(sender, &msg.gossip, now);
        if changed {
            self.changed();
        }
    }

    /// Redis's `clusterUpdateSlotsConfigWith`: a claim wins a slot that is unassigned or
    /// held under a lower config epoch, unless we are importing that slot ourselves. When
    /// the claim took every slot of our primary (ourselves, or the one we replicate), the
    /// claimant replaced it: we replicate the claimant from now on.
    fn take_claims(&mut self, sender: NodeIndex, claimed: &SlotSet, epoch: u64) -> bool {
        if sender == self.myself {
            return false;
        }
        let current_primary = self.my_primary();
        let mut changed = false;
        let mut took_ours = false;
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
                took_ours |= Some(owner) == current_primary;
                self.owners[usize::from(slot)] = sender;
                changed = true;
            }
        }
        if let Some(primary) = current_primary.filter(|_| took_ours) {
            if self.num_slots(primary) == 0 {
                let id = self.node(sender).map(|n| n.id);
                tracing::warn!(
                    primary = ?id,
                    "configuration change detected: replicating the new owner of our slots"
                );
                self.set_my_primary(sender);
            }
        } else if let Some(grand) = self.grand_primary() {
            // Our primary became a replica itself: replicate what it replicates.
            tracing::warn!("our primary is a replica now: replicating its primary");
            self.set_my_primary(grand);
            changed = true;
        }
        changed
    }

    /// Two primaries with the same config epoch: the one with the smaller id takes a new
    /// one.
    fn resolve_epoch_collision(&mut self, sender: NodeIndex) -> bool {
        let (mine, my_id) = (self.myself().config_epoch, self.myself().id);
        let Some(other) = self.node(sender) else {
            return false;
        };
        if self.myself().is_replica() || other.is_replica() {
            return false;
        }
        if other.config_epoch != mine || other.id <= my_id {
            return false;
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.myself_mut().config_epoch = epoch;
        tracing::info!(epoch, "config epoch collision resolved");
        true
    }

    /// New nodes, and (from a primary) what it thinks of each node's health.
    fn learn_gossip(&mut self, sender: NodeIndex, gossip: &[GossipEntry], now: u64) -> bool {
        let mut changed = false;
        for entry in gossip {
            if entry.id == self.myself().id {
                continue;
            }
            if let Some(index) = self.find(&entry.id) {
                changed |= self.failure_gossip(sender, index, entry, now);
                continue;
            }
            let banned = self
                .forgotten
                .iter()
                .any(|(id, until)| *id == entry.id && *until > now);
            if !banned {
                self.add_node(entry.id, entry.addr.clone());
                changed = true;
            }
        }
        changed
    }

    /// Timers, every tick: mark silent nodes `fail?`, drive elections and manual failovers,
    /// give up stale handshakes, lift expired FORGET bans.
    pub fn cron(&mut self, now: u64) {
        let timeout = self.node_timeout_ms;
        let mut suspected = false;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if let Some(node) = node {
                let silent = node.ping_sent != 0 && now.saturating_sub(node.ping_sent) > timeout;
                if i != usize::from(self.myself) && silent && !node.pfail && !node.fail {
                    tracing::debug!(node = %node.id, "node possibly failing");
                    node.pfail = true;
                    suspected = true;
                }
            }
        }
        if suspected {
            // Published at once: the pings that carry the suspicion leave now, so the
            // other primaries' reports (and FAIL) do not wait for the next ping round.
            self.version += 1;
        }
        // Redis checks on the next gossip about the node; a report already here counts now.
        let suspects: Vec<NodeIndex> = self
            .nodes()
            .filter(|(_, n)| n.pfail && !n.failure_reports.is_empty())
            .map(|(i, _)| i)
            .collect();
        for index in suspects {
            self.mark_failing_if_needed(index, now);
        }
        if self.update_state() {
            self.version += 1;
        }
        self.manual_failover_cron(now);
        self.replica_failover(now);
        let handshake_timeout = timeout.max(1000);
        self.handshakes
            .retain(|h| now.saturating_sub(h.started_ms) <= handshake_timeout);
        self.forgotten.retain(|(_, until)| *until > now);
    }
}
