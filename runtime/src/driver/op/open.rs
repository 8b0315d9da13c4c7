use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use io_uring::{opcode, squeue, types};

use super::OpCode;

/// openat(2) relative to the working directory; the new descriptor is close-on-exec.
pub(crate) struct Open {
    path: CString,
    flags: i32,
    mode: u32,
}

impl Open {
    pub(crate) fn new(path: CString, flags: i32, mode: u32) -> Open {
        Open {
            path,
            flags: flags | libc::O_CLOEXEC,
            mode,
        }
    }
}

// SAFETY: the path is a heap CString owned by the op (its buffer does not move with it).
unsafe impl OpCode for Open {
    type Output = io::Result<OwnedFd>;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), self.path.as_ptr())
            .flags(self.flags)
            .mode(self.mode)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<OwnedFd> {
        let fd = result? as i32;
        // SAFETY: a successful openat returns a new descriptor that nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn release(result: i32, _flags: u32) {
        super::release_new_fd(result);
    }
}
