//! Failure detection (Redis's rules): a node that has not answered a ping for the node
//! timeout is `fail?` (PFAIL) in this node's eyes; primaries gossip what they see, and
//! when a majority of the primaries serving slots report a node (each report valid for two
//! node timeouts) the node is `fail` (FAIL), which every node is told at once. FAIL is
//! lifted when the node answers again and is a replica or a primary without slots, or
//! after two node timeouts when no replica took its slots. The cluster state follows.

use super::{Destination, Topology};
use crate::cluster::gossip::{GossipEntry, MessageKind};
use crate::cluster::node::{FailureReport, NodeId};
use crate::cluster::view::{NodeIndex, NO_NODE};

/// A failure report is valid this many node timeouts.
pub const FAIL_REPORT_VALIDITY_MULT: u64 = 2;
/// A FAIL primary still serving its slots is cleared after this many node timeouts.
pub const FAIL_UNDO_TIME_MULT: u64 = 2;

impl Topology {
    /// A gossip entry about a node we know: from a primary, it adds or withdraws a failure
    /// report.
    pub(super) fn failure_gossip(
        &mut self,
        sender: NodeIndex,
        about: NodeIndex,
        entry: &GossipEntry,
        now: u64,
    ) -> bool {
        let Some(reporter) = self.node(sender).filter(|n| !n.is_replica()).map(|n| n.id) else {
            return false;
        };
        if about == self.myself {
            return false;
        }
        let Some(node) = self.nodes[usize::from(about)].as_mut() else {
            return false;
        };
        if entry.pfail || entry.fail {
            match node
                .failure_reports
                .iter_mut()
                .find(|r| r.reporter == reporter)
            {
                Some(report) => report.time = now,
                None => node.failure_reports.push(FailureReport {
                    reporter,
                    time: now,
                }),
            }
            self.mark_failing_if_needed(about, now)
        } else {
            node.failure_reports.retain(|r| r.reporter != reporter);
            false
        }
    }

    /// Valid failure reports about `node` (CLUSTER COUNT-FAILURE-REPORTS).
    pub fn count_failure_reports(&self, node: NodeIndex, now: u64) -> usize {
        let validity = self.node_timeout_ms * FAIL_REPORT_VALIDITY_MULT;
        self.node(node).map_or(0, |n| {
            n.failure_reports
                .iter()
                .filter(|r| now.saturating_sub(r.time) <= validity)
                .count()
        })
    }

    /// Redis's `markNodeAsFailingIfNeeded`: FAIL once we and a majority of primaries (us
    /// included when we are one) find the node unreachable; everyone is told.
    pub(super) fn mark_failing_if_needed(&mut self, index: NodeIndex, now: u64) -> bool {
        let validity = self.node_timeout_ms * FAIL_REPORT_VALIDITY_MULT;
        if let Some(node) = self.nodes[usize::from(index)].as_mut() {
            node.failure_reports
                .retain(|r| now.saturating_sub(r.time) <= validity);
        }
        let Some(node) = self.node(index) else {
            return false;
        };
        if !node.pfail || node.fail {
            return false;
        }
        let mut failures = node.failure_reports.len();
        if !self.myself().is_replica() {
            failures += 1;
        }
        if failures < self.quorum() {
            return false;
        }
        let id = node.id;
        tracing::warn!(node = %id, "marking node as failing (quorum reached)");
        if let Some(node) = self.nodes[usize::from(index)].as_mut() {
            node.pfail = false;
            node.fail = true;
            node.fail_time = now;
        }
        let mut fail = self.message(MessageKind::Fail);
        fail.subject = Some(id);
        self.queue(Destination::All, fail);
        self.changed();
        true
    }

    /// A FAIL message about `subject`.
    pub(super) fn fail_message(&mut self, subject: &NodeId, now: u64) {
        let Some(index) = self.find(subject).filter(|&i| i != self.myself) else {
            return;
        };
        let Some(node) = self.nodes[usize::from(index)].as_mut() else {
            return;
        };
        if node.fail {
            return;
        }
        tracing::warn!(node = %subject, "FAIL message received");
        node.fail = true;
        node.fail_time = now;
        node.pfail = false;
        self.changed();
    }

    /// A FAIL node answered a ping: Redis's `clearNodeFailureIfNeeded`.
    pub(super) fn clear_failure_if_needed(&mut self, index: NodeIndex, now: u64) -> bool {
        let slots = self.num_slots(index);
        let undo_after = self.node_timeout_ms * FAIL_UNDO_TIME_MULT;
        let Some(node) = self.nodes[usize::from(index)].as_mut() else {
            return false;
        };
        if !node.fail {
            return false;
        }
        let clear =
            node.is_replica() || slots == 0 || now.saturating_sub(node.fail_time) > undo_after;
        if clear {
            tracing::warn!(node = %node.id, "clearing FAIL: the node is reachable again");
            node.fail = false;
        }
        clear
    }

    /// Recomputes `cluster_state`; returns whether it flipped. The cluster is down when a
    /// slot has no working owner (with `cluster-require-full-coverage yes`) or when this
    /// node cannot reach a majority of the primaries serving slots (a minority partition
    /// must not accept writes a failover elsewhere would lose).
    pub(super) fn update_state(&mut self) -> bool {
        let ok = self.compute_state();
        let flipped = ok != self.state_ok;
        if flipped {
            tracing::warn!(ok, "cluster state changed");
        }
        self.state_ok = ok;
        flipped
    }

    fn compute_state(&self) -> bool {
        let failed: Vec<bool> = self
            .nodes
            .iter()
            .map(|n| n.as_ref().is_none_or(|n| n.fail))
            .collect();
        if self.require_full_coverage
            && self
                .owners
                .iter()
                .any(|&o| o == NO_NODE || failed[usize::from(o)])
        {
            return false;
        }
        let mut serving = vec![false; self.nodes.len()];
        for &owner in self.owners.iter() {
            if let Some(flag) = serving.get_mut(usize::from(owner)) {
                *flag = true;
            }
        }
        let (mut size, mut reachable) = (0, 0);
        for (index, node) in self.nodes() {
            if node.is_replica() || !serving[usize::from(index)] {
                continue;
            }
            size += 1;
            if !node.pfail && !node.fail {
                reachable += 1;
            }
        }
        // A majority: more than half of the primaries serving slots.
        reachable > size / 2
    }
}
