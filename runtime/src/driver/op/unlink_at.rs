use std::ffi::CString;
use std::io;

use io_uring::{opcode, squeue, types};

use super::{EpollKind, OpCode};

/// unlinkat(2) relative to the working directory: a file, or an empty directory.
pub(crate) struct UnlinkAt {
    path: CString,
    flags: i32,
}

impl UnlinkAt {
    pub(crate) fn file(path: CString) -> UnlinkAt {
        UnlinkAt { path, flags: 0 }
    }

    pub(crate) fn dir(path: CString) -> UnlinkAt {
        UnlinkAt {
            path,
            flags: libc::AT_REMOVEDIR,
        }
    }
}

// SAFETY: the kernel only reads the path, a heap CString owned by the op.
unsafe impl OpCode for UnlinkAt {
    type Output = io::Result<()>;
    // Files and foreign descriptors take other ways on epoll (the fs fallbacks, io::wait_readable).
    const EPOLL: EpollKind = EpollKind::Unsupported;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), self.path.as_ptr())
            .flags(self.flags)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        result.map(|_| ())
    }
}
