use std::io;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};

use io_uring::{opcode, squeue, types};

use super::OpCode;

/// close(2) through the ring. Owns the descriptor from submission on: whatever happens to
/// the future, the kernel closes it.
pub(crate) struct Close {
    fd: RawFd,
}

impl Close {
    pub(crate) fn new(fd: OwnedFd) -> Close {
        Close {
            fd: fd.into_raw_fd(),
        }
    }
}

// SAFETY: no pointers; the descriptor was taken from its OwnedFd and is closed exactly once,
// by this op.
unsafe impl OpCode for Close {
    type Output = io::Result<()>;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::Close::new(types::Fd(self.fd)).build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
