use std::io;

use io_uring::{opcode, squeue, types};

use super::{EpollKind, OpCode};
use crate::driver::fd::SharedFd;

/// ftruncate(2): set a file's length (Linux 6.9).
pub(crate) struct Ftruncate {
    fd: SharedFd,
    len: u64,
}

impl Ftruncate {
    pub(crate) fn new(fd: SharedFd, len: u64) -> Ftruncate {
        Ftruncate { fd, len }
    }
}

// SAFETY: no pointers; the file is held by `fd`.
unsafe impl OpCode for Ftruncate {
    type Output = io::Result<()>;
    // Files and foreign descriptors take other ways on epoll (the fs fallbacks, io::wait_readable).
    const EPOLL: EpollKind = EpollKind::Unsupported;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::Ftruncate::new(types::Fd(self.fd.raw()), self.len).build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
