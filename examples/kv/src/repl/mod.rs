//! Redis 7.0 (PSYNC2) replication, the sans-I/O part: the node's replication identity
//! ([`Identity`]: role, the two replication ids and their offsets), the backlog of the
//! stream ([`Backlog`]), the partial-or-full decision a `PSYNC replid offset` gets
//! ([`psync::decide`]), WAIT's bookkeeping and min-replicas' good-replica count
//! ([`wait`]), and the commands' parsing ([`command`]).
//!
//! # Offsets
//! As in Redis, `master_repl_offset` counts every byte ever appended to the stream; the
//! backlog holds the newest of them. A byte's number is 1-based: the backlog's first byte
//! is `repl_backlog_first_byte_offset`, and a replica that has processed `n` bytes asks for
//! `PSYNC replid n+1`.
//!
//! The glue (`server/repl_master.rs`) owns the replica links and feeds this module.
//!
//! The replica's side: the handshake ([`handshake`]), the snapshot's framing
//! ([`transfer`]), the command stream and its offsets ([`stream`]), REPLICAOF
//! ([`replicaof`]), what INFO and ROLE show of the link ([`link_info`]), what a replica
//! refuses its clients ([`gate`]), and how it passes its master's stream on to replicas of
//! its own ([`forward`]); its glue is `server/replica`.

pub mod backlog;
pub mod command;
pub mod cut;
pub mod forward;
pub mod gate;
pub mod handshake;
pub mod info;
pub mod link_info;
pub mod psync;
pub mod replicaof;
pub mod stream;
pub mod transfer;
pub mod wait;

pub use backlog::{Backlog, DEFAULT_BACKLOG_SIZE};
pub use command::ReplRequest;
pub use cut::{stream_start, SyncCut};
pub use gate::ReplicaGate;
pub use info::{LinkState, ReplInfo, ReplicaInfo};
pub use link_info::{MasterLinkInfo, MasterLinkState};
pub use psync::{decide, Decision, FullReason};
pub use wait::{good_replicas, WaitQueue};

/// Length of a replication id: 40 hex characters.
pub const REPLID_LEN: usize = 40;

/// The id Redis shows when there is no second replication id.
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// Master or replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Master,
    Replica,
}

/// The node's place in the replication history: its replication id and offset, and the
/// previous id with the offset up to which that history is shared (after a promotion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub role: Role,
    pub replid: String,
    pub replid2: String,
    /// Bytes of stream produced (a master) or processed (a replica).
    pub master_repl_offset: u64,
    /// Offsets up to this one (exclusive) are shared with `replid2`; -1 when none.
    pub second_repl_offset: i64,
}

impl Identity {
    /// A fresh master history.
    pub fn new(replid: String) -> Identity {
        Identity {
            role: Role::Master,
            replid,
            replid2: NO_REPLID.to_owned(),
            master_repl_offset: 0,
            second_repl_offset: -1,
        }
    }

    /// A replica promoted (or a master that starts a new history): the old id becomes the
    /// second one, valid up to the current offset, so replicas of the old history can still
    /// continue partially (Redis's `shiftReplicationId`).
    pub fn shift(&mut self, new_replid: String) {
        self.replid2 = std::mem::replace(&mut self.replid, new_replid);
        self.second_repl_offset = self.master_repl_offset as i64 + 1;
    }

    /// Forgets the second id (Redis's `clearReplicationId2`).
    pub fn clear_second(&mut self) {
        self.replid2 = NO_REPLID.to_owned();
        self.second_repl_offset = -1;
    }
}

/// A new random replication id (40 lowercase hex digits).
pub fn random_replid() -> String {
    let mut bytes = [0u8; REPLID_LEN / 2];
    if getrandom::getrandom(&mut bytes).is_err() {
        for byte in &mut bytes {
            *byte = fastrand::u8(..);
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `text` is a well-formed replication id.
pub fn is_replid(text: &[u8]) -> bool {
    text.len() == REPLID_LEN && text.iter().all(u8::is_ascii_hexdigit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_40_hex_and_differ() {
        let (a, b) = (random_replid(), random_replid());
        assert!(is_replid(a.as_bytes()) && is_replid(b.as_bytes()));
        assert_ne!(a, b);
        assert!(!is_replid(b"?"));
    }

    #[test]
    fn shifting_keeps_the_old_history_up_to_the_offset() {
        let mut id = Identity::new("a".repeat(40));
        assert_eq!(
            (id.replid2.as_str(), id.second_repl_offset),
            (NO_REPLID, -1)
        );
        id.master_repl_offset = 100;
        id.shift("b".repeat(40));
        assert_eq!(id.replid, "b".repeat(40));
        assert_eq!(id.replid2, "a".repeat(40));
        assert_eq!(id.second_repl_offset, 101);
        id.clear_second();
        assert_eq!(id.second_repl_offset, -1);
    }
}
