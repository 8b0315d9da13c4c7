//! Sockets on the shard's driver: TCP, UDP and Unix-domain (stream, listener, datagram).

mod receiver;
mod send;
mod split;
mod tcp_listener;
mod tcp_stream;
mod udp;
mod unix;

pub use crate::driver::buf_ring::{RecvBuf, RecvBuffers};
pub use receiver::{RecvAvailable, RecvChunk};
pub use send::SendFuture;
pub use split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, SplitStream, WriteHalf};
pub(crate) use tcp_listener::bind_std;
pub use tcp_listener::{ListenOptions, TcpListener};
pub use tcp_stream::{RecvFuture, TcpStream};
pub use udp::{Datagram, RecvDatagram, SendDatagram, UdpSocket};
pub use unix::{UnixAddr, UnixDatagram, UnixListener, UnixStream};
