//! Node identity and what a node knows about each cluster member.

use std::fmt;

/// Length of a node id: 40 lowercase hex characters (160 random bits), as in Redis.
pub const NODE_ID_LEN: usize = 40;

/// A node's name in the cluster, chosen at random once and kept in `nodes.conf`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId([u8; NODE_ID_LEN]);

impl NodeId {
    /// The id spelled by 20 random bytes (the glue reads them from the OS).
    pub fn from_random(bytes: [u8; 20]) -> NodeId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut id = [0u8; NODE_ID_LEN];
        for (i, byte) in bytes.iter().enumerate() {
            id[2 * i] = HEX[usize::from(byte >> 4)];
            id[2 * i + 1] = HEX[usize::from(byte & 0xf)];
        }
        NodeId(id)
    }

    /// An id as clients and `nodes.conf` spell it: exactly 40 hex digits.
    pub fn parse(text: &[u8]) -> Option<NodeId> {
        let id: [u8; NODE_ID_LEN] = text.try_into().ok()?;
        id.iter()
            .all(u8::is_ascii_hexdigit)
            .then(|| NodeId(id.map(|b| b.to_ascii_lowercase())))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({})", self.as_str())
    }
}

/// Where a node serves clients (`port`) and the cluster bus (`cport`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddr {
    /// Empty until known (a node learns its own address when another meets it).
    pub ip: String,
    pub port: u16,
    pub cport: u16,
}

impl NodeAddr {
    /// `ip:port`, the form MOVED and ASK name.
    pub fn client_endpoint(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// A report, gossiped by a primary, that a node looked unreachable to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureReport {
    pub reporter: NodeId,
    /// Unix ms of the latest gossip that repeated it (reports expire, see
    /// [`super::topology::Topology`]).
    pub time: u64,
}

/// One member of the cluster as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: NodeId,
    pub addr: NodeAddr,
    /// The epoch under which the node claims its slots: the highest claim wins a slot.
    pub config_epoch: u64,
    /// `Some`: a replica of that primary (which this node may not know yet).
    pub primary: Option<NodeId>,
    /// Unix ms of the oldest ping still waiting for a pong (0: none pending).
    pub ping_sent: u64,
    /// Unix ms of the last pong.
    pub pong_received: u64,
    /// No pong for longer than the node timeout (`fail?`): this node's own opinion.
    pub pfail: bool,
    /// A majority of primaries found it unreachable (`fail`): the cluster's opinion, which
    /// lets a replica take its place.
    pub fail: bool,
    /// Unix ms when `fail` was set.
    pub fail_time: u64,
    /// Primaries that said it is unreachable, each at most once (bounded by the membership).
    pub failure_reports: Vec<FailureReport>,
    /// The replication offset it last announced.
    pub repl_offset: u64,
    /// Unix ms of our last failover vote for one of its replicas (a primary's field).
    pub voted_time: u64,
    /// Whether our bus link to the node is up.
    pub link_up: bool,
}

impl Node {
    pub fn new(id: NodeId, addr: NodeAddr) -> Node {
        Node {
            id,
            addr,
            config_epoch: 0,
            primary: None,
            ping_sent: 0,
            pong_received: 0,
            pfail: false,
            fail: false,
            fail_time: 0,
            failure_reports: Vec::new(),
            repl_offset: 0,
            voted_time: 0,
            link_up: false,
        }
    }

    pub fn is_replica(&self) -> bool {
        self.primary.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_40_hex_digits() {
        let id = NodeId::from_random([0xab; 20]);
        assert_eq!(id.as_str(), "ab".repeat(20));
        assert_eq!(NodeId::parse(id.as_bytes()), Some(id));
        assert_eq!(NodeId::parse(b"AB".repeat(20).as_slice()), Some(id));
        assert_eq!(NodeId::parse(b"abc"), None);
        assert_eq!(NodeId::parse("zz".repeat(20).as_bytes()), None);
    }
}
