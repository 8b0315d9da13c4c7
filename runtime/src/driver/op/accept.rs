use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use io_uring::{opcode, squeue, types};

use super::{attempt_result, EpollKind, OpCode};
use crate::driver::epoll::Interest;
use crate::driver::fd::SharedFd;

/// accept(2) on a listening socket; the new socket is close-on-exec.
pub(crate) struct Accept {
    fd: SharedFd,
    addr: Box<(libc::sockaddr_storage, libc::socklen_t)>,
}

impl Accept {
    pub(crate) fn new(fd: SharedFd) -> Accept {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        let storage = unsafe { std::mem::zeroed::<libc::sockaddr_storage>() };
        let len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        Accept {
            fd,
            addr: Box::new((storage, len)),
        }
    }
}

// SAFETY: the address buffer is boxed and owned by the op; the listener is held by `fd`.
unsafe impl OpCode for Accept {
    type Output = io::Result<(OwnedFd, Option<SocketAddr>)>;
    const EPOLL: EpollKind = EpollKind::Ready(Interest::Read);

    fn sqe(&mut self) -> squeue::Entry {
        let (storage, len) = &mut *self.addr;
        opcode::Accept::new(
            types::Fd(self.fd.raw()),
            (storage as *mut libc::sockaddr_storage).cast(),
            len,
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> Self::Output {
        let fd = result? as RawFd;
        // SAFETY: a successful accept returns a new descriptor that nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let (storage, _len) = &*self.addr;
        Ok((fd, to_socket_addr(storage)))
    }

    fn release(result: i32, _flags: u32) {
        super::release_new_fd(result);
    }

    fn epoll_fd(&self) -> Option<&SharedFd> {
        Some(&self.fd)
    }

    fn attempt(&mut self) -> io::Result<u32> {
        // accept4 has no per-call non-blocking flag: the listener itself must be.
        self.fd.ensure_nonblocking()?;
        let (storage, len) = &mut *self.addr;
        *len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes of address into the boxed storage
        // and the length into `len`, both owned by the op; the call is done when it returns.
        let rc = unsafe {
            libc::accept4(
                self.fd.raw(),
                (storage as *mut libc::sockaddr_storage).cast(),
                len,
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        attempt_result(rc as isize)
    }
}

/// The peer address the kernel wrote, for the two families a TCP listener can accept.
pub(crate) fn to_socket_addr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    let ptr: *const libc::sockaddr_storage = storage;
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large
            // enough and aligned enough to contain.
            let a = unsafe { &*ptr.cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*ptr.cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(a.sin6_port))))
        }
        _ => None,
    }
}
