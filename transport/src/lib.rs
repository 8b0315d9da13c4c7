//! corewire's transports. The wire layer (`frame`, `length_prefixed`, `rpc`) is sans-I/O:
//! plain state machines over bytes, with no sockets, clocks or runtime. `conn` is the one
//! message-oriented connection interface services and clients see, and `tcp` its
//! implementation over the shard's io_uring ring (RDMA implements the same interface).

pub mod conn;
pub mod frame;
pub mod length_prefixed;
pub mod listen;
pub mod mem;
pub mod rdma;
pub mod rpc;
pub mod tcp;

pub use conn::{ConnStats, Connection, TransportError, TransportKind};
pub use listen::{ConnSettings, Listener};
