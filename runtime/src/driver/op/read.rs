use std::io;

use bytes::BytesMut;
use io_uring::{opcode, squeue, types};

use super::OpCode;
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
}
