use std::ffi::CString;
use std::io;

use io_uring::{opcode, squeue, types};

use super::{EpollKind, OpCode};
use crate::driver::fd::SharedFd;

/// statx(2) of a path (relative to the working directory), or of an open file (`fd` with an
/// empty path and AT_EMPTY_PATH).
pub(crate) struct Statx {
    fd: Option<SharedFd>,
    path: CString,
    flags: i32,
    buf: Box<libc::statx>,
}

impl Statx {
    /// `follow`: report on a symlink's target rather than the link.
    pub(crate) fn path(path: CString, follow: bool) -> Statx {
        let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
        Statx::new(None, path, flags)
    }

    pub(crate) fn file(fd: SharedFd) -> Statx {
        Statx::new(Some(fd), CString::default(), libc::AT_EMPTY_PATH)
    }

    fn new(fd: Option<SharedFd>, path: CString, flags: i32) -> Statx {
        Statx {
            fd,
            path,
            flags: flags | libc::AT_STATX_SYNC_AS_STAT,
            // SAFETY: statx is plain old data; all-zero is a valid value.
            buf: Box::new(unsafe { std::mem::zeroed() }),
        }
    }
}

// SAFETY: the kernel reads the path (a heap CString owned by the op) and writes only into the
// boxed statx buffer, which nothing else references while the op is in flight; the file, if
// any, is held by `fd`.
unsafe impl OpCode for Statx {
    type Output = io::Result<libc::statx>;
    // Files and foreign descriptors take other ways on epoll (the fs fallbacks, io::wait_readable).
    const EPOLL: EpollKind = EpollKind::Unsupported;

    fn sqe(&mut self) -> squeue::Entry {
        let dirfd = self.fd.as_ref().map_or(libc::AT_FDCWD, SharedFd::raw);
        let buf: *mut libc::statx = &mut *self.buf;
        opcode::Statx::new(types::Fd(dirfd), self.path.as_ptr(), buf.cast())
            .flags(self.flags)
            .mask(libc::STATX_BASIC_STATS | libc::STATX_BTIME)
            .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        result.map(|_| *self.buf)
    }
}
