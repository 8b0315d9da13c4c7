//! TCP on the shard's ring.

mod tcp_listener;
mod tcp_stream;

pub(crate) use tcp_listener::bind_std;
pub use tcp_listener::{ListenOptions, TcpListener};
pub use tcp_stream::{RecvFuture, SendFuture, TcpStream};
