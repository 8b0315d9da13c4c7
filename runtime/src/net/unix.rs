//! Unix-domain sockets on the shard's ring: streams, listeners and datagrams.
//!
//! Binding to a path that exists is an error (`AddrInUse`), never a silent unlink of
//! someone's socket or file: remove a stale socket file yourself if you know it is yours.
//! Nothing unlinks the socket file when the socket closes either (as with std).

use std::io;
use std::path::{Path, PathBuf};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use socket2::{Domain, SockAddr, SockRef, Socket, Type};

use super::udp::{RecvDatagram, SendDatagram};
use super::{RecvFuture, SendFuture};
use crate::driver::fd::SharedFd;
use crate::driver::op::accept::Accept;
use crate::driver::op::connect::Connect;
use crate::driver::op::send_to::SendTo;
use crate::driver::op::Op;
use crate::net::receiver::{Receiver, RecvAvailable, RecvChunk};
use crate::net::RecvBuf;

/// The address of a Unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnixAddr {
    /// No name: an unbound socket (or one end of a [`UnixStream::pair`]).
    Unnamed,
    /// A path in the file system.
    Pathname(PathBuf),
    /// A name in Linux's abstract namespace (without the leading NUL).
    Abstract(Vec<u8>),
}

impl UnixAddr {
    /// The path, for a [`UnixAddr::Pathname`].
    pub fn as_pathname(&self) -> Option<&Path> {
        match self {
            UnixAddr::Pathname(p) => Some(p),
            _ => None,
        }
    }

    /// Whether the socket has no name.
    pub fn is_unnamed(&self) -> bool {
        matches!(self, UnixAddr::Unnamed)
    }

    fn from_sock_addr(addr: &SockAddr) -> UnixAddr {
        if let Some(path) = addr.as_pathname() {
            UnixAddr::Pathname(path.to_owned())
        } else if let Some(name) = addr.as_abstract_namespace() {
            UnixAddr::Abstract(name.to_vec())
        } else {
            // An unbound sender leaves the name empty (length 0, or just the family).
            UnixAddr::Unnamed
        }
    }
}

fn unix_socket(ty: Type) -> io::Result<Socket> {
    let socket = Socket::new(Domain::UNIX, ty, None)?;
    socket.set_cloexec(true)?;
    Ok(socket)
}

fn sender(addr: SockAddr) -> io::Result<UnixAddr> {
    Ok(UnixAddr::from_sock_addr(&addr))
}

fn local_addr(fd: &SharedFd) -> io::Result<UnixAddr> {
    Ok(UnixAddr::from_sock_addr(&SockRef::from(fd).local_addr()?))
}

fn peer_addr(fd: &SharedFd) -> io::Result<UnixAddr> {
    Ok(UnixAddr::from_sock_addr(&SockRef::from(fd).peer_addr()?))
}

/// A listening Unix stream socket whose accepts go through the shard's ring. `!Send`.
pub struct UnixListener {
    fd: SharedFd,
}

impl UnixListener {
    /// Bind and listen at `path` (backlog 1024). Fails with `AddrInUse` if `path` exists.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let socket = unix_socket(Type::STREAM)?;
        socket.bind(&SockAddr::unix(path)?)?;
        socket.listen(1024)?;
        Ok(UnixListener {
            fd: SharedFd::new(socket.into()),
        })
    }

    /// Adopt a listening std socket.
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> UnixListener {
        UnixListener {
            fd: SharedFd::new(listener.into()),
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<UnixAddr> {
        local_addr(&self.fd)
    }

    /// Accept one connection.
    ///
    /// Not cancel-safe: a connection the kernel accepted for a future that is then dropped
    /// is closed (never leaked), so that client sees its connection close.
    pub async fn accept(&self) -> io::Result<UnixStream> {
        let (fd, _) = Op::submit(Accept::new(self.fd.clone())).await?;
        Ok(UnixStream::from_fd(fd))
    }

    /// Close through the ring once every operation in flight has completed.
    pub async fn close(self) -> io::Result<()> {
        self.fd.close().await
    }
}

/// A connected Unix stream socket, with the same owned-buffer I/O as
/// [`TcpStream`](super::TcpStream) (and the same [`Compat`](crate::compat::Compat) adapters).
///
/// Owns its descriptor jointly with its operations in flight; `!Send`.
pub struct UnixStream {
    rx: Receiver,
    fd: SharedFd,
}

impl UnixStream {
    fn from_fd(fd: std::os::fd::OwnedFd) -> UnixStream {
        UnixStream {
            rx: Receiver::new(),
            fd: SharedFd::for_stream(fd),
        }
    }

    /// Connect to the listener at `path`, through the ring. Cancel-safe: dropping it closes
    /// the half-made socket.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let addr = SockAddr::unix(path)?;
        let stream = UnixStream::from_fd(unix_socket(Type::STREAM)?.into());
        Op::submit(Connect::to(stream.fd.clone(), addr)).await?;
        Ok(stream)
    }

    /// A connected pair (socketpair(2)), for talking to oneself or a child.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM.cloexec(), None)?;
        Ok((UnixStream::from_fd(a.into()), UnixStream::from_fd(b.into())))
    }

    /// Adopt a connected std socket.
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> UnixStream {
        UnixStream::from_fd(stream.into())
    }

    /// This end's address (usually unnamed for a connecting socket).
    pub fn local_addr(&self) -> io::Result<UnixAddr> {
        local_addr(&self.fd)
    }

    /// The peer's address (the listener's path for a connected client).
    pub fn peer_addr(&self) -> io::Result<UnixAddr> {
        peer_addr(&self.fd)
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
    /// `Ok(0)` means the peer closed its side.
    ///
    /// Not cancel-safe: dropping the future drops the buffer and what it held (wrap the
    /// stream in [`Compat`](crate::compat::Compat) for cancel-safe reads).
    pub fn recv(&self, buf: BytesMut, min_spare: usize) -> RecvFuture {
        RecvFuture::submit(&self.fd, buf, min_spare)
    }

    /// One send; may write only part of `buf`. Dropping the future cancels the send (some
    /// bytes may have gone out).
    pub fn send(&self, buf: Bytes) -> SendFuture {
        super::send::send(&self.fd, buf)
    }

    /// Send all of `buf`. Not cancel-safe: dropped midway, an unknown prefix was sent.
    pub async fn send_all(&self, buf: Bytes) -> io::Result<()> {
        super::send::send_all(&self.fd, buf).await
    }

    /// Send all of several buffers with as few syscalls as the socket allows. Not
    /// cancel-safe, like [`UnixStream::send_all`].
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
        super::OwnedReadHalf<UnixStream>,
        super::OwnedWriteHalf<UnixStream>,
    ) {
        super::split::into_split(self)
    }

    /// Borrow the receive side and the send side separately, for two futures of one task
    /// (e.g. a receive loop and a send loop under `join`).
    pub fn split(
        &mut self,
    ) -> (
        super::ReadHalf<'_, UnixStream>,
        super::WriteHalf<'_, UnixStream>,
    ) {
        super::split::split(self)
    }

    /// Stop sending (the peer reads end-of-stream); receiving continues.
    pub fn shutdown_write(&self) -> io::Result<()> {
        SockRef::from(&self.fd).shutdown(std::net::Shutdown::Write)
    }

    /// The socket's descriptor number, for reports (Redis's CLIENT LIST `fd=`). Valid while the
    /// stream lives; do not close it or use it for I/O behind the ring's back.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::{AsFd, AsRawFd};
        self.fd.as_fd().as_raw_fd()
    }

    /// Stop both directions: a recv pending on this socket returns 0, the peer sees EOF.
    pub fn shutdown_both(&self) -> io::Result<()> {
        SockRef::from(&self.fd).shutdown(std::net::Shutdown::Both)
    }

    /// Close through the ring once every operation in flight has completed, and report the
    /// close's result (dropping the stream closes it without a report).
    pub async fn close(self) -> io::Result<()> {
        self.rx.stop();
        self.fd.close().await
    }
}

/// A Unix datagram socket: message boundaries kept, truncation reported. `!Send`.
pub struct UnixDatagram {
    fd: SharedFd,
}

impl UnixDatagram {
    /// Bind at `path`. Fails with `AddrInUse` if `path` exists.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        let socket = unix_socket(Type::DGRAM)?;
        socket.bind(&SockAddr::unix(path)?)?;
        Ok(UnixDatagram {
            fd: SharedFd::new(socket.into()),
        })
    }

    /// A socket with no name: it can send, but nobody can address a reply to it.
    pub fn unbound() -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            fd: SharedFd::new(unix_socket(Type::DGRAM)?.into()),
        })
    }

    /// A connected pair of datagram sockets (socketpair(2)).
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = Socket::pair(Domain::UNIX, Type::DGRAM.cloexec(), None)?;
        Ok((
            UnixDatagram {
                fd: SharedFd::new(a.into()),
            },
            UnixDatagram {
                fd: SharedFd::new(b.into()),
            },
        ))
    }

    /// Adopt a std socket.
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> UnixDatagram {
        UnixDatagram {
            fd: SharedFd::new(socket.into()),
        }
    }

    /// Set the default peer (immediate: nothing is sent). Fails with `ConnectionRefused`
    /// when nothing is bound at `path`.
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        SockRef::from(&self.fd).connect(&SockAddr::unix(path)?)
    }

    /// Its own address (unnamed if unbound).
    pub fn local_addr(&self) -> io::Result<UnixAddr> {
        local_addr(&self.fd)
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<UnixAddr> {
        peer_addr(&self.fd)
    }

    /// Send `buf` as one datagram to the socket at `path`. Fails at once (not in the
    /// future) if `path` is too long for a socket address.
    pub fn send_to(&self, buf: Bytes, path: impl AsRef<Path>) -> io::Result<SendDatagram> {
        let to = SockAddr::unix(path)?;
        Ok(SendDatagram::new(SendTo::new(
            self.fd.clone(),
            buf,
            Some(to),
        )))
    }

    /// Send `buf` as one datagram to the connected peer.
    pub fn send(&self, buf: Bytes) -> SendDatagram {
        SendDatagram::new(SendTo::new(self.fd.clone(), buf, None))
    }

    /// Receive one datagram into `buf`'s spare capacity (at least `min_spare` reserved); a
    /// longer one is cut and reported as [`truncated`](super::Datagram::truncated). Not
    /// cancel-safe, like [`UdpSocket::recv_from`](super::UdpSocket::recv_from).
    pub fn recv_from(&self, buf: BytesMut, min_spare: usize) -> RecvDatagram<UnixAddr> {
        RecvDatagram::new(&self.fd, buf, min_spare, sender)
    }

    /// Close through the ring once every operation in flight has completed.
    pub async fn close(self) -> io::Result<()> {
        self.fd.close().await
    }
}

impl super::split::sealed::Sealed for UnixStream {
    fn parts(&self) -> super::split::sealed::Parts<'_> {
        super::split::sealed::Parts {
            rx: &self.rx,
            fd: &self.fd,
        }
    }

    fn addr(&self, peer: bool) -> io::Result<UnixAddr> {
        if peer {
            self.peer_addr()
        } else {
            self.local_addr()
        }
    }
}
