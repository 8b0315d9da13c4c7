use std::io;

use bytes::Bytes;
use io_uring::{opcode, squeue};

use super::{attempt_result, EpollKind, OpCode};
use crate::driver::epoll::Interest;
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
    const EPOLL: EpollKind = EpollKind::Ready(Interest::Write);

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

    fn epoll_fd(&self) -> Option<&SharedFd> {
        Some(&self.fd)
    }

    fn attempt(&mut self) -> io::Result<u32> {
        send_now(&self.fd, &self.buf)
    }
}

/// epoll: one non-blocking send(2) of `buf` on `fd`, at once (the op's attempt, and the
/// stream's send before it makes an op).
pub(crate) fn send_now(fd: &SharedFd, buf: &[u8]) -> io::Result<u32> {
    let len = buf.len().min(u32::MAX as usize);
    // SAFETY: the kernel reads `len` bytes of `buf` during the call.
    let rc = unsafe {
        libc::send(
            fd.raw(),
            buf.as_ptr().cast(),
            len,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    attempt_result(rc)
}
