use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::{EpollKind, OpCode};

/// Wait until a descriptor is readable: how a shard waits on foreign fds such as an RDMA
/// completion channel or an rdma_cm event channel without a thread of their own.
///
/// The descriptor is borrowed (see `crate::io::wait_readable`): a poll writes no memory, and
/// the kernel holds its own reference to the file while the poll is armed.
pub(crate) struct PollAdd {
    fd: RawFd,
    events: u32,
}

impl PollAdd {
    pub(crate) fn readable(fd: RawFd) -> PollAdd {
        PollAdd {
            fd,
            events: libc::POLLIN as u32,
        }
    }
}

// SAFETY: no pointers. The descriptor is alive at submission (the caller borrows it for the
// future's life; a future dropped before submission removes its SQE) and the kernel takes
// its own file reference when the poll is armed.
unsafe impl OpCode for PollAdd {
    /// The events that fired.
    type Output = io::Result<u32>;
    // Files and foreign descriptors take other ways on epoll (the fs fallbacks, io::wait_readable).
    const EPOLL: EpollKind = EpollKind::Unsupported;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::PollAdd::new(types::Fd(self.fd), self.events).build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<u32> {
        result
    }
}
