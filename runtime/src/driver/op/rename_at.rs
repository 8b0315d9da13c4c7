use std::ffi::CString;
use std::io;

use io_uring::{opcode, squeue, types};

use super::{EpollKind, OpCode};

/// renameat(2) relative to the working directory (replacing `to` if it exists, atomically).
pub(crate) struct RenameAt {
    from: CString,
    to: CString,
}

impl RenameAt {
    pub(crate) fn new(from: CString, to: CString) -> RenameAt {
        RenameAt { from, to }
    }
}

// SAFETY: the kernel only reads the two paths, heap CStrings owned by the op.
unsafe impl OpCode for RenameAt {
    type Output = io::Result<()>;
    // Files and foreign descriptors take other ways on epoll (the fs fallbacks, io::wait_readable).
    const EPOLL: EpollKind = EpollKind::Unsupported;

    fn sqe(&mut self) -> squeue::Entry {
        let cwd = types::Fd(libc::AT_FDCWD);
        opcode::RenameAt::new(cwd, self.from.as_ptr(), cwd, self.to.as_ptr()).build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
