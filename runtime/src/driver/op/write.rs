use std::io;

use bytes::Bytes;
use io_uring::{opcode, squeue, types};

use super::OpCode;
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

    fn sqe(&mut self) -> squeue::Entry {
        let len = self.buf.len().min(u32::MAX as usize) as u32;
        opcode::Write::new(types::Fd(self.fd.raw()), self.buf.as_ptr(), len)
            .offset(self.offset)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.buf)
    }
}
