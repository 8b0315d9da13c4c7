//! corewire's transports. The wire layer (`frame`, `length_prefixed`, `rpc`) lives in the
//! `corewire-wire` crate (sans-I/O: no sockets, clocks, runtime or verbs) and is re-exported
//! here under the same paths. `conn` is the one
//! message-oriented connection interface services and clients see, and `tcp` its
//! implementation over the shard's io_uring ring (RDMA implements the same interface).

pub mod conn;
pub mod listen;
pub mod mem;
pub mod rdma;
pub mod tcp;

pub use corewire_wire::{frame, length_prefixed, rpc};

pub use conn::{ConnStats, Connection, TransportError, TransportKind};
pub use listen::{ConnSettings, Listener};
