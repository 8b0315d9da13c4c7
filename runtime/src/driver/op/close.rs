use std::io;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};

use io_uring::{opcode, squeue, types};

use super::OpData;

/// close(2) through the ring.
pub struct Close {
    fd: RawFd,
}

impl Close {
    pub fn new(fd: OwnedFd) -> Close {
        Close {
            fd: fd.into_raw_fd(),
        }
    }
}

impl OpData for Close {
    type Output = io::Result<()>;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::Close::new(types::Fd(self.fd)).build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
