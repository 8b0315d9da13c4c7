//! Multishot operations: one SQE, many completions (receives into the buffer ring, accepts,
//! readiness polls, and a zero-copy send's result plus its notification). Completions queue
//! in the op's slot until its consumer takes them; each kind bounds its queue.

use std::any::Any;
use std::collections::VecDeque;
use std::io;
use std::task::Waker;

use io_uring::{cqueue, opcode, squeue, types};
use slab::Slab;

use super::buf_ring::{self, BufRing};
use super::slots::Slot;
use super::Uring;
use crate::driver::fd;

/// Connections a multishot accept may queue for its listener before the driver cancels it
/// (the consumer re-arms once it took them; meanwhile clients wait in the listen backlog).
pub(crate) const ACCEPT_QUEUE_LIMIT: usize = 64;

/// What a multishot op's completions carry, so the driver can release those nobody takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MultiKind {
    /// Received bytes in a buffer of the ring.
    Recv,
    /// A new connection's descriptor.
    Accept,
    /// A zero-copy send: its result, then the notification that the bytes are free.
    SendZc,
    /// Readiness of a descriptor: carries nothing, so completions that queue up merge into
    /// one (the queue holds at most one live wake-up and the final completion).
    Poll,
}

impl Uring {
    /// Arm a multishot receive on `fd` into the shard's buffer ring (the caller checked that
    /// there is one). Its completions come out of [`Uring::poll_multi`].
    pub(crate) fn submit_recv_multishot(&mut self, fd: &fd::SharedFd) -> usize {
        let sqe = if self.features.recv_bundle {
            fd::on_fd!(fd, t => opcode::RecvMultiBundle::new(t, buf_ring::BUF_GROUP).build())
        } else {
            fd::on_fd!(fd, t => opcode::RecvMulti::new(t, buf_ring::BUF_GROUP).build())
        };
        self.submit_multi(MultiKind::Recv, sqe, Box::new(fd.clone()))
    }

    /// Arm a multishot accept on listener `fd` (new sockets close-on-exec). Its connections
    /// come out of [`Uring::poll_accept_multishot`].
    pub(crate) fn submit_accept_multishot(&mut self, fd: &fd::SharedFd) -> usize {
        let sqe = opcode::AcceptMulti::new(types::Fd(fd.raw()))
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.submit_multi(MultiKind::Accept, sqe, Box::new(fd.clone()))
    }

    /// Arm a multishot poll for readability of `fd` (the caller checked
    /// `Features::poll_multishot` and keeps `fd` open while it is armed: the kernel holds its
    /// own reference to the file meanwhile). Its wake-ups come out of [`Uring::poll_multi`].
    pub(crate) fn submit_poll_multishot(&mut self, fd: std::os::fd::RawFd) -> usize {
        let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build();
        self.submit_multi(MultiKind::Poll, sqe, Box::new(()))
    }

    /// Submit a zero-copy send of `buf` on `fd`. The slot keeps `buf` and the descriptor's
    /// share until the kernel's notification that it no longer uses them.
    pub(crate) fn submit_send_zc(&mut self, fd: &fd::SharedFd, buf: bytes::Bytes) -> usize {
        let len = buf.len().min(u32::MAX as usize) as u32;
        let sqe = fd::on_fd!(fd, t => opcode::SendZc::new(t, buf.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build());
        self.submit_multi(MultiKind::SendZc, sqe, Box::new((fd.clone(), buf)))
    }

    /// The next connection (or error) of multishot accept `key`, and whether the accept is
    /// still armed (`false`: it ended, arm a new one).
    pub(crate) fn poll_accept_multishot(
        &mut self,
        key: usize,
        waker: &Waker,
    ) -> Option<(io::Result<std::os::fd::OwnedFd>, bool)> {
        debug_assert!(matches!(
            self.slots.get(key),
            Some(Slot::Multi {
                kind: MultiKind::Accept,
                ..
            })
        ));
        let (result, flags) = self.poll_multi(key, waker)?;
        let armed = cqueue::more(flags);
        if result < 0 {
            return Some((Err(io::Error::from_raw_os_error(-result)), armed));
        }
        // SAFETY: a non-negative completion of an accept is a new descriptor nobody owns yet;
        // the slot hands each completion out once.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(result) };
        Some((Ok(fd), armed))
    }

    /// Submit a multishot op; `keep` holds what the kernel may use until its final completion.
    fn submit_multi(&mut self, kind: MultiKind, sqe: squeue::Entry, keep: Box<dyn Any>) -> usize {
        let key = self.slots.insert(Slot::Multi {
            kind,
            cqes: VecDeque::new(),
            waker: None,
            finished: false,
            cancelling: false,
            keep,
        });
        self.deferred.push((key, sqe.user_data(key as u64)));
        key
    }

    /// The next completion of multishot op `key`, or `None` (the waker is kept). The slot
    /// goes with its final completion (no `IORING_CQE_F_MORE`).
    pub(crate) fn poll_multi(&mut self, key: usize, waker: &Waker) -> Option<(i32, u32)> {
        let Some(Slot::Multi {
            cqes,
            waker: w,
            finished,
            ..
        }) = self.slots.get_mut(key)
        else {
            return None;
        };
        match cqes.pop_front() {
            Some(cqe) => {
                if *finished && cqes.is_empty() {
                    self.slots.remove(key);
                }
                Some(cqe)
            }
            None => {
                match w {
                    Some(old) if old.will_wake(waker) => {}
                    _ => *w = Some(waker.clone()),
                }
                None
            }
        }
    }

    /// Whether multishot op `key` has a completion waiting to be taken.
    pub(crate) fn multi_has_queued(&self, key: usize) -> bool {
        matches!(self.slots.get(key), Some(Slot::Multi { cqes, .. }) if !cqes.is_empty())
    }

    /// The bytes the data completions queued for multishot op `key` carry (their positive
    /// results), so a consumer taking them all can size its buffer once.
    pub(crate) fn multi_queued_bytes(&self, key: usize) -> usize {
        match self.slots.get(key) {
            Some(Slot::Multi { cqes, .. }) => cqes
                .iter()
                .map(|&(res, _)| usize::try_from(res).unwrap_or(0))
                .sum(),
            _ => 0,
        }
    }

    /// The consumer of multishot op `key` went away: what its queued completions carry is
    /// released (buffers back to the ring, accepted sockets closed), and the op is cancelled
    /// unless it already ended.
    pub(crate) fn abandon_multi(&mut self, key: usize) {
        self.let_go_multi(key, true);
    }

    /// Like [`Uring::abandon_multi`], without cancelling: the op runs to its end (a
    /// zero-copy send waiting only for its notification).
    pub(crate) fn detach_multi(&mut self, key: usize) {
        self.let_go_multi(key, false);
    }

    fn let_go_multi(&mut self, key: usize, cancel: bool) {
        let Some(Slot::Multi {
            kind,
            cqes,
            finished,
            ..
        }) = self.slots.get_mut(key)
        else {
            return;
        };
        let (kind, finished) = (*kind, *finished);
        let queued = std::mem::take(cqes);
        for (result, flags) in queued {
            discard(kind, self.buf_ring.as_deref(), result, flags);
        }
        if finished {
            self.slots.remove(key);
            return;
        }
        if let Some(pos) = self.deferred.iter().position(|(k, _)| *k == key) {
            self.deferred.remove(pos);
            self.slots.remove(key);
            return;
        }
        let slot = &mut self.slots[key];
        let placeholder = Slot::MultiAbandoned {
            kind,
            keep: Box::new(()),
        };
        if let Slot::Multi { keep, .. } = std::mem::replace(slot, placeholder) {
            *slot = Slot::MultiAbandoned { kind, keep };
        }
        if cancel {
            self.cancel(key as u64);
        }
    }
}

/// A multishot op's completion: queue it for its consumer (waking it), or release what it
/// carries when the consumer is gone. Returns whether it was a bundle, and whether the op
/// must be cancelled (its queue reached its bound).
pub(super) fn complete(
    slots: &mut Slab<Slot>,
    ring: Option<&BufRing>,
    key: usize,
    result: i32,
    flags: u32,
) -> (bool, bool) {
    let mut bundled = false;
    let mut cancel = false;
    match slots.get_mut(key) {
        Some(Slot::Multi {
            kind,
            cqes,
            waker,
            finished,
            cancelling,
            ..
        }) => {
            let merged = *kind == MultiKind::Poll
                && cqueue::more(flags)
                && result >= 0
                && cqes
                    .back_mut()
                    .filter(|(r, f)| *r >= 0 && cqueue::more(*f))
                    .map(|last| last.0 |= result)
                    .is_some();
            if !merged {
                bundled = per_buffer(*kind, ring, result, flags, |r, f| cqes.push_back((r, f)));
            }
            if !cqueue::more(flags) {
                *finished = true;
            } else if *kind == MultiKind::Accept && cqes.len() >= ACCEPT_QUEUE_LIMIT && !*cancelling
            {
                *cancelling = true;
                cancel = true;
            }
            if let Some(w) = waker.take() {
                w.wake();
            }
        }
        Some(Slot::MultiAbandoned { kind, .. }) => {
            let kind = *kind;
            if !cqueue::more(flags) {
                slots.remove(key);
            }
            per_buffer(kind, ring, result, flags, |r, f| discard(kind, ring, r, f));
        }
        _ => {}
    }
    (bundled, cancel)
}

/// Hands `f` a receive completion one ring buffer at a time: a bundle's completion (more bytes
/// than one buffer holds) becomes one `(bytes, flags)` per buffer it filled, each naming its
/// buffer and, but for the last, flagged as more to come; every other completion goes as it
/// is. So consumers and the queue bound see one buffer per entry whatever the kernel did.
/// Returns whether the completion was a bundle.
fn per_buffer(
    kind: MultiKind,
    ring: Option<&BufRing>,
    result: i32,
    flags: u32,
    mut f: impl FnMut(i32, u32),
) -> bool {
    let (Some(ring), Some(first), Ok(len)) =
        (ring, cqueue::buffer_select(flags), u32::try_from(result))
    else {
        f(result, flags);
        return false;
    };
    if kind != MultiKind::Recv || len <= ring.size() {
        f(result, flags);
        return false;
    }
    let parts = len.div_ceil(ring.size());
    for (i, (bid, bytes)) in ring.bundle(first, len).enumerate() {
        let mut part = (flags & !(0xffff << CQE_BUFFER_SHIFT)) | u32::from(bid) << CQE_BUFFER_SHIFT;
        if (i as u32) + 1 < parts {
            part |= CQE_F_MORE;
        }
        f(bytes as i32, part);
    }
    true
}

/// `IORING_CQE_F_MORE` and `IORING_CQE_BUFFER_SHIFT` (include/uapi/linux/io_uring.h), for the
/// per-buffer entries `per_buffer` makes; io-uring only exposes readers of them.
const CQE_F_MORE: u32 = 1 << 1;
const CQE_BUFFER_SHIFT: u32 = 16;

/// Release what a multishot completion nobody consumes carries: a ring buffer goes back, an
/// accepted socket is closed.
pub(super) fn discard(kind: MultiKind, ring: Option<&BufRing>, result: i32, flags: u32) {
    match kind {
        MultiKind::Recv => {
            if let (Some(bid), Some(ring)) = (cqueue::buffer_select(flags), ring) {
                ring.took_and_returned(bid);
            }
        }
        MultiKind::Accept => crate::driver::op::release_new_fd(result),
        MultiKind::SendZc | MultiKind::Poll => {}
    }
}
