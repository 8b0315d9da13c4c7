use std::io;
use std::net::SocketAddr;

use io_uring::{opcode, squeue, types};
use socket2::SockAddr;

use super::{EpollKind, OpCode};
use crate::driver::epoll::Interest;
use crate::driver::fd::SharedFd;

/// connect(2) on a non-connected socket, to an IP or a Unix address.
pub(crate) struct Connect {
    fd: SharedFd,
    addr: Box<SockAddr>,
    /// epoll: connect(2) said EINPROGRESS; writability ends it.
    started: bool,
}

impl Connect {
    pub(crate) fn new(fd: SharedFd, addr: SocketAddr) -> Connect {
        Connect::to(fd, SockAddr::from(addr))
    }

    pub(crate) fn to(fd: SharedFd, addr: SockAddr) -> Connect {
        Connect {
            fd,
            addr: Box::new(addr),
            started: false,
        }
    }
}

// SAFETY: the address is boxed and owned by the op; the socket is held by `fd`.
unsafe impl OpCode for Connect {
    type Output = io::Result<()>;
    const EPOLL: EpollKind = EpollKind::Ready(Interest::Write);

    fn sqe(&mut self) -> squeue::Entry {
        opcode::Connect::new(
            types::Fd(self.fd.raw()),
            self.addr.as_ptr().cast(),
            self.addr.len(),
        )
        .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }

    fn epoll_fd(&self) -> Option<&SharedFd> {
        Some(&self.fd)
    }

    fn attempt(&mut self) -> io::Result<u32> {
        let sock = socket2::SockRef::from(&self.fd);
        if !self.started {
            self.fd.ensure_nonblocking()?;
            return match sock.connect(&self.addr) {
                Ok(()) => Ok(0),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINPROGRESS | libc::EALREADY | libc::EINTR)
                    ) =>
                {
                    self.started = true;
                    Err(io::ErrorKind::WouldBlock.into())
                }
                // A Unix listener's full backlog: try again when writable.
                Err(e) => Err(e),
            };
        }
        // Writable: connected, or failed (SO_ERROR), or not yet (a spurious wake-up).
        if let Some(e) = sock.take_error()? {
            return Err(e);
        }
        match sock.peer_addr() {
            Ok(_) => Ok(0),
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                Err(io::ErrorKind::WouldBlock.into())
            }
            Err(e) => Err(e),
        }
    }
}
