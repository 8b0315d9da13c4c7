use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::OpData;

/// Wait until `fd` is readable (or has `events`): how a shard waits on foreign fds such as an
/// RDMA completion channel or an rdma_cm event channel without a thread of their own.
pub struct PollAdd {
    fd: RawFd,
    events: u32,
}

impl PollAdd {
    pub fn readable(fd: RawFd) -> PollAdd {
        PollAdd {
            fd,
            events: libc::POLLIN as u32,
        }
    }

    pub fn new(fd: RawFd, events: u32) -> PollAdd {
        PollAdd { fd, events }
    }
}

impl OpData for PollAdd {
    /// The events that fired.
    type Output = io::Result<u32>;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::PollAdd::new(types::Fd(self.fd), self.events).build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<u32> {
        result
    }
}
