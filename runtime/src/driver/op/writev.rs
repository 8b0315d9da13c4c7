use std::io;

use bytes::Bytes;
use io_uring::{opcode, squeue};

use super::{attempt_result, EpollKind, OpCode};
use crate::driver::epoll::Interest;
use crate::driver::fd::{on_fd, SharedFd};

/// Batches up to this many buffers keep their iovecs inside the op (a connection's batch of
/// replies is usually a handful of buffers); larger ones take a `Vec`. With the `msghdr` also
/// inside, a vectored send costs the op's own box and nothing more (it cost three allocations).
const INLINE_IOVECS: usize = 8;

/// sendmsg(2) of several buffers at once (a frame header, its payload and its attachment go
/// out in one syscall without being copied together).
pub(crate) struct Writev {
    fd: SharedFd,
    bufs: Vec<Bytes>,
    iovecs: Iovecs,
    msg: libc::msghdr,
}

enum Iovecs {
    Inline([libc::iovec; INLINE_IOVECS]),
    Heap(Vec<libc::iovec>),
}

fn iovec(b: &Bytes) -> libc::iovec {
    libc::iovec {
        iov_base: b.as_ptr() as *mut libc::c_void,
        iov_len: b.len(),
    }
}

impl Writev {
    pub(crate) fn new(fd: SharedFd, bufs: Vec<Bytes>) -> Writev {
        let iovecs = if bufs.len() <= INLINE_IOVECS {
            let mut inline = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; INLINE_IOVECS];
            for (slot, b) in inline.iter_mut().zip(&bufs) {
                *slot = iovec(b);
            }
            Iovecs::Inline(inline)
        } else {
            Iovecs::Heap(bufs.iter().map(iovec).collect())
        };
        Writev {
            fd,
            bufs,
            iovecs,
            // SAFETY: msghdr is plain old data; all-zero is a valid value.
            msg: unsafe { std::mem::zeroed::<libc::msghdr>() },
        }
    }
}

// SAFETY: the msghdr and the iovecs are inside `self`, which the driver keeps boxed at one
// address until the completion (see `OpCode`), or in a `Vec` the op owns; each iovec points at
// the heap bytes of a `Bytes` in `bufs`, which the op keeps alive and which the kernel only
// reads; the socket is held by `fd`.
unsafe impl OpCode for Writev {
    type Output = (io::Result<usize>, Vec<Bytes>);

    const EPOLL: EpollKind = EpollKind::Ready(Interest::Write);

    fn sqe(&mut self) -> squeue::Entry {
        self.prepare();
        let msg: *const libc::msghdr = &self.msg;
        on_fd!(self.fd, t => opcode::SendMsg::new(t, msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build())
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        (result.map(|n| n as usize), self.bufs)
    }

    fn epoll_fd(&self) -> Option<&SharedFd> {
        Some(&self.fd)
    }

    fn attempt(&mut self) -> io::Result<u32> {
        self.prepare();
        // SAFETY: as for the SQE: the kernel reads the header, the iovecs and the bytes they
        // point at, all owned by the op, during the call.
        let rc = unsafe {
            libc::sendmsg(
                self.fd.raw(),
                &self.msg,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        attempt_result(rc)
    }
}

impl Writev {
    /// Point the header at the iovecs, where they are now.
    fn prepare(&mut self) {
        let iovecs: &mut [libc::iovec] = match &mut self.iovecs {
            Iovecs::Inline(inline) => &mut inline[..self.bufs.len()],
            Iovecs::Heap(heap) => heap,
        };
        self.msg.msg_iov = iovecs.as_mut_ptr();
        self.msg.msg_iovlen = iovecs.len() as _;
    }
}
