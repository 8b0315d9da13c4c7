use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};
use socket2::SockAddr;

use super::OpData;

/// connect(2) on a non-connected socket.
pub struct Connect {
    fd: RawFd,
    addr: Box<SockAddr>,
}

impl Connect {
    pub fn new(fd: RawFd, addr: SocketAddr) -> Connect {
        Connect {
            fd,
            addr: Box::new(SockAddr::from(addr)),
        }
    }
}

impl OpData for Connect {
    type Output = io::Result<()>;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::Connect::new(
            types::Fd(self.fd),
            self.addr.as_ptr().cast(),
            self.addr.len(),
        )
        .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
