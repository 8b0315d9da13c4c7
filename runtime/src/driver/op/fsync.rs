use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::OpData;

/// fsync(2), or fdatasync(2) when `data_only`.
pub struct Fsync {
    fd: RawFd,
    data_only: bool,
}

impl Fsync {
    pub fn new(fd: RawFd, data_only: bool) -> Fsync {
        Fsync { fd, data_only }
    }
}

impl OpData for Fsync {
    type Output = io::Result<()>;

    fn sqe(&mut self) -> squeue::Entry {
        let mut op = opcode::Fsync::new(types::Fd(self.fd));
        if self.data_only {
            op = op.flags(types::FsyncFlags::DATASYNC);
        }
        op.build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
