use std::io;
use std::os::fd::RawFd;

use bytes::Bytes;
use io_uring::{opcode, squeue, types};

use super::OpData;

/// send(2) of one buffer (MSG_NOSIGNAL: a closed peer is an error, not a signal).
pub struct Send {
    fd: RawFd,
    buf: Bytes,
}

impl Send {
    pub fn new(fd: RawFd, buf: Bytes) -> Send {
        Send { fd, buf }
    }
}

impl OpData for Send {
    type Output = (io::Result<usize>, Bytes);

    fn sqe(&mut self) -> squeue::Entry {
        let len = self.buf.len().min(u32::MAX as usize) as u32;
        opcode::Send::new(types::Fd(self.fd), self.buf.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.buf)
    }
}
