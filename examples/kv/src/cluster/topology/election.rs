//! Replacing a primary (Redis's `clusterHandleSlaveFailover`, `clusterSendFailoverAuthIfNeeded`
//! and the manual failover): a replica of a FAIL primary waits `500 ms + random(0..500) +
//! rank × 1 s` (rank: how many sibling replicas announced a larger replication offset),
//! raises the current epoch and asks every primary for its vote; a primary votes once per
//! epoch, and not twice for one failed primary within two node timeouts. With a majority
//! of the primaries serving slots the replica takes the slots under the election's epoch.
//!
//! CLUSTER FAILOVER starts the same election on demand: by default the primary first pauses
//! writes and announces its final offset, and the replica waits until it has applied that
//! much, so no acknowledged write is lost; FORCE skips the primary; TAKEOVER skips the vote.

use super::{ClusterError, Destination, Effect, Topology};
use crate::cluster::gossip::{Message, MessageKind, FLAG_FORCE_ACK, FLAG_PAUSED};
use crate::cluster::view::{NodeIndex, NO_NODE};

/// How long a manual failover may take before it is given up.
pub const MF_TIMEOUT_MS: u64 = 5000;
/// The primary pauses writes this many manual failover timeouts at most.
const MF_PAUSE_MULT: u64 = 2;

/// A replica's election in progress (Redis's `failover_auth_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Election {
    /// Unix ms when votes are (or were) requested; 0: no election yet.
    pub auth_time: u64,
    pub votes: usize,
    pub requested: bool,
    pub rank: usize,
    /// The epoch the votes are requested for.
    pub epoch: u64,
}

/// A manual failover in progress (Redis's `mf_*`), on the replica or on its primary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManualFailover {
    /// Unix ms when it is given up; 0: none in progress.
    pub end: u64,
    /// Replica: the primary's offset is reached (or FORCE): the election may start.
    pub can_start: bool,
    /// Replica: the offset the paused primary announced.
    pub primary_offset: Option<u64>,
    /// Primary: the replica that asked.
    pub replica: Option<crate::cluster::node::NodeId>,
    /// Primary: writes are paused and the announced offset is final.
    pub paused: bool,
}

/// CLUSTER FAILOVER's option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverMode {
    /// Agree on the offset with the primary first.
    Coordinated,
    Force,
    Takeover,
}

impl Topology {
    /// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica.
    pub fn failover(&mut self, mode: FailoverMode, now: u64) -> Result<(), ClusterError> {
        if !self.myself().is_replica() {
            return Err(ClusterError::err(
                "You should send CLUSTER FAILOVER to a replica",
            ));
        }
        let Some(primary) = self.my_primary() else {
            return Err(ClusterError::err(
                "I'm a replica but my master is unknown to me",
            ));
        };
        let down = self.node(primary).is_none_or(|p| p.fail || !p.link_up);
        if mode == FailoverMode::Coordinated && down {
            return Err(ClusterError::err(
                "Master is down or failed, please use CLUSTER FAILOVER FORCE",
            ));
        }
        self.reset_manual_failover();
        self.manual.end = now + MF_TIMEOUT_MS;
        match mode {
            FailoverMode::Takeover => {
                tracing::warn!("taking over the primary (user request)");
                self.bump_epoch_without_consensus();
                self.replace_my_primary();
            }
            FailoverMode::Force => {
                tracing::warn!("forced failover user request accepted");
                self.manual.can_start = true;
                self.replica_failover(now);
            }
            FailoverMode::Coordinated => {
                tracing::warn!("manual failover user request accepted");
                let id = self.node(primary).map(|n| n.id);
                if let Some(id) = id {
                    self.send(Destination::Node(id), MessageKind::MfStart);
                }
            }
        }
        Ok(())
    }

    /// A new config epoch unless ours is already the unique highest (TAKEOVER).
    fn bump_epoch_without_consensus(&mut self) {
        if self.config_epoch_is_highest() && self.myself().config_epoch >= self.current_epoch {
            return;
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.myself_mut().config_epoch = epoch;
        self.changed();
    }

    /// How many replicas of our primary announced a larger offset than ours.
    fn rank(&self, primary: NodeIndex) -> usize {
        self.replicas_of(primary)
            .into_iter()
            .filter(|&r| r != self.myself)
            .filter(|&r| self.node(r).is_some_and(|n| n.repl_offset > self.my_offset))
            .count()
    }

    /// The replica's side, run every tick and when a vote arrives.
    pub(super) fn replica_failover(&mut self, now: u64) {
        let manual = self.manual.end != 0 && self.manual.can_start;
        if !self.myself().is_replica() {
            return;
        }
        let Some(primary) = self.my_primary() else {
            return;
        };
        let failed = self.node(primary).is_some_and(|p| p.fail);
        // Automatic only for a FAIL primary and unless disabled; a manual one always.
        let automatic = failed && !self.no_failover;
        if !(manual || automatic) || self.num_slots(primary) == 0 {
            return;
        }
        let auth_timeout = (self.node_timeout_ms * 2).max(2000);
        let auth_retry = auth_timeout * 2;
        if now.saturating_sub(self.election.auth_time) > auth_retry {
            let rank = self.rank(primary);
            let delay = 500 + self.random() % 500 + rank as u64 * 1000;
            self.election = super::Election {
                auth_time: now + delay,
                votes: 0,
                requested: false,
                rank,
                epoch: 0,
            };
            if self.manual.end != 0 {
                self.election.auth_time = now;
                self.election.rank = 0;
            }
            tracing::warn!(
                delay_ms = self.election.auth_time - now,
                rank = self.election.rank,
                offset = self.my_offset,
                "start of election delayed"
            );
            // Our siblings learn our offset, so each computes its rank from it.
            let primary_id = self.node(primary).map(|n| n.id);
            let siblings: Vec<_> = self
                .nodes()
                .filter(|(i, n)| *i != self.myself && n.primary == primary_id)
                .map(|(_, n)| n.id)
                .collect();
            for sibling in siblings {
                self.send(Destination::Node(sibling), MessageKind::Pong);
            }
            if self.manual.end == 0 {
                return;
            }
        }
        if !self.election.requested && self.manual.end == 0 {
            let rank = self.rank(primary);
            if rank > self.election.rank {
                self.election.auth_time += (rank - self.election.rank) as u64 * 1000;
                self.election.rank = rank;
            }
        }
        if now < self.election.auth_time
            || now.saturating_sub(self.election.auth_time) > auth_timeout
        {
            return;
        }
        if !self.election.requested {
            self.current_epoch += 1;
            self.election.epoch = self.current_epoch;
            self.election.requested = true;
            tracing::warn!(epoch = self.current_epoch, "starting a failover election");
            let mut request = self.message(MessageKind::AuthRequest);
            if self.manual.end != 0 {
                request.flags |= FLAG_FORCE_ACK;
            }
            self.queue(Destination::All, request);
            self.changed();
            return;
        }
        if self.election.votes >= self.quorum() {
            tracing::warn!("failover election won");
            if self.myself().config_epoch < self.election.epoch {
                let epoch = self.election.epoch;
                self.myself_mut().config_epoch = epoch;
            }
            self.replace_my_primary();
        }
    }

    /// A primary's side of a vote request (Redis's `clusterSendFailoverAuthIfNeeded`).
    pub(super) fn vote(&mut self, sender: NodeIndex, request: &Message, now: u64) {
        if self.myself().is_replica() || self.num_slots(self.myself) == 0 {
            return;
        }
        let denied = |why: &str| tracing::warn!(why, "failover vote denied");
        if request.current_epoch < self.current_epoch {
            return denied("the request's epoch is old");
        }
        if self.last_vote_epoch == self.current_epoch {
            return denied("already voted in this epoch");
        }
        let Some(candidate) = self.node(sender) else {
            return;
        };
        let candidate_id = candidate.id;
        let Some(primary) = candidate.primary.and_then(|p| self.find(&p)) else {
            return denied("the candidate is a primary, or its primary is unknown");
        };
        let force = request.flags & FLAG_FORCE_ACK != 0;
        let Some(primary_node) = self.node(primary) else {
            return;
        };
        if !primary_node.fail && !force {
            return denied("the candidate's primary is not failing");
        }
        if now.saturating_sub(primary_node.voted_time) < self.node_timeout_ms * 2 {
            return denied("voted for a replica of this primary recently");
        }
        for slot in request.slots.iter() {
            let owner = self.owners[usize::from(slot)];
            if owner == NO_NODE {
                continue;
            }
            if self
                .node(owner)
                .is_some_and(|o| o.config_epoch > request.config_epoch)
            {
                return denied("a claimed slot has a newer owner");
            }
        }
        self.last_vote_epoch = self.current_epoch;
        if let Some(p) = self.nodes[usize::from(primary)].as_mut() {
            p.voted_time = now;
        }
        tracing::warn!(candidate = %candidate_id, epoch = self.current_epoch, "failover vote granted");
        self.changed();
        self.send(Destination::Node(candidate_id), MessageKind::AuthAck);
    }

    /// A vote for our election.
    pub(super) fn count_vote(&mut self, sender: NodeIndex, ack: &Message, now: u64) {
        let voter_ok = self
            .node(sender)
            .is_some_and(|n| !n.is_replica() && self.num_slots(sender) > 0);
        if voter_ok && self.election.requested && ack.current_epoch >= self.election.epoch {
            self.election.votes += 1;
            self.replica_failover(now);
        }
    }

    /// MFSTART from one of our replicas: pause writes, then announce the final offset.
    pub(super) fn manual_failover_requested(&mut self, sender: NodeIndex, now: u64) {
        let my_id = self.myself().id;
        let Some(replica) = self.node(sender).filter(|n| n.primary == Some(my_id)) else {
            return;
        };
        let replica = replica.id;
        self.reset_manual_failover();
        self.manual.end = now + MF_TIMEOUT_MS;
        self.manual.replica = Some(replica);
        tracing::warn!(%replica, "manual failover requested by a replica");
        self.effects.push(Effect::PauseWrites {
            until_ms: now + MF_TIMEOUT_MS * MF_PAUSE_MULT,
        });
    }

    /// The glue paused writes and let the writes already admitted finish: `offset` is final.
    /// The next pings carry it with the PAUSED flag.
    pub fn writes_paused(&mut self, offset: u64) {
        if self.manual.replica.is_some() {
            self.my_offset = offset;
            self.manual.paused = true;
        }
    }

    /// A message from our primary while a manual failover waits for its offset.
    pub(super) fn manual_failover_offset(&mut self, sender: NodeIndex, msg: &Message) {
        let from_primary = self.myself().is_replica() && self.my_primary() == Some(sender);
        if self.manual.end != 0
            && from_primary
            && msg.flags & FLAG_PAUSED != 0
            && self.manual.primary_offset.is_none()
        {
            tracing::warn!(offset = msg.offset, "received the paused primary's offset");
            self.manual.primary_offset = Some(msg.offset);
        }
    }

    /// Timeout, and the replica's wait for the primary's offset.
    pub(super) fn manual_failover_cron(&mut self, now: u64) {
        if self.manual.end == 0 {
            return;
        }
        if self.manual.end < now {
            tracing::warn!("manual failover timed out");
            self.reset_manual_failover();
            return;
        }
        if self.myself().is_replica() && !self.manual.can_start {
            if let Some(target) = self.manual.primary_offset {
                if self.my_offset >= target {
                    tracing::warn!("primary's replication stream applied: failover can start");
                    self.manual.can_start = true;
                    self.replica_failover(now);
                }
            }
        }
    }

    /// Ends any manual failover; a primary lets writes go on.
    pub(super) fn reset_manual_failover(&mut self) {
        if self.manual.replica.is_some() {
            self.effects.push(Effect::UnpauseWrites);
        }
        self.manual = ManualFailover::default();
    }
}
