//! The routing snapshot every shard holds: who owns each slot, which slots are moving, and
//! where to send a client that asked the wrong node. Built by [`super::Topology`] on each
//! change and shared (`Arc`) with every shard; the data path reads it without locks.

use super::slots::SLOTS;

/// Index of a node in a [`SlotMap`] (and in the topology it came from).
pub type NodeIndex = u16;

/// No node: an unassigned slot, or a slot that is not moving.
pub const NO_NODE: NodeIndex = NodeIndex::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SlotRoute {
    owner: NodeIndex,
    /// Set on the owner while the slot moves away (CLUSTER SETSLOT MIGRATING).
    migrating_to: NodeIndex,
    /// Set on the receiving node while the slot moves in (CLUSTER SETSLOT IMPORTING).
    importing_from: NodeIndex,
}

const UNASSIGNED: SlotRoute = SlotRoute {
    owner: NO_NODE,
    migrating_to: NO_NODE,
    importing_from: NO_NODE,
};

/// How one slot stands from this node's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    Unassigned,
    /// Owned here and not moving.
    Mine,
    /// Owned here, moving to the node at this index.
    MigratingTo(NodeIndex),
    /// Owned elsewhere (`owner`, or unassigned: [`NO_NODE`]), moving here.
    ImportingFrom {
        owner: NodeIndex,
    },
    /// Owned by the node at this index.
    Elsewhere(NodeIndex),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMap {
    slots: Box<[SlotRoute]>,
    /// `ip:port` of each node index (empty for a free index).
    endpoints: Vec<String>,
    myself: NodeIndex,
    /// On a replica, its primary: READONLY clients read that primary's slots here.
    primary: NodeIndex,
    /// `cluster_state:ok`.
    ok: bool,
}

impl SlotMap {
    /// A map where nothing is assigned; `endpoints[myself]` is this node.
    pub fn new(myself: NodeIndex, endpoints: Vec<String>) -> SlotMap {
        SlotMap {
            slots: vec![UNASSIGNED; SLOTS].into_boxed_slice(),
            endpoints,
            myself,
            primary: NO_NODE,
            ok: false,
        }
    }

    pub(super) fn set_primary(&mut self, primary: NodeIndex) {
        self.primary = primary;
    }

    /// On a replica, the node it replicates ([`NO_NODE`] on a primary).
    pub fn primary(&self) -> NodeIndex {
        self.primary
    }

    pub(super) fn assign(&mut self, slot: u16, owner: NodeIndex) {
        self.slots[usize::from(slot)].owner = owner;
    }

    pub(super) fn set_migrating(&mut self, slot: u16, to: NodeIndex) {
        self.slots[usize::from(slot)].migrating_to = to;
    }

    pub(super) fn set_importing(&mut self, slot: u16, from: NodeIndex) {
        self.slots[usize::from(slot)].importing_from = from;
    }

    /// Call once every slot is set, with the cluster state.
    pub(super) fn seal(mut self, ok: bool) -> SlotMap {
        self.ok = ok;
        self
    }

    pub fn state(&self, slot: u16) -> SlotState {
        let Some(route) = self.slots.get(usize::from(slot)) else {
            return SlotState::Unassigned;
        };
        if route.owner == self.myself {
            if route.migrating_to != NO_NODE {
                return SlotState::MigratingTo(route.migrating_to);
            }
            return SlotState::Mine;
        }
        if route.importing_from != NO_NODE {
            return SlotState::ImportingFrom { owner: route.owner };
        }
        if route.owner == NO_NODE {
            SlotState::Unassigned
        } else {
            SlotState::Elsewhere(route.owner)
        }
    }

    /// `cluster_state:ok`.
    pub fn is_ok(&self) -> bool {
        self.ok
    }

    /// `ip:port` of a node, for MOVED and ASK.
    pub fn endpoint(&self, node: NodeIndex) -> &str {
        self.endpoints
            .get(usize::from(node))
            .map_or("", String::as_str)
    }
}
