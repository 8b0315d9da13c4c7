use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use bytes::{Buf, Bytes, BytesMut};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::driver::op::close::Close;
use crate::driver::op::connect::Connect;
use crate::driver::op::recv::Recv;
use crate::driver::op::send::Send;
use crate::driver::op::writev::Writev;
use crate::driver::op::Op;

/// A connected TCP socket whose I/O goes through the shard's ring. Buffers are passed by value
/// and handed back with the result: the kernel owns them while an operation is in flight.
pub struct TcpStream {
    fd: OwnedFd,
}

impl TcpStream {
    pub fn from_fd(fd: OwnedFd) -> TcpStream {
        TcpStream { fd }
    }

    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    pub async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_cloexec(true)?;
        let fd: OwnedFd = socket.into();
        Op::submit(Connect::new(fd.as_raw_fd(), addr)).await?;
        let stream = TcpStream { fd };
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        SockRef::from(&self.fd).set_tcp_nodelay(on)
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        SockRef::from(&self.fd)
            .peer_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("peer has no IP address"))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        SockRef::from(&self.fd)
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("socket has no IP address"))
    }

    /// Receive into `buf`'s spare capacity (reserved here to at least `min_spare` bytes).
    /// `Ok(0)` means the peer closed its side.
    pub async fn recv(&self, mut buf: BytesMut, min_spare: usize) -> (io::Result<usize>, BytesMut) {
        let min_spare = min_spare.max(1);
        if buf.capacity() - buf.len() < min_spare {
            buf.reserve(min_spare);
        }
        Op::submit(Recv::new(self.fd.as_raw_fd(), buf)).await
    }

    /// One send; may write only part of `buf`.
    pub async fn send(&self, buf: Bytes) -> (io::Result<usize>, Bytes) {
        Op::submit(Send::new(self.fd.as_raw_fd(), buf)).await
    }

    /// Send all of `buf`.
    pub async fn send_all(&self, mut buf: Bytes) -> io::Result<()> {
        while !buf.is_empty() {
            let (res, b) = self.send(buf).await;
            buf = b;
            let n = res?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf.advance(n);
        }
        Ok(())
    }

    /// Send all of several buffers with as few syscalls as the socket allows.
    pub async fn send_all_vectored(&self, mut bufs: Vec<Bytes>) -> io::Result<()> {
        bufs.retain(|b| !b.is_empty());
        while !bufs.is_empty() {
            if bufs.len() == 1 {
                let b = bufs.pop().expect("one buffer");
                return self.send_all(b).await;
            }
            let rest = bufs.split_off(bufs.len().min(1024));
            let (res, b) = Op::submit(Writev::new(self.fd.as_raw_fd(), bufs)).await;
            bufs = b;
            bufs.extend(rest);
            let mut n = res?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            while n > 0 {
                let first = &mut bufs[0];
                if n >= first.len() {
                    n -= first.len();
                    bufs.remove(0);
                } else {
                    first.advance(n);
                    n = 0;
                }
            }
        }
        Ok(())
    }

    /// Stop sending (the peer reads end-of-stream); receiving continues.
    pub fn shutdown_write(&self) -> io::Result<()> {
        SockRef::from(&self.fd).shutdown(std::net::Shutdown::Write)
    }

    /// Stop both directions: a recv pending on this socket returns 0, the peer sees EOF.
    pub fn shutdown_both(&self) -> io::Result<()> {
        SockRef::from(&self.fd).shutdown(std::net::Shutdown::Both)
    }

    /// Close through the ring (dropping the stream closes it synchronously instead).
    pub async fn close(self) -> io::Result<()> {
        Op::submit(Close::new(self.fd)).await
    }

    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
