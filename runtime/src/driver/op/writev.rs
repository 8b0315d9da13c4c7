use std::io;

use bytes::Bytes;
use io_uring::{opcode, squeue};

use super::OpCode;
use crate::driver::fd::{on_fd, SharedFd};

/// sendmsg(2) of several buffers at once (a frame header, its payload and its attachment go
/// out in one syscall without being copied together).
pub(crate) struct Writev {
    fd: SharedFd,
    bufs: Vec<Bytes>,
    iovecs: Vec<libc::iovec>,
    msg: Box<libc::msghdr>,
}

impl Writev {
    pub(crate) fn new(fd: SharedFd, bufs: Vec<Bytes>) -> Writev {
        let iovecs = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: msghdr is plain old data; all-zero is a valid value.
        let msg = Box::new(unsafe { std::mem::zeroed::<libc::msghdr>() });
        Writev {
            fd,
            bufs,
            iovecs,
            msg,
        }
    }
}

// SAFETY: the msghdr and the iovec array are heap allocations owned by the op, and each iovec
// points at the heap bytes of a `Bytes` in `bufs`, which the op keeps alive and which the
// kernel only reads; the socket is held by `fd`.
unsafe impl OpCode for Writev {
    type Output = (io::Result<usize>, Vec<Bytes>);

    fn sqe(&mut self) -> squeue::Entry {
        self.msg.msg_iov = self.iovecs.as_mut_ptr();
        self.msg.msg_iovlen = self.iovecs.len() as _;
        let msg: *const libc::msghdr = &*self.msg;
        on_fd!(self.fd, t => opcode::SendMsg::new(t, msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build())
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.bufs)
    }
}
