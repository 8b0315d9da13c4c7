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
//!
//! Between corewire nodes with the same shards, the link may be one stream per shard
//! instead: what is negotiated, and the per-shard bookkeeping, are in [`shards`].

pub mod backlog;
pub mod barrier;
pub mod command;
pub mod cut;
pub mod forward;
pub mod gate;
pub mod handshake;
pub mod info;
pub mod link_info;
pub mod psync;
pub mod replicaof;
pub mod shard_link;
pub mod shards;
pub mod stream;
pub mod transfer;
pub mod wait;

pub use backlog::{Backlog, DEFAULT_BACKLOG_SIZE};
pub use command::ReplRequest;
pub use cut::{stream_start, GroupPart, SyncCut};
pub use gate::ReplicaGate;
pub use info::{LinkState, ReplInfo, ReplicaInfo};
pub use link_info::{MasterLinkInfo, MasterLinkState};
pub use psync::{decide, Decision, FullReason};
pub use wait::{good_replicas, Acks, Target, WaitQueue};

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

    /// A replica takes history `replid` at `offset` from its master: after a full sync
    /// (`full`), or after `+CONTINUE` (with a new id when the master was promoted). What
    /// its own replicas must do about it.
    pub fn follow(&mut self, replid: String, offset: u64, full: bool) -> Follow {
        self.role = Role::Replica;
        if full || self.master_repl_offset != offset {
            self.replid = replid;
            self.clear_second();
            self.master_repl_offset = offset;
            Follow::NewHistory
        } else if self.replid != replid {
            // The same bytes so far under a new id (Redis: the old id becomes replid2).
            self.shift(replid);
            Follow::NewId
        } else {
            Follow::Same
        }
    }

    /// Forgets the second id (Redis's `clearReplicationId2`).
    pub fn clear_second(&mut self) {
        self.replid2 = NO_REPLID.to_owned();
        self.second_repl_offset = -1;
    }
}

/// What a replica's own replicas do when it takes a history from its master
/// ([`Identity::follow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Nothing changed: they go on.
    Same,
    /// The same history under a new id: they reconnect to learn it (and continue
    /// partially, through `replid2`).
    NewId,
    /// Another history (the backlog starts over): they resynchronize fully.
    NewHistory,
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

    #[test]
    fn following_a_master_keeps_shifts_or_replaces_the_history() {
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let mut id = Identity::new(a.clone());
        id.master_repl_offset = 50;
        // A partial resync of the same history at the same offset.
        assert_eq!(id.follow(a.clone(), 50, false), Follow::Same);
        assert_eq!((id.role, id.replid.as_str()), (Role::Replica, a.as_str()));
        // `+CONTINUE <new id>`: the old id becomes the second one.
        assert_eq!(id.follow(b.clone(), 50, false), Follow::NewId);
        assert_eq!(
            (id.replid.as_str(), id.replid2.as_str()),
            (b.as_str(), a.as_str())
        );
        assert_eq!(id.second_repl_offset, 51);
        // A full sync: another history, no second id.
        assert_eq!(id.follow(c.clone(), 900, true), Follow::NewHistory);
        assert_eq!(
            (id.replid.as_str(), id.master_repl_offset),
            (c.as_str(), 900)
        );
        assert_eq!(
            (id.replid2.as_str(), id.second_repl_offset),
            (NO_REPLID, -1)
        );
        // Even with the same id, a full sync starts over.
        assert_eq!(id.follow(c.clone(), 900, true), Follow::NewHistory);
        // An offset other than the node's cannot continue its bytes.
        assert_eq!(id.follow(c, 950, false), Follow::NewHistory);
    }
}
