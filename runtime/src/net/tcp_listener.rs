use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use socket2::{Domain, Protocol, Socket, Type};

use super::TcpStream;
use crate::driver::op::{accept::Accept, Op};

/// How a listening socket is set up.
#[derive(Debug, Clone, Copy)]
pub struct ListenOptions {
    /// SO_REUSEPORT: several shards bind the same address and the kernel spreads connections.
    pub reuse_port: bool,
    pub backlog: i32,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            reuse_port: false,
            backlog: 1024,
        }
    }
}

/// A listening TCP socket whose accepts go through the shard's ring.
pub struct TcpListener {
    fd: OwnedFd,
    local: SocketAddr,
}

impl TcpListener {
    /// Bind and listen. Plain syscalls: binding happens once, off the hot path.
    pub fn bind(addr: SocketAddr, opts: ListenOptions) -> io::Result<TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        if opts.reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.set_cloexec(true)?;
        socket.bind(&addr.into())?;
        socket.listen(opts.backlog)?;
        let local = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("listener has no IP address"))?;
        Ok(TcpListener {
            fd: socket.into(),
            local,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn shutdown(&self) -> io::Result<()> {
        socket2::SockRef::from(&self.fd).shutdown(std::net::Shutdown::Both)
    }

    /// Accept one connection (TCP_NODELAY set: request/response traffic is the common case).
    pub async fn accept(&self) -> io::Result<(TcpStream, Option<SocketAddr>)> {
        let (fd, peer) = Op::submit(Accept::new(self.fd.as_raw_fd())).await?;
        let stream = TcpStream::from_fd(fd);
        stream.set_nodelay(true)?;
        Ok((stream, peer))
    }

    /// Accept a raw descriptor, for handing the connection to another shard.
    pub async fn accept_fd(&self) -> io::Result<(OwnedFd, Option<SocketAddr>)> {
        let (fd, peer) = Op::submit(Accept::new(self.fd.as_raw_fd())).await?;
        socket2::SockRef::from(&fd).set_tcp_nodelay(true)?;
        Ok((fd, peer))
    }
}
