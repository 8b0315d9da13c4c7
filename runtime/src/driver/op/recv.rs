use std::io;
use std::os::fd::RawFd;

use bytes::BytesMut;
use io_uring::{opcode, squeue, types};

use super::OpData;

/// recv(2) into the spare capacity of a `BytesMut`; the bytes received are appended.
pub struct Recv {
    fd: RawFd,
    buf: BytesMut,
}

impl Recv {
    /// `buf` must have spare capacity; the op reads at most that many bytes.
    pub fn new(fd: RawFd, buf: BytesMut) -> Recv {
        Recv { fd, buf }
    }
}

impl OpData for Recv {
    type Output = (io::Result<usize>, BytesMut);

    fn sqe(&mut self) -> squeue::Entry {
        let spare = self.buf.spare_capacity_mut();
        let len = spare.len().min(u32::MAX as usize) as u32;
        opcode::Recv::new(types::Fd(self.fd), spare.as_mut_ptr().cast(), len).build()
    }

    fn complete(mut self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        match result {
            Ok(n) => {
                let n = n as usize;
                // SAFETY: the kernel initialised `n` bytes of the spare capacity it was given.
                unsafe { self.buf.set_len(self.buf.len() + n) };
                (Ok(n), self.buf)
            }
            Err(e) => (Err(e), self.buf),
        }
    }
}
