//! TCP on the shard's ring.

mod tcp_listener;
mod tcp_stream;

pub use tcp_listener::{ListenOptions, TcpListener};
pub use tcp_stream::TcpStream;
