//! corewire's transports. The wire layer (`frame`, `length_prefixed`, `rpc`) lives in the
//! `corewire-wire` crate (sans-I/O: no sockets, clocks, runtime or verbs) and is re-exported
//! here under the same paths. `conn` is the one
//! message-oriented connection interface services and clients see, and `tcp` its
//! implementation over the shard's io_uring ring (RDMA implements the same interface; it is the
//! `rdma` cargo feature, on by default, the one part that needs rdma-core to build).
#![deny(missing_docs)]

pub mod conn;
pub mod listen;
pub mod mem;
// The one module that needs rdma-core (through corewire-verbs) to build.
#[cfg(feature = "rdma")]
pub mod rdma;
pub mod tcp;

pub use corewire_wire::{frame, grpc, length_prefixed, rpc};

pub use conn::{ConnStats, Connection, PayloadBuf, TransportError, TransportKind};
pub use listen::{ConnSettings, Listener};
