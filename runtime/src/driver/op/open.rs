use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use io_uring::{opcode, squeue, types};

use super::{errno_result, BlockingCall, EpollKind, OpCode, SendPtr};

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
    const EPOLL: EpollKind = EpollKind::Blocking;

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

    fn blocking(&mut self) -> BlockingCall {
        let path = SendPtr(self.path.as_ptr().cast_mut());
        let (flags, mode) = (self.flags, self.mode);
        Box::new(move || {
            let path = path;
            // SAFETY: the path is the op's heap CString, alive and unchanged until the call
            // returned (the driver keeps the op until then).
            let rc = unsafe { libc::openat(libc::AT_FDCWD, path.0, flags, mode) };
            errno_result(rc as isize)
        })
    }
}
