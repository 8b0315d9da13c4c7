use std::io;
use std::net::SocketAddr;

use io_uring::{opcode, squeue, types};
use socket2::SockAddr;

use super::OpCode;
use crate::driver::fd::SharedFd;

/// connect(2) on a non-connected socket, to an IP or a Unix address.
pub(crate) struct Connect {
    fd: SharedFd,
    addr: Box<SockAddr>,
}

impl Connect {
    pub(crate) fn new(fd: SharedFd, addr: SocketAddr) -> Connect {
        Connect::to(fd, SockAddr::from(addr))
    }

    pub(crate) fn to(fd: SharedFd, addr: SockAddr) -> Connect {
        Connect {
            fd,
            addr: Box::new(addr),
        }
    }
}

// SAFETY: the address is boxed and owned by the op; the socket is held by `fd`.
unsafe impl OpCode for Connect {
    type Output = io::Result<()>;

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
}
