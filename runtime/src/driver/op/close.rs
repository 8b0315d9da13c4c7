use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};

use io_uring::{opcode, squeue, types};

use super::{attempt_result, EpollKind, OpCode};
use crate::driver::epoll::Interest;

/// close(2) through the ring. Owns the descriptor from submission on: whatever happens to
/// the future, the kernel closes it.
pub(crate) struct Close {
    fd: RawFd,
    /// Not yet handed to the kernel (nor closed by an attempt): dropping the op closes it.
    pending: bool,
}

impl Close {
    pub(crate) fn new(fd: OwnedFd) -> Close {
        Close {
            fd: fd.into_raw_fd(),
            pending: true,
        }
    }
}

impl Drop for Close {
    fn drop(&mut self) {
        if self.pending {
            // SAFETY: the descriptor came from an OwnedFd and was neither closed nor handed
            // to the kernel: it is still ours, and this is its only close.
            crate::driver::fd::close_later(unsafe { OwnedFd::from_raw_fd(self.fd) });
        }
    }
}

// SAFETY: no pointers; the descriptor was taken from its OwnedFd and is closed exactly once,
// by this op.
unsafe impl OpCode for Close {
    type Output = io::Result<()>;
    // Nothing to wait for: the attempt closes at once.
    const EPOLL: EpollKind = EpollKind::Ready(Interest::Write);

    fn sqe(&mut self) -> squeue::Entry {
        self.pending = false;
        opcode::Close::new(types::Fd(self.fd)).build()
    }

    fn attempt(&mut self) -> io::Result<u32> {
        self.pending = false;
        // SAFETY: closing a descriptor this op owns, once (`pending` is now false).
        attempt_result(unsafe { libc::close(self.fd) } as isize)
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
