use std::ffi::CString;
use std::io;

use io_uring::{opcode, squeue, types};

use super::{EpollKind, OpCode};

/// mkdirat(2) relative to the working directory.
pub(crate) struct MkDirAt {
    path: CString,
    mode: libc::mode_t,
}

impl MkDirAt {
    pub(crate) fn new(path: CString, mode: libc::mode_t) -> MkDirAt {
        MkDirAt { path, mode }
    }
}

// SAFETY: the kernel only reads the path, a heap CString owned by the op.
unsafe impl OpCode for MkDirAt {
    type Output = io::Result<()>;
    // Files and foreign descriptors take other ways on epoll (the fs fallbacks, io::wait_readable).
    const EPOLL: EpollKind = EpollKind::Unsupported;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::MkDirAt::new(types::Fd(libc::AT_FDCWD), self.path.as_ptr())
            .mode(self.mode)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
