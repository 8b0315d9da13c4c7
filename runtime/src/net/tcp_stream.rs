use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::driver::fd::SharedFd;
use crate::driver::op::connect::Connect;
use crate::driver::op::recv::Recv;
use crate::driver::op::Op;
use crate::net::receiver::{Receiver, RecvAvailable, RecvChunk};
use crate::net::{RecvBuf, SendFuture};

/// A connected TCP socket whose I/O goes through the shard's ring. Buffers are passed by value
/// and handed back with the result: the kernel owns them while an operation is in flight.
///
/// The stream owns its descriptor jointly with its operations in flight: dropping the stream
/// closes the socket only once they have all completed. `!Send`: it belongs to its shard.
pub struct TcpStream {
    rx: Receiver,
    fd: SharedFd,
}

impl TcpStream {
    pub(crate) fn from_fd(fd: OwnedFd) -> TcpStream {
        TcpStream {
            rx: Receiver::new(),
            fd: SharedFd::for_stream(fd),
        }
    }

    /// Adopt a connected std socket (blocking or not: the ring does not care).
    pub fn from_std(stream: std::net::TcpStream) -> TcpStream {
        TcpStream::from_fd(stream.into())
    }

    /// Connect from the current shard. Cancel-safe: dropping it closes the half-made socket.
    pub async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        TcpStream::connect_from(None, addr).await
    }

    /// [`connect`](Self::connect) from the local address `source` (the kernel picks the port;
    /// `None`: the kernel picks both), as a client with several addresses chooses which one
    /// its peer sees.
    pub async fn connect_from(source: Option<IpAddr>, addr: SocketAddr) -> io::Result<TcpStream> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_cloexec(true)?;
        if let Some(source) = source {
            socket.bind(&SocketAddr::new(source, 0).into())?;
        }
        let stream = TcpStream::from_fd(socket.into());
        Op::submit(Connect::new(stream.fd.clone(), addr)).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// Set `TCP_NODELAY` (on by default for accepted and connected streams).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        SockRef::from(&self.fd).set_tcp_nodelay(on)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        SockRef::from(&self.fd)
            .peer_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("peer has no IP address"))
    }

    /// The socket's descriptor number, for reports (Redis's CLIENT LIST `fd=`). Valid while the
    /// stream lives; do not close it or use it for I/O behind the ring's back.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::{AsFd, AsRawFd};
        self.fd.as_fd().as_raw_fd()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        SockRef::from(&self.fd)
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("socket has no IP address"))
    }

    /// Receive the next chunk the peer sent, as the kernel delivered it: `Ok(None)` once the
    /// peer closed its side. Where the kernel has multishot receive, one receive stays armed
    /// and chunks land in the shard's buffer ring, so a stream waiting for data holds no
    /// buffer; drop each [`RecvBuf`] as soon as its bytes are used (copy what must wait for
    /// more input). Cancel-safe. Use this or [`recv`](Self::recv) on a stream, not both: an
    /// armed multishot receive takes every byte that arrives.
    pub fn recv_chunk(&self) -> RecvChunk<'_> {
        RecvChunk {
            rx: &self.rx,
            fd: &self.fd,
        }
    }

    /// Append the next chunk received to `buf` (waiting for one), and with it every chunk
    /// already received behind it (up to 64 KiB in all): the number of bytes appended,
    /// `Ok(0)` once the peer closed its side. For request/response loops that answer what
    /// arrived together with one send: requests that arrive together often span several
    /// of the ring's 4 KiB chunks, and answering chunk by chunk would cost one send (and
    /// one TCP segment) per chunk. Cancel-safe; each chunk's buffer goes back to the ring
    /// at once. Like [`recv_chunk`](Self::recv_chunk), not to be mixed with
    /// [`recv`](Self::recv).
    pub fn recv_available<'a>(&'a self, buf: &'a mut BytesMut) -> RecvAvailable<'a> {
        RecvAvailable {
            rx: &self.rx,
            fd: &self.fd,
            buf,
        }
    }

    /// [`recv_chunk`](Self::recv_chunk) as a poll function, for hand-written futures.
    pub fn poll_recv_chunk(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<RecvBuf>>> {
        self.rx.poll_recv(&self.fd, cx)
    }

    /// Receive into `buf`'s spare capacity (reserved here to at least `min_spare` bytes).
    /// `Ok(0)` means the peer closed its side. The future owns the buffer and the stream's
    /// descriptor share, so it may outlive the borrow of `self`.
    ///
    /// Not cancel-safe: dropping the future drops the buffer and what it held.
    pub fn recv(&self, buf: BytesMut, min_spare: usize) -> RecvFuture {
        RecvFuture::submit(&self.fd, buf, min_spare)
    }

    /// One send; may write only part of `buf`. Like [`TcpStream::recv`], the future owns
    /// what it needs. Dropping it cancels the send (some bytes may have gone out).
    ///
    /// At or above the shard's `send_zc_threshold` (off by default) the send is zero-copy:
    /// the kernel keeps a share of `buf` until it has finished with the bytes.
    pub fn send(&self, buf: Bytes) -> SendFuture {
        super::send::send(&self.fd, buf)
    }

    /// Send all of `buf`. Not cancel-safe: dropped midway, an unknown prefix was sent.
    pub async fn send_all(&self, buf: Bytes) -> io::Result<()> {
        super::send::send_all(&self.fd, buf).await
    }

    /// Send all of several buffers with as few syscalls as the socket allows. Not
    /// cancel-safe, like [`TcpStream::send_all`].
    pub async fn send_all_vectored(&self, bufs: Vec<Bytes>) -> io::Result<()> {
        super::send::send_all_vectored(&self.fd, bufs).await
    }

    /// Split into an owned receive half and send half, each movable into its own task of
    /// this shard: one task can wait for input while another sends. Dropping the write half
    /// shuts the write direction down; dropping the read half stops receiving; the socket
    /// closes once both are gone. [`OwnedReadHalf::reunite`](super::OwnedReadHalf::reunite)
    /// puts them back together.
    pub fn into_split(
        self,
    ) -> (
        super::OwnedReadHalf<TcpStream>,
        super::OwnedWriteHalf<TcpStream>,
    ) {
        super::split::into_split(self)
    }

    /// Borrow the receive side and the send side separately, for two futures of one task
    /// (e.g. a receive loop and a send loop under `join`).
    pub fn split(
        &mut self,
    ) -> (
        super::ReadHalf<'_, TcpStream>,
        super::WriteHalf<'_, TcpStream>,
    ) {
        super::split::split(self)
    }

    /// Stop sending (the peer reads end-of-stream); receiving continues.
    pub fn shutdown_write(&self) -> io::Result<()> {
        SockRef::from(&self.fd).shutdown(std::net::Shutdown::Write)
    }

    /// Stop both directions: a recv pending on this socket returns 0, the peer sees EOF.
    pub fn shutdown_both(&self) -> io::Result<()> {
        SockRef::from(&self.fd).shutdown(std::net::Shutdown::Both)
    }

    /// Close through the ring once every operation in flight on the socket has completed,
    /// and report the close's result (dropping the stream closes it without a report).
    pub async fn close(self) -> io::Result<()> {
        self.rx.stop();
        self.fd.close().await
    }
}

/// A receive in flight ([`TcpStream::recv`]): `(result, buffer)`.
#[must_use = "futures do nothing unless awaited"]
pub struct RecvFuture(Op<Recv>);

impl RecvFuture {
    /// Submit a receive on `fd` into `buf`'s spare capacity, reserved to `min_spare` (≥ 1).
    pub(crate) fn submit(fd: &SharedFd, mut buf: BytesMut, min_spare: usize) -> RecvFuture {
        let min_spare = min_spare.max(1);
        if buf.capacity() - buf.len() < min_spare {
            buf.reserve(min_spare);
        }
        RecvFuture(Op::submit(Recv::new(fd.clone(), buf)))
    }
}

impl Future for RecvFuture {
    type Output = (io::Result<usize>, BytesMut);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl super::split::sealed::Sealed for TcpStream {
    fn parts(&self) -> super::split::sealed::Parts<'_> {
        super::split::sealed::Parts {
            rx: &self.rx,
            fd: &self.fd,
        }
    }

    fn addr(&self, peer: bool) -> io::Result<SocketAddr> {
        if peer {
            self.peer_addr()
        } else {
            self.local_addr()
        }
    }
}
