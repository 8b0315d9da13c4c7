//! UDP on the shard's ring.
//!
//! Each receive is one `recvmsg` SQE into the caller's buffer. Multishot receive (one SQE,
//! a completion per datagram into the shard's provided-buffer ring) needs the buffer rings
//! of the I/O core, which are not on main yet; it belongs here once they are.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};

use crate::driver::fd::SharedFd;
use crate::driver::op::recv_from::{Received, RecvFrom};
use crate::driver::op::send_to::SendTo;
use crate::driver::op::Op;

/// One datagram as [`UdpSocket::recv_from`] (or
/// [`UnixDatagram::recv_from`](super::UnixDatagram::recv_from)) received it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Datagram<A> {
    /// Bytes appended to the buffer.
    pub len: usize,
    /// The datagram did not fit in the buffer's spare capacity: only its first `len` bytes
    /// were kept, the rest is gone. Never silent: check it (or size buffers to the largest
    /// datagram the protocol allows).
    pub truncated: bool,
    /// The sender.
    pub from: A,
}

/// A UDP socket whose sends and receives go through the shard's ring. Buffers are passed by
/// value and come back with the result.
///
/// The socket owns its descriptor jointly with its operations in flight: dropping it closes
/// the socket once they have completed. `!Send`: it belongs to its shard.
pub struct UdpSocket {
    fd: SharedFd,
}

impl UdpSocket {
    /// Bind to `addr` (port 0 picks a free port; see [`local_addr`](UdpSocket::local_addr)).
    pub fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_cloexec(true)?;
        socket.bind(&addr.into())?;
        Ok(UdpSocket {
            fd: SharedFd::new(socket.into()),
        })
    }

    /// Adopt a std socket (blocking or not: the ring does not care).
    pub fn from_std(socket: std::net::UdpSocket) -> UdpSocket {
        UdpSocket {
            fd: SharedFd::new(socket.into()),
        }
    }

    /// Set the default peer: [`send`](UdpSocket::send) goes there and only its datagrams are
    /// received. A UDP connect sends nothing, so it is a plain, immediate syscall.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        SockRef::from(&self.fd).connect(&addr.into())
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        ip_addr(SockRef::from(&self.fd).local_addr()?)
    }

    /// The connected peer.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        ip_addr(SockRef::from(&self.fd).peer_addr()?)
    }

    /// Allow sending to broadcast addresses (SO_BROADCAST).
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        SockRef::from(&self.fd).set_broadcast(on)
    }

    /// Send `buf` as one datagram to `target`: `(bytes sent, buf)`. Dropping the future
    /// cancels the send (the datagram may or may not have left).
    pub fn send_to(&self, buf: Bytes, target: SocketAddr) -> SendDatagram {
        SendDatagram::new(SendTo::new(self.fd.clone(), buf, Some(target.into())))
    }

    /// Send `buf` as one datagram to the connected peer.
    pub fn send(&self, buf: Bytes) -> SendDatagram {
        SendDatagram::new(SendTo::new(self.fd.clone(), buf, None))
    }

    /// Receive one datagram into `buf`'s spare capacity (at least `min_spare` bytes are
    /// reserved first). A longer datagram is cut and reported as
    /// [`truncated`](Datagram::truncated). On a connected socket, an ICMP error from the
    /// peer (port unreachable) comes back here as `ConnectionRefused`.
    ///
    /// Not cancel-safe: a datagram the kernel delivered into a dropped future's buffer is
    /// lost, as datagrams may be anyway.
    pub fn recv_from(&self, buf: BytesMut, min_spare: usize) -> RecvDatagram<SocketAddr> {
        RecvDatagram::new(&self.fd, buf, min_spare, ip_addr)
    }

    /// Close through the ring once every operation in flight on the socket has completed,
    /// and report the close's result (dropping the socket closes it without a report).
    pub async fn close(self) -> io::Result<()> {
        self.fd.close().await
    }
}

fn ip_addr(addr: SockAddr) -> io::Result<SocketAddr> {
    addr.as_socket()
        .ok_or_else(|| io::Error::other("not an IP socket address"))
}

/// A datagram send in flight: `(bytes sent, buffer)`.
#[must_use = "futures do nothing unless awaited"]
pub struct SendDatagram(Op<SendTo>);

impl SendDatagram {
    pub(super) fn new(op: SendTo) -> SendDatagram {
        SendDatagram(Op::submit(op))
    }
}

impl Future for SendDatagram {
    type Output = (io::Result<usize>, Bytes);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

/// A datagram receive in flight: `(datagram, buffer)`; `A` is the sender's address type.
#[must_use = "futures do nothing unless awaited"]
pub struct RecvDatagram<A> {
    op: Op<RecvFrom>,
    sender: fn(SockAddr) -> io::Result<A>,
}

impl<A> RecvDatagram<A> {
    pub(super) fn new(
        fd: &SharedFd,
        mut buf: BytesMut,
        min_spare: usize,
        sender: fn(SockAddr) -> io::Result<A>,
    ) -> RecvDatagram<A> {
        let min_spare = min_spare.max(1);
        if buf.capacity() - buf.len() < min_spare {
            buf.reserve(min_spare);
        }
        RecvDatagram {
            op: Op::submit(RecvFrom::new(fd.clone(), buf)),
            sender,
        }
    }
}

impl<A> Future for RecvDatagram<A> {
    type Output = (io::Result<Datagram<A>>, BytesMut);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // No self-references: the op's kernel-visible data is boxed.
        let this = self.get_mut();
        let sender = this.sender;
        Pin::new(&mut this.op).poll(cx).map(|(res, buf)| {
            let res = res.and_then(|r: Received| {
                Ok(Datagram {
                    len: r.len,
                    truncated: r.truncated,
                    from: sender(r.from)?,
                })
            });
            (res, buf)
        })
    }
}
