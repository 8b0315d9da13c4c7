use std::io;
use std::os::fd::RawFd;

use bytes::Bytes;
use io_uring::{opcode, squeue, types};

use super::OpData;

/// pwrite(2) of one buffer at `offset` (`u64::MAX`: the file position, for O_APPEND files).
pub struct Write {
    fd: RawFd,
    buf: Bytes,
    offset: u64,
}

impl Write {
    pub fn new(fd: RawFd, buf: Bytes, offset: u64) -> Write {
        Write { fd, buf, offset }
    }
}

impl OpData for Write {
    type Output = (io::Result<usize>, Bytes);

    fn sqe(&mut self) -> squeue::Entry {
        let len = self.buf.len().min(u32::MAX as usize) as u32;
        opcode::Write::new(types::Fd(self.fd), self.buf.as_ptr(), len)
            .offset(self.offset)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.buf)
    }
}
