//! File-descriptor helpers.

use std::os::fd::RawFd;

use crate::error::{Result, VerbsError};

/// Sets O_NONBLOCK, so readiness-driven loops never block in `ibv_get_cq_event` or
/// `rdma_get_cm_event`.
pub(crate) fn set_nonblocking(fd: RawFd) -> Result<()> {
    // SAFETY: fcntl on an fd we own; F_GETFL/F_SETFL touch only its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(VerbsError::last("fcntl(F_GETFL)"));
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(VerbsError::last("fcntl(F_SETFL)"));
    }
    Ok(())
}
