//! Redis Cluster on corewire-kv nodes: the sans-I/O part.
//!
//! A node owns hash slots (CRC16 of the key or its `{tag}`, mod 16384) and redirects the
//! rest: `-MOVED slot ip:port` to the owner, `-ASK` while a slot moves, `-CROSSSLOT` when a
//! request's keys span slots. Inside a node nothing changes: key `k` still lives on shard
//! `slot(k) % shards`, so a slot's keys are all on one shard and every cluster check runs
//! there, in the same turn as the command it admits.
//!
//! - [`topology::Topology`]: the node's configuration (members, slot owners, epochs, slots
//!   moving), changed by CLUSTER commands and by what other nodes say on the bus
//!   ([`gossip`]); saved as `nodes.conf` ([`nodes_conf`]) before a change is acknowledged.
//! - [`view::SlotMap`]: the immutable routing snapshot each shard holds.
//! - [`redirect`]: Redis's redirection rules, run by the connection ([`gate::ClusterGate`])
//!   and by the owning shard.
//! - [`command`]: CLUSTER, ASKING, READONLY/READWRITE, MIGRATE, DUMP, RESTORE;
//!   [`render`]: their replies in Redis 7.0's formats; [`dump`]: the MIGRATE payload.
//!
//! The I/O (bus links, MIGRATE's connections, writing `nodes.conf`) is in
//! `server::cluster`.

pub mod command;
pub mod dump;
pub mod gate;
pub mod gossip;
pub mod node;
pub mod nodes_conf;
pub mod redirect;
pub mod render;
pub mod slots;
pub mod topology;
pub mod view;

pub use command::{ClusterRequest, NodeCommand};
pub use gate::{ClusterGate, SharedMap};
pub use node::{NodeAddr, NodeId};
pub use topology::Topology;
pub use view::SlotMap;
