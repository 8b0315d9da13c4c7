use std::io;

use bytes::BytesMut;
use io_uring::{opcode, squeue, types};
use socket2::{SockAddr, SockAddrStorage};

use super::{attempt_result, EpollKind, OpCode};
use crate::driver::epoll::Interest;
use crate::driver::fd::SharedFd;

/// One datagram received by recvmsg(2) into the spare capacity of a `BytesMut`, with the
/// sender's address. `MSG_TRUNC` is passed so the result is the datagram's real length: a
/// datagram longer than the buffer is reported as truncated, never silently cut.
pub(crate) struct RecvFrom {
    fd: SharedFd,
    buf: BytesMut,
    len: u32,
    addr: SockAddrStorage,
    iov: libc::iovec,
    msg: libc::msghdr,
}

/// What one receive brought.
pub(crate) struct Received {
    /// Bytes appended to the buffer.
    pub len: usize,
    /// The datagram was longer than the room in the buffer; the rest was discarded.
    pub truncated: bool,
    /// The sender (unnamed for an unbound Unix socket).
    pub from: SockAddr,
}

impl RecvFrom {
    /// `buf` must have spare capacity; the datagram lands there.
    pub(crate) fn new(fd: SharedFd, buf: BytesMut) -> RecvFrom {
        RecvFrom {
            fd,
            buf,
            len: 0,
            addr: SockAddrStorage::zeroed(),
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
            msg: unsafe { std::mem::zeroed() },
        }
    }

    /// Point the header at the buffer's spare capacity and the address storage (their
    /// final addresses: the boxed op's for the SQE, the op's own for an attempt).
    fn prepare(&mut self) {
        let spare = self.buf.spare_capacity_mut();
        self.len = spare.len().min(u32::MAX as usize) as u32;
        self.iov = libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: self.len as usize,
        };
        self.msg.msg_name = (&mut self.addr as *mut SockAddrStorage).cast();
        self.msg.msg_namelen = self.addr.size_of();
        self.msg.msg_iov = &mut self.iov;
        self.msg.msg_iovlen = 1;
    }
}

// SAFETY: the kernel writes the datagram into `buf`'s spare capacity (a heap allocation the
// op owns), the address into `addr`, and reads/writes `msg` and `iov`; all three are fields
// of the boxed op, whose address is final when `sqe` runs and which the driver keeps alive
// until the completion. The socket is held by `fd`.
unsafe impl OpCode for RecvFrom {
    type Output = (io::Result<Received>, BytesMut);
    const EPOLL: EpollKind = EpollKind::Ready(Interest::Read);

    fn sqe(&mut self) -> squeue::Entry {
        self.prepare();
        opcode::RecvMsg::new(types::Fd(self.fd.raw()), &mut self.msg)
            .flags(libc::MSG_TRUNC as u32)
            .build()
    }

    fn epoll_fd(&self) -> Option<&SharedFd> {
        Some(&self.fd)
    }

    fn attempt(&mut self) -> io::Result<u32> {
        self.prepare();
        // SAFETY: as for the SQE: the kernel writes the datagram, the address and the
        // header fields into memory the op owns, during the call.
        let rc = unsafe {
            libc::recvmsg(
                self.fd.raw(),
                &mut self.msg,
                libc::MSG_TRUNC | libc::MSG_DONTWAIT,
            )
        };
        attempt_result(rc)
    }

    fn complete(mut self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        match result {
            Ok(full) => {
                let len = full.min(self.len) as usize;
                // SAFETY: the kernel initialised `len` bytes of the spare capacity it was
                // given (it copies at most the iovec's length).
                unsafe { self.buf.set_len(self.buf.len() + len) };
                let namelen = self.msg.msg_namelen.min(self.addr.size_of());
                let storage = std::mem::replace(&mut self.addr, SockAddrStorage::zeroed());
                // SAFETY: the kernel wrote an address of its family and `namelen` bytes into
                // the storage (capped at its size).
                let from = unsafe { SockAddr::new(storage, namelen) };
                let received = Received {
                    len,
                    truncated: full > self.len || self.msg.msg_flags & libc::MSG_TRUNC != 0,
                    from,
                };
                (Ok(received), self.buf)
            }
            Err(e) => (Err(e), self.buf),
        }
    }
}
