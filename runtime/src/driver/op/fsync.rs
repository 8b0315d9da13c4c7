use std::io;

use io_uring::{opcode, squeue, types};

use super::{errno_result, BlockingCall, EpollKind, OpCode};
use crate::driver::fd::SharedFd;

/// fsync(2), or fdatasync(2) when `data_only`.
pub(crate) struct Fsync {
    fd: SharedFd,
    data_only: bool,
}

impl Fsync {
    pub(crate) fn new(fd: SharedFd, data_only: bool) -> Fsync {
        Fsync { fd, data_only }
    }
}

// SAFETY: no pointers; the file is held by `fd`.
unsafe impl OpCode for Fsync {
    type Output = io::Result<()>;
    const EPOLL: EpollKind = EpollKind::Blocking;

    fn sqe(&mut self) -> squeue::Entry {
        let mut op = opcode::Fsync::new(types::Fd(self.fd.raw()));
        if self.data_only {
            op = op.flags(types::FsyncFlags::DATASYNC);
        }
        op.build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }

    fn blocking(&mut self) -> BlockingCall {
        let (fd, data_only) = (self.fd.raw(), self.data_only);
        Box::new(move || {
            // SAFETY: no pointers; the file is held open by the op's `fd` until the call
            // returned (the driver keeps the op until then).
            let rc = unsafe {
                if data_only {
                    libc::fdatasync(fd)
                } else {
                    libc::fsync(fd)
                }
            };
            errno_result(rc as isize)
        })
    }
}
