//! Replication, the replica's side (Redis 7.0's PSYNC2 protocol): the handshake
//! ([`handshake`]), the snapshot's framing ([`transfer`]), the command stream and its
//! offsets ([`stream`]), REPLICAOF and ROLE ([`replicaof`]), what INFO and ROLE show of
//! the link ([`link_info`]) and what a replica refuses its clients ([`gate`]). Sans-I/O; the link itself is
//! `server/replica`.

pub mod gate;
pub mod handshake;
pub mod link_info;
pub mod replicaof;
pub mod stream;
pub mod transfer;

pub use gate::ReplicaGate;
pub use link_info::{MasterLinkInfo, MasterLinkState};
