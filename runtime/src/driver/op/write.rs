use std::io;

use bytes::Bytes;
use io_uring::{opcode, squeue, types};

use super::{errno_result, BlockingCall, EpollKind, OpCode, SendPtr};
use crate::driver::fd::SharedFd;

/// pwrite(2) of one buffer at `offset` (`u64::MAX`: the file position, for O_APPEND files).
pub(crate) struct Write {
    fd: SharedFd,
    buf: Bytes,
    offset: u64,
}

impl Write {
    pub(crate) fn new(fd: SharedFd, buf: Bytes, offset: u64) -> Write {
        Write { fd, buf, offset }
    }
}

// SAFETY: the kernel only reads `buf`, whose heap bytes the op keeps alive; the file is
// held by `fd`.
unsafe impl OpCode for Write {
    type Output = (io::Result<usize>, Bytes);
    const EPOLL: EpollKind = EpollKind::Blocking;

    fn sqe(&mut self) -> squeue::Entry {
        let len = self.buf.len().min(u32::MAX as usize) as u32;
        opcode::Write::new(types::Fd(self.fd.raw()), self.buf.as_ptr(), len)
            .offset(self.offset)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.buf)
    }

    fn blocking(&mut self) -> BlockingCall {
        let (fd, ptr, len, offset) = (
            self.fd.raw(),
            SendPtr(self.buf.as_ptr().cast_mut()),
            self.buf.len().min(u32::MAX as usize),
            self.offset,
        );
        Box::new(move || {
            let ptr = ptr;
            // SAFETY: the helper only reads the op's bytes, alive until the call returned.
            let rc = unsafe {
                if offset == u64::MAX {
                    libc::write(fd, ptr.0.cast(), len)
                } else {
                    libc::pwrite(fd, ptr.0.cast(), len, offset as libc::off_t)
                }
            };
            errno_result(rc)
        })
    }
}
