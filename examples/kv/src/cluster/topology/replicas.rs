//! Roles: which nodes replicate which primary, CLUSTER REPLICATE, and the role changes a
//! node learns from the others (Redis's `clusterSetMaster`, the role switch in
//! `clusterProcessPacket`, `clusterFailoverReplaceYourMaster`).

use super::{ClusterError, Destination, Topology};
use crate::cluster::gossip::MessageKind;
use crate::cluster::node::NodeId;
use crate::cluster::view::{NodeIndex, NO_NODE};

impl Topology {
    /// CLUSTER REPLICATE id. `keys_here`: keys this node stores (a primary must be empty).
    pub fn replicate(&mut self, id: &[u8], keys_here: u64) -> Result<(), ClusterError> {
        let Some(primary) = NodeId::parse(id).and_then(|id| self.find(&id)) else {
            return Err(ClusterError::err(format!(
                "Unknown node {}",
                String::from_utf8_lossy(id)
            )));
        };
        if primary == self.myself {
            return Err(ClusterError::err("Can't replicate myself"));
        }
        if self.node(primary).is_some_and(|n| n.is_replica()) {
            return Err(ClusterError::err(
                "I can only replicate a master, not a replica.",
            ));
        }
        if !self.myself().is_replica() && (self.num_slots(self.myself) != 0 || keys_here != 0) {
            return Err(ClusterError::err(
                "To set a master the node must be empty and without assigned slots.",
            ));
        }
        self.set_my_primary(primary);
        Ok(())
    }

    /// Makes this node a replica of `primary` (Redis's `clusterSetMaster`): a primary gives
    /// up its open slots first (it has no slots left by then).
    pub(super) fn set_my_primary(&mut self, primary: NodeIndex) {
        let Some(id) = self.node(primary).map(|n| n.id) else {
            return;
        };
        if !self.myself().is_replica() {
            self.migrating_to.clear();
            self.importing_from.clear();
        }
        self.myself_mut().primary = Some(id);
        self.election = Default::default();
        self.reset_manual_failover();
        self.changed();
    }

    /// The primary of our primary, when our primary turned into a replica (and is not
    /// replicating us).
    pub(super) fn grand_primary(&self) -> Option<NodeIndex> {
        let primary = self.my_primary().filter(|&p| p != self.myself)?;
        let grand = self.node(primary)?.primary?;
        let grand = self.find(&grand)?;
        (grand != self.myself).then_some(grand)
    }

    /// What a ping says about the sender's role. A primary that turns replica loses its
    /// slots (its new primary claims them).
    pub(super) fn update_role(&mut self, sender: NodeIndex, claimed: Option<NodeId>) -> bool {
        let Some(node) = self.nodes[usize::from(sender)].as_mut() else {
            return false;
        };
        match claimed {
            None if node.primary.is_some() => {
                node.primary = None;
                true
            }
            None => false,
            Some(primary) => {
                let was_primary = node.primary.is_none();
                let changed = node.primary != Some(primary);
                node.primary = Some(primary);
                if was_primary {
                    for owner in self.owners.iter_mut().filter(|o| **o == sender) {
                        *owner = NO_NODE;
                    }
                }
                changed
            }
        }
    }

    /// This replica takes its primary's place: it claims the primary's slots under its own
    /// config epoch (already raised by the caller), and tells everyone at once.
    pub(super) fn replace_my_primary(&mut self) {
        let Some(old) = self.my_primary().filter(|&p| p != self.myself) else {
            return;
        };
        self.myself_mut().primary = None;
        for owner in self.owners.iter_mut().filter(|o| **o == old) {
            *owner = self.myself;
        }
        self.election = Default::default();
        self.reset_manual_failover();
        self.changed();
        tracing::warn!(
            epoch = self.myself().config_epoch,
            "failover: this node is a primary now"
        );
        self.send(Destination::All, MessageKind::Pong);
    }
}
