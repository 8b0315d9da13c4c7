use std::io;

use bytes::BytesMut;
use io_uring::{opcode, squeue};

use super::{attempt_result, EpollKind, OpCode};
use crate::driver::epoll::Interest;
use crate::driver::fd::{on_fd, SharedFd};

/// recv(2) into the spare capacity of a `BytesMut`; the bytes received are appended.
pub(crate) struct Recv {
    fd: SharedFd,
    buf: BytesMut,
    len: u32,
}

impl Recv {
    /// `buf` must have spare capacity; the op reads at most that many bytes.
    pub(crate) fn new(fd: SharedFd, buf: BytesMut) -> Recv {
        Recv { fd, buf, len: 0 }
    }
}

// SAFETY: the kernel writes only into `buf`'s spare capacity, a heap allocation owned by the
// op that nothing else references; the socket is held by `fd`.
unsafe impl OpCode for Recv {
    type Output = (io::Result<usize>, BytesMut);
    const EPOLL: EpollKind = EpollKind::Ready(Interest::Read);

    fn sqe(&mut self) -> squeue::Entry {
        let spare = self.buf.spare_capacity_mut();
        self.len = spare.len().min(u32::MAX as usize) as u32;
        let (ptr, len) = (spare.as_mut_ptr().cast(), self.len);
        on_fd!(self.fd, t => opcode::Recv::new(t, ptr, len).build())
    }

    fn complete(mut self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        match result {
            Ok(n) => {
                let n = n.min(self.len) as usize;
                // SAFETY: the kernel initialised `n` bytes of the spare capacity it was given.
                unsafe { self.buf.set_len(self.buf.len() + n) };
                (Ok(n), self.buf)
            }
            Err(e) => (Err(e), self.buf),
        }
    }

    fn epoll_fd(&self) -> Option<&SharedFd> {
        Some(&self.fd)
    }

    fn attempt(&mut self) -> io::Result<u32> {
        let spare = self.buf.spare_capacity_mut();
        self.len = spare.len().min(u32::MAX as usize) as u32;
        // SAFETY: the kernel writes at most `len` bytes into the spare capacity, owned by
        // the op; the call is done when it returns.
        let rc = unsafe {
            libc::recv(
                self.fd.raw(),
                spare.as_mut_ptr().cast(),
                self.len as usize,
                libc::MSG_DONTWAIT,
            )
        };
        attempt_result(rc)
    }
}
