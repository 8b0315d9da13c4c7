use std::io;

use bytes::Bytes;
use io_uring::{opcode, squeue};

use super::OpCode;
use crate::driver::fd::{on_fd, SharedFd};

/// send(2) of one buffer (MSG_NOSIGNAL: a closed peer is an error, not a signal).
pub(crate) struct Send {
    fd: SharedFd,
    buf: Bytes,
}

impl Send {
    pub(crate) fn new(fd: SharedFd, buf: Bytes) -> Send {
        Send { fd, buf }
    }
}

// SAFETY: the kernel only reads `buf`, whose heap bytes the op keeps alive (Bytes never
// moves or mutates its contents); the socket is held by `fd`.
unsafe impl OpCode for Send {
    type Output = (io::Result<usize>, Bytes);

    fn sqe(&mut self) -> squeue::Entry {
        let len = self.buf.len().min(u32::MAX as usize) as u32;
        let ptr = self.buf.as_ptr();
        on_fd!(self.fd, t => opcode::Send::new(t, ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build())
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.buf)
    }
}
