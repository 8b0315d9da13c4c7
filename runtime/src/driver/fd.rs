//! Owned descriptors shared with the operations in flight on them (monoio's `SharedFd`).
//!
//! Every I/O object (stream, listener, file) holds a [`SharedFd`]; every op it submits holds a
//! clone. The descriptor is closed only when the last holder drops — the object and every
//! op, including ops whose futures were dropped and whose data the driver keeps until their
//! completion — so the kernel never sees a closed (or reused) descriptor number on an op of
//! ours. On a shard the close itself goes through the ring (on epoll: the descriptor leaves
//! the epoll set first, then it is closed, at the driver's next submit).

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Poll, Waker};

use crate::driver::op::close::Close;
use crate::driver::op::Op;
use crate::shard::context;

struct Inner {
    /// `None` once the descriptor was taken by [`SharedFd::close`].
    fd: Cell<Option<OwnedFd>>,
    raw: RawFd,
    /// Its slot in the shard's registered file table, if it has one: ops name the slot.
    /// The slot holds its own reference to the file, released (through the ring) when the
    /// last holder goes, like the descriptor.
    slot: Option<u32>,
    /// A task in [`SharedFd::close`] waiting for the ops in flight to finish.
    closer: RefCell<Option<Waker>>,
    /// epoll: its registration in the shard's epoll set, once an op had to wait.
    epoll: Cell<Option<u64>>,
    /// epoll: O_NONBLOCK was set (listeners and connecting sockets need it; sends and
    /// receives pass MSG_DONTWAIT instead).
    nonblocking: Cell<bool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(token) = self.epoll.take() {
            // Out of the epoll set before the close (a duplicate of the descriptor elsewhere
            // would keep its registration alive), at the same flush.
            if context::try_current().is_some() {
                PENDING_DEREGISTER.with(|p| p.borrow_mut().push((self.raw, token)));
            }
        }
        if let Some(slot) = self.slot {
            // Off the shard (its context gone at teardown) the table went with the ring.
            if context::try_current().is_some() {
                PENDING_SLOT_CLOSE.with(|p| p.borrow_mut().push(slot));
            }
        }
        if let Some(fd) = self.fd.take() {
            close_later(fd);
        }
    }
}

/// What an SQE names the descriptor by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Fd(RawFd),
    /// A slot of the shard's registered file table (`IOSQE_FIXED_FILE`).
    Fixed(u32),
}

/// Build an SQE naming `$fd` (a [`SharedFd`]) by its registered slot if it has one, else by
/// its descriptor: `on_fd!(fd, t => opcode::Send::new(t, ..).build())`.
macro_rules! on_fd {
    ($fd:expr, $t:ident => $build:expr) => {
        match $fd.target() {
            $crate::driver::fd::Target::Fd(raw) => {
                let $t = io_uring::types::Fd(raw);
                $build
            }
            $crate::driver::fd::Target::Fixed(slot) => {
                let $t = io_uring::types::Fixed(slot);
                $build
            }
        }
    };
}
pub(crate) use on_fd;

/// A descriptor owned jointly by an I/O object and its in-flight ops. `!Send`: its last
/// holder closes it through the ring of the shard that owns it.
#[derive(Clone)]
pub(crate) struct SharedFd(Rc<Inner>);

impl SharedFd {
    pub(crate) fn new(fd: OwnedFd) -> SharedFd {
        let raw = fd.as_raw_fd();
        SharedFd(Rc::new(Inner {
            fd: Cell::new(Some(fd)),
            raw,
            slot: None,
            closer: RefCell::new(None),
            epoll: Cell::new(None),
            nonblocking: Cell::new(false),
        }))
    }

    /// epoll: the descriptor's registration, if it has one.
    #[inline]
    pub(crate) fn epoll_token(&self) -> Option<u64> {
        self.0.epoll.get()
    }

    pub(crate) fn set_epoll_token(&self, token: Option<u64>) {
        self.0.epoll.set(token);
    }

    /// epoll: put the descriptor in non-blocking mode (once).
    pub(crate) fn ensure_nonblocking(&self) -> io::Result<()> {
        if !self.0.nonblocking.get() {
            socket2::SockRef::from(self).set_nonblocking(true)?;
            self.0.nonblocking.set(true);
        }
        Ok(())
    }

    /// A stream's descriptor: put into a slot of the shard's registered file table while
    /// one is free (counted in `fds_registered` / `fds_not_registered`), else plain. Off a
    /// shard, or with no table (`RuntimeBuilder::registered_fds` 0, an old kernel,
    /// `COREWIRE_IO_URING=plain`), plain and not counted.
    pub(crate) fn for_stream(fd: OwnedFd) -> SharedFd {
        let raw = fd.as_raw_fd();
        let slot = context::try_current().and_then(|ctx| {
            let mut driver = ctx.driver.borrow_mut();
            let driver = driver.uring()?;
            if !driver.has_fixed_table() {
                return None;
            }
            let slot = driver.register_fd(raw);
            let stats = &ctx.remote.stats;
            match slot {
                Some(_) => stats.fds_registered.incr(),
                None => stats.fds_not_registered.incr(),
            }
            slot
        });
        SharedFd(Rc::new(Inner {
            fd: Cell::new(Some(fd)),
            raw,
            slot,
            closer: RefCell::new(None),
            epoll: Cell::new(None),
            nonblocking: Cell::new(false),
        }))
    }

    /// What SQEs on this descriptor name: its registered slot, or the descriptor.
    pub(crate) fn target(&self) -> Target {
        match self.0.slot {
            Some(slot) => Target::Fixed(slot),
            None => Target::Fd(self.0.raw),
        }
    }

    /// The descriptor number, for an SQE or a socket option call. Valid as long as `self`.
    pub(crate) fn raw(&self) -> RawFd {
        self.0.raw
    }

    /// Close through the ring once every op in flight on the descriptor has completed, and
    /// report the close's own error.
    pub(crate) async fn close(self) -> io::Result<()> {
        poll_fn(|cx| {
            if Rc::strong_count(&self.0) == 1 {
                Poll::Ready(())
            } else {
                *self.0.closer.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
        if let Some(token) = self.0.epoll.take() {
            // Out of the epoll set while the number is still ours.
            let _ = context::try_with_driver(|d| {
                if let Some(e) = d.epoll() {
                    e.deregister(self.0.raw, token);
                }
            });
        }
        match self.0.fd.take() {
            Some(fd) => Op::submit(Close::new(fd)).await,
            None => Ok(()),
        }
    }
}

impl Drop for SharedFd {
    fn drop(&mut self) {
        // After this drop one holder is left: if it is waiting in `close`, let it go on.
        if Rc::strong_count(&self.0) == 2 {
            if let Some(w) = self.0.closer.borrow_mut().take() {
                w.wake();
            }
        }
    }
}

thread_local! {
    /// Descriptors whose last holder dropped on this shard thread, waiting for the driver to
    /// close them through the ring at its next submit. A list rather than a direct call:
    /// the last holder often drops inside the driver itself (an abandoned op's data).
    static PENDING_CLOSE: RefCell<Vec<RawFd>> = const { RefCell::new(Vec::new()) };
    /// epoll registrations of descriptors whose last holder dropped: (descriptor, token),
    /// undone before the descriptors in `PENDING_CLOSE` are closed.
    static PENDING_DEREGISTER: RefCell<Vec<(RawFd, u64)>> = const { RefCell::new(Vec::new()) };
    /// Registered slots whose last holder dropped, for the same reason.
    static PENDING_SLOT_CLOSE: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// The epoll registrations to undo before the pending closes (see [`take_pending_closes`]).
pub(crate) fn take_pending_deregistrations(out: &mut Vec<(RawFd, u64)>) {
    let _ = PENDING_DEREGISTER.try_with(|p| out.append(&mut p.borrow_mut()));
}

pub(crate) fn has_pending_deregistrations() -> bool {
    PENDING_DEREGISTER
        .try_with(|p| !p.borrow().is_empty())
        .unwrap_or(false)
}

/// The epoll set is gone (shutdown): nothing to undo.
pub(crate) fn forget_pending_deregistrations() {
    let _ = PENDING_DEREGISTER.try_with(|p| p.borrow_mut().clear());
}

/// The slots queued for a close through the ring (the driver frees each at its completion).
pub(crate) fn take_pending_slot_closes() -> Vec<u32> {
    PENDING_SLOT_CLOSE
        .try_with(|p| std::mem::take(&mut *p.borrow_mut()))
        .unwrap_or_default()
}

pub(crate) fn has_pending_slot_closes() -> bool {
    PENDING_SLOT_CLOSE
        .try_with(|p| !p.borrow().is_empty())
        .unwrap_or(false)
}

/// Close `fd` through the ring of the current shard, or at once off a shard.
pub(crate) fn close_later(fd: OwnedFd) {
    if context::try_current().is_some() {
        let raw = fd.into_raw_fd();
        PENDING_CLOSE.with(|p| p.borrow_mut().push(raw));
    } else {
        drop(fd);
    }
}

/// The descriptors queued by [`close_later`] (the driver turns them into close SQEs).
pub(crate) fn take_pending_closes(out: &mut Vec<RawFd>) {
    let _ = PENDING_CLOSE.try_with(|p| out.append(&mut p.borrow_mut()));
}

pub(crate) fn has_pending_closes() -> bool {
    PENDING_CLOSE
        .try_with(|p| !p.borrow().is_empty())
        .unwrap_or(false)
}

impl std::os::fd::AsFd for SharedFd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while any SharedFd exists (only the last holder
        // closes it, and `close` consumes that last holder), so it outlives the borrow.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.0.raw) }
    }
}
