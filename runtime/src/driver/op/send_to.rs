use std::io;

use bytes::Bytes;
use io_uring::{opcode, squeue, types};
use socket2::SockAddr;

use super::{attempt_result, EpollKind, OpCode};
use crate::driver::epoll::Interest;
use crate::driver::fd::SharedFd;

/// sendmsg(2) of one buffer to `to` (or to the connected peer when `None`), as one datagram.
pub(crate) struct SendTo {
    fd: SharedFd,
    buf: Bytes,
    to: Option<SockAddr>,
    iov: libc::iovec,
    msg: libc::msghdr,
}

impl SendTo {
    pub(crate) fn new(fd: SharedFd, buf: Bytes, to: Option<SockAddr>) -> SendTo {
        SendTo {
            fd,
            buf,
            to,
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
            msg: unsafe { std::mem::zeroed() },
        }
    }
}

// SAFETY: the kernel only reads `buf` (heap bytes the op keeps alive, never mutated), the
// address in `to` and the `msg`/`iov` fields, all owned by the boxed op whose address is final
// when `sqe` runs and which the driver keeps alive until the completion. The socket is held
// by `fd`.
unsafe impl OpCode for SendTo {
    type Output = (io::Result<usize>, Bytes);
    const EPOLL: EpollKind = EpollKind::Ready(Interest::Write);

    fn sqe(&mut self) -> squeue::Entry {
        self.prepare();
        opcode::SendMsg::new(types::Fd(self.fd.raw()), &self.msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build()
    }

    fn epoll_fd(&self) -> Option<&SharedFd> {
        Some(&self.fd)
    }

    fn attempt(&mut self) -> io::Result<u32> {
        self.prepare();
        // SAFETY: as for the SQE: the kernel reads the bytes, the address and the header,
        // all owned by the op, during the call.
        let rc = unsafe {
            libc::sendmsg(
                self.fd.raw(),
                &self.msg,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        attempt_result(rc)
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.buf)
    }
}

impl SendTo {
    /// Point the header at the bytes and the address, where they are now.
    fn prepare(&mut self) {
        self.iov = libc::iovec {
            iov_base: self.buf.as_ptr() as *mut libc::c_void,
            iov_len: self.buf.len(),
        };
        if let Some(to) = &self.to {
            self.msg.msg_name = to.as_ptr() as *mut libc::c_void;
            self.msg.msg_namelen = to.len();
        }
        self.msg.msg_iov = &mut self.iov;
        self.msg.msg_iovlen = 1;
    }
}
