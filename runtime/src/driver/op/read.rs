use std::io;

use bytes::BytesMut;
use io_uring::{opcode, squeue, types};

use super::{errno_result, BlockingCall, EpollKind, OpCode, SendPtr};
use crate::driver::fd::SharedFd;

/// pread(2) into the spare capacity of a `BytesMut` at `offset`.
pub(crate) struct Read {
    fd: SharedFd,
    buf: BytesMut,
    offset: u64,
    /// Bytes the kernel was told it may write.
    len: u32,
}

impl Read {
    pub(crate) fn new(fd: SharedFd, buf: BytesMut, offset: u64) -> Read {
        Read {
            fd,
            buf,
            offset,
            len: 0,
        }
    }
}

// SAFETY: the kernel writes only into `buf`'s spare capacity, a heap allocation owned by the
// op that nothing else references; the file is held by `fd`.
unsafe impl OpCode for Read {
    type Output = (io::Result<usize>, BytesMut);
    const EPOLL: EpollKind = EpollKind::Blocking;

    fn sqe(&mut self) -> squeue::Entry {
        let spare = self.buf.spare_capacity_mut();
        self.len = spare.len().min(u32::MAX as usize) as u32;
        opcode::Read::new(
            types::Fd(self.fd.raw()),
            spare.as_mut_ptr().cast(),
            self.len,
        )
        .offset(self.offset)
        .build()
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

    fn blocking(&mut self) -> BlockingCall {
        let spare = self.buf.spare_capacity_mut();
        self.len = spare.len().min(u32::MAX as usize) as u32;
        let (fd, ptr, len, offset) = (
            self.fd.raw(),
            SendPtr(spare.as_mut_ptr().cast::<u8>()),
            self.len as usize,
            self.offset as libc::off_t,
        );
        Box::new(move || {
            let ptr = ptr;
            // SAFETY: the helper writes only into the buffer's spare capacity (a heap
            // allocation of the op that nothing else touches until the call returned).
            let rc = unsafe { libc::pread(fd, ptr.0.cast(), len, offset) };
            errno_result(rc)
        })
    }
}
