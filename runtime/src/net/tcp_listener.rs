use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::TcpStream;
use crate::driver::fd::SharedFd;
use crate::driver::op::{accept::Accept, Op};
use crate::driver::uring::acceptor::Acceptor;
use crate::shard::context;

/// How a listening socket is set up.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ListenOptions {
    /// SO_REUSEPORT: several shards bind the same address and the kernel spreads connections.
    pub reuse_port: bool,
    /// The listen backlog.
    pub backlog: i32,
    /// IPV6_V6ONLY on an IPv6 address: `[::]` then takes IPv6 only, so that `0.0.0.0` can
    /// listen on the same port beside it (Redis's `bind * -::*`).
    pub only_v6: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            reuse_port: false,
            backlog: 1024,
            only_v6: false,
        }
    }
}

/// A listening TCP socket whose accepts go through the shard's ring. `!Send`: made (or
/// adopted with [`TcpListener::from_std`]) on the shard that accepts on it.
pub struct TcpListener {
    acceptor: Acceptor,
    fd: SharedFd,
    local: SocketAddr,
}

/// Bind and listen with plain syscalls (binding happens once, off the hot path); the result
/// may travel to the shard that will accept on it.
pub(crate) fn bind_std(addr: SocketAddr, opts: ListenOptions) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if opts.reuse_port {
        socket.set_reuse_port(true)?;
    }
    if opts.only_v6 && addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_cloexec(true)?;
    socket.bind(&addr.into())?;
    socket.listen(opts.backlog)?;
    Ok(socket.into())
}

impl TcpListener {
    /// Bind and listen on the current thread.
    pub fn bind(addr: SocketAddr, opts: ListenOptions) -> io::Result<TcpListener> {
        TcpListener::from_std(bind_std(addr, opts)?)
    }

    /// Adopt a listening std socket.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        let local = listener.local_addr()?;
        Ok(TcpListener {
            acceptor: Acceptor::new(),
            fd: SharedFd::new(listener.into()),
            local,
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stop listening: connections not yet accepted are refused, a pending accept fails.
    pub fn shutdown(&self) -> io::Result<()> {
        SockRef::from(&self.fd).shutdown(std::net::Shutdown::Both)
    }

    /// Accept one connection (TCP_NODELAY set: request/response traffic is the common case).
    ///
    /// With multishot accept (`Features::accept_multishot`) cancel-safe: connections wait in
    /// the listener's queue for the next call; on epoll too: a connection is taken from the
    /// backlog only in the poll that returns it. With single-shot io_uring accepts not: a
    /// connection the kernel accepted for a future that is then dropped is closed (never
    /// leaked), so that client sees its connection close.
    pub async fn accept(&self) -> io::Result<(TcpStream, Option<SocketAddr>)> {
        let (fd, peer) = self.accept_fd().await?;
        Ok((TcpStream::from_fd(fd), peer))
    }

    /// Accept a descriptor, for handing the connection to another shard. With multishot
    /// accept one accept stays armed on the listener and connections the kernel accepted
    /// wait in its queue (bounded by the listen backlog's worth of arrivals between polls),
    /// so a dropped call loses none; else one single-shot accept at a time.
    pub(crate) async fn accept_fd(&self) -> io::Result<(OwnedFd, Option<SocketAddr>)> {
        let multishot = context::with_driver(|d| d.features().accept_multishot);
        let (fd, peer) = if multishot {
            let fd = std::future::poll_fn(|cx| self.acceptor.poll_accept(&self.fd, cx)).await?;
            // Multishot accept reports no address: ask the socket (a peer already gone has
            // none to report).
            let peer = SockRef::from(&fd)
                .peer_addr()
                .ok()
                .and_then(|a| a.as_socket());
            (fd, peer)
        } else {
            Op::submit(Accept::new(self.fd.clone())).await?
        };
        SockRef::from(&fd).set_tcp_nodelay(true)?;
        Ok((fd, peer))
    }
}
