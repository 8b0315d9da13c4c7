//! The shard's io_uring driver: one ring per shard, owned by the shard thread.
//!
//! Operations are futures ([`op::Op`]) that own their buffers. The driver keeps a slot per
//! in-flight operation, keyed by the SQE's `user_data`; a completion wakes the slot's waker.
//! An operation dropped before its completion is cancelled, and its buffers move into the slot
//! so the kernel never writes into freed memory.
//!
//! All of the crate's `unsafe` that talks to the ring lives under this module.
#![allow(unsafe_code)] // the ring: SQEs carry pointers the kernel dereferences

pub(crate) mod buf_ring;
pub(crate) mod fd;
pub(crate) mod features;
pub(crate) mod op;

use std::any::Any;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::Waker;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use slab::Slab;

use buf_ring::{BufRing, RecvBuffers};
pub use features::Features;

/// `user_data` of the cancel requests the driver issues itself; their completions are ignored.
const CANCEL_TOKEN: u64 = u64::MAX;
/// `user_data` of the read that waits on the shard's wake-up eventfd.
const WAKE_TOKEN: u64 = u64::MAX - 1;
/// `user_data` of the closes the driver issues for dropped descriptors.
const CLOSE_TOKEN: u64 = u64::MAX - 2;
/// `user_data` of the wake-ups other shards post into this ring with MSG_RING.
const MSG_WAKE_TOKEN: u64 = u64::MAX - 3;
/// `user_data` of the closes of registered file slots, plus the slot: the slot is free again
/// at the completion (not before: a slot reused before its close ran would lose its new
/// file). Below `MSG_SENT_BASE`; slot keys never come near either.
const FIXED_CLOSE_BASE: u64 = 1 << 61;
/// `user_data` of the MSG_RING wake-ups this ring sends, plus the target shard's id: only a
/// failure posts a completion (SKIP_SUCCESS), and the target is then woken by its eventfd.
/// Slot keys (a slab's indices) never come near it.
const MSG_SENT_BASE: u64 = 1 << 62;

/// Connections a multishot accept may queue for its listener before the driver cancels it
/// (the consumer re-arms once it took them; meanwhile clients wait in the listen backlog).
pub(crate) const ACCEPT_QUEUE_LIMIT: usize = 64;

pub(crate) enum Slot {
    /// Submitted; the waker of the task awaiting it, if it was polled.
    Pending(Option<Waker>),
    /// Completed before the future looked again.
    Completed { result: i32, flags: u32 },
    /// The future was dropped; the data the kernel may still touch lives here until the CQE,
    /// and `release` frees whatever resource that completion carries (an accepted socket).
    Abandoned {
        #[allow(dead_code)]
        data: Box<dyn Any>,
        release: fn(i32, u32),
    },
    /// A multishot op: its completions in arrival order until the consumer takes them. The
    /// queue is bounded by the op itself: each data completion holds one buffer of the ring.
    Multi {
        kind: MultiKind,
        cqes: VecDeque<(i32, u32)>,
        waker: Option<Waker>,
        /// The final completion (no `IORING_CQE_F_MORE`) is in `cqes`.
        finished: bool,
        /// The driver cancelled it because its queue reached its bound.
        cancelling: bool,
        /// What the kernel may use until the final completion (the descriptor's share).
        #[allow(dead_code)]
        keep: Box<dyn Any>,
    },
    /// A multishot op whose consumer went away: cancelled; buffers its completions carry go
    /// straight back to the ring, and the slot goes at the final completion.
    MultiAbandoned {
        kind: MultiKind,
        #[allow(dead_code)]
        keep: Box<dyn Any>,
    },
}

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

impl Slot {
    /// The kernel will post nothing more for this slot.
    fn is_settled(&self) -> bool {
        match self {
            Slot::Completed { .. } => true,
            Slot::Multi { finished, .. } => *finished,
            _ => false,
        }
    }
}

/// What one reap pass did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reaped {
    pub completions: usize,
    pub woke_by_eventfd: bool,
    pub woke_by_msg_ring: bool,
}

pub(crate) struct Driver {
    ring: IoUring,
    slots: Slab<Slot>,
    pub(crate) features: Features,
    /// Owned by the shard's [`crate::shard::ShardRemote`], which outlives the driver.
    wake_fd: RawFd,
    /// Where the kernel writes the eventfd counter. Boxed so its address is stable.
    wake_buf: Box<u64>,
    wake_armed: bool,
    /// Ops submitted since the last flush; their SQEs reach the ring only at the flush, so
    /// one abandoned before it never reaches the kernel.
    deferred: Vec<(usize, squeue::Entry)>,
    /// Scratch list for the descriptors [`fd::close_later`] queued.
    closing: Vec<RawFd>,
    /// The shard's provided-buffer ring, when the kernel has multishot receive.
    buf_ring: Option<Rc<BufRing>>,
    /// Free slots of the registered file table, when there is one.
    fixed: Option<Vec<u32>>,
    /// Shards whose MSG_RING wake-up failed: the run loop wakes them by their eventfd.
    pub(crate) msg_ring_failed: Vec<usize>,
    /// Sends of at least this many bytes go zero-copy (`None`: never, or no SEND_ZC).
    pub(crate) send_zc_threshold: Option<usize>,
    /// Ops were leaked at shutdown: the kernel may still own memory, the buffer ring's too.
    leaked: bool,
    /// Receive completions that filled more than one ring buffer (bundles), since start.
    pub(crate) recv_bundles: u64,
    /// Test hook: make the next parks fail with this errno.
    #[cfg(test)]
    fail_park: Option<i32>,
}

impl Driver {
    pub(crate) fn new(
        entries: u32,
        wake_fd: RawFd,
        recv_buffers: RecvBuffers,
        registered_fds: u32,
    ) -> io::Result<Driver> {
        let (ring, mut features) = features::build_ring(entries)?;
        let buf_ring = if features.recv_multishot {
            match BufRing::register(&ring, recv_buffers) {
                Ok(r) => Some(r),
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => return Err(e),
                Err(e) => {
                    tracing::info!(error = %e, "no provided-buffer ring: single-shot receives");
                    features.recv_multishot = false;
                    None
                }
            }
        } else {
            None
        };
        let fixed = if registered_fds > 0 && !features::forced_plain() {
            match ring.submitter().register_files_sparse(registered_fds) {
                // Handed out from slot 0 up.
                Ok(()) => Some((0..registered_fds).rev().collect()),
                Err(e) => {
                    tracing::info!(error = %e, "no registered file table: plain descriptors");
                    None
                }
            }
        } else {
            None
        };
        let mut driver = Driver {
            ring,
            fixed,
            slots: Slab::with_capacity(256),
            features,
            wake_fd,
            wake_buf: Box::new(0),
            wake_armed: false,
            deferred: Vec::new(),
            closing: Vec::new(),
            buf_ring,
            send_zc_threshold: None,
            msg_ring_failed: Vec::new(),
            leaked: false,
            recv_bundles: 0,
            #[cfg(test)]
            fail_park: None,
        };
        driver.arm_wake_read()?;
        Ok(driver)
    }

    fn arm_wake_read(&mut self) -> io::Result<()> {
        let buf: *mut u64 = &mut *self.wake_buf;
        let sqe = opcode::Read::new(types::Fd(self.wake_fd), buf.cast(), 8)
            .build()
            .user_data(WAKE_TOKEN);
        self.push(&sqe)?;
        self.wake_armed = true;
        Ok(())
    }

    /// Queue an SQE, flushing the submission queue to the kernel if it is full.
    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every SQE comes from an `OpCode` impl, whose contract keeps the memory
            // and descriptors it names alive until its final completion (the op or its slot
            // owns them, see Slot), or from the driver itself: the wake-up read into the boxed
            // `wake_buf` (leaked on drop while armed); multishot receives, which name only
            // their descriptor (a share kept in the slot until the final completion) and the
            // buffer ring (registered until the driver drops); zero-copy sends, whose bytes
            // and descriptor share the slot keeps until their notification; cancels and
            // closes, which carry no pointers.
            let pushed = unsafe { self.ring.submission().push(sqe) };
            if pushed.is_ok() {
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    // The CQ is full: make room by reaping, then retry.
                    self.reap();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Submit an operation and return its slot key.
    pub(crate) fn submit_op(&mut self, sqe: squeue::Entry) -> io::Result<usize> {
        let key = self.slots.insert(Slot::Pending(None));
        self.deferred.push((key, sqe.user_data(key as u64)));
        Ok(key)
    }

    /// The ring's own descriptor (other shards post MSG_RING wake-ups into it).
    pub(crate) fn ring_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        let raw = std::os::fd::AsRawFd::as_raw_fd(&self.ring);
        // SAFETY: the ring owns this descriptor and keeps it open as long as `self`, which
        // the borrow outlives not.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) }
    }

    /// Post a wake-up completion into `target`, the ring of shard `shard` (kept open by its
    /// `ShardRemote` for as long as any shard can reach it). It goes out with this ring's
    /// next submit; a failure comes back as shard `shard` in `msg_ring_failed`.
    pub(crate) fn post_wake(&mut self, target: RawFd, shard: usize) -> io::Result<()> {
        let sqe = opcode::MsgRingData::new(types::Fd(target), 0, MSG_WAKE_TOKEN, None)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(MSG_SENT_BASE + shard as u64);
        self.push(&sqe)
    }

    /// Whether the shard has a registered file table.
    pub(crate) fn has_fixed_table(&self) -> bool {
        self.fixed.is_some()
    }

    /// Put `raw` into a free slot of the registered file table: the slot, or `None` when
    /// there is no table, it is full, or the kernel refused.
    pub(crate) fn register_fd(&mut self, raw: RawFd) -> Option<u32> {
        let slot = self.fixed.as_mut()?.pop()?;
        match self.ring.submitter().register_files_update(slot, &[raw]) {
            Ok(_) => Some(slot),
            Err(e) => {
                tracing::debug!(error = %e, "registering a descriptor failed");
                if let Some(free) = self.fixed.as_mut() {
                    free.push(slot);
                }
                None
            }
        }
    }

    /// The shard's buffer ring, when multishot receive is in use.
    pub(crate) fn buf_ring(&self) -> Option<&Rc<BufRing>> {
        self.buf_ring.as_ref()
    }

    /// Arm a multishot receive on `fd` into the shard's buffer ring (the caller checked that
    /// there is one). Its completions come out of [`Driver::poll_multi`].
    pub(crate) fn submit_recv_multishot(&mut self, fd: &fd::SharedFd) -> usize {
        let sqe = if self.features.recv_bundle {
            fd::on_fd!(fd, t => opcode::RecvMultiBundle::new(t, buf_ring::BUF_GROUP).build())
        } else {
            fd::on_fd!(fd, t => opcode::RecvMulti::new(t, buf_ring::BUF_GROUP).build())
        };
        self.submit_multi(MultiKind::Recv, sqe, Box::new(fd.clone()))
    }

    /// Arm a multishot accept on listener `fd` (new sockets close-on-exec). Its connections
    /// come out of [`Driver::poll_accept_multishot`].
    pub(crate) fn submit_accept_multishot(&mut self, fd: &fd::SharedFd) -> usize {
        let sqe = opcode::AcceptMulti::new(types::Fd(fd.raw()))
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.submit_multi(MultiKind::Accept, sqe, Box::new(fd.clone()))
    }

    /// Arm a multishot poll for readability of `fd` (the caller checked
    /// `Features::poll_multishot` and keeps `fd` open while it is armed: the kernel holds its
    /// own reference to the file meanwhile). Its wake-ups come out of [`Driver::poll_multi`].
    pub(crate) fn submit_poll_multishot(&mut self, fd: RawFd) -> usize {
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

    /// Like [`Driver::abandon_multi`], without cancelling: the op runs to its end (a
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
        if !cancel {
            return;
        }
        let cancel = opcode::AsyncCancel::new(key as u64)
            .build()
            .user_data(CANCEL_TOKEN);
        if let Err(e) = self.push(&cancel) {
            tracing::warn!(error = %e, "could not queue an io_uring cancel");
        }
    }

    /// Closes of descriptors whose last holder dropped: fire and forget (a failed close has
    /// nobody to report to, and the descriptor is gone either way).
    fn flush_closes(&mut self) -> io::Result<()> {
        for slot in fd::take_pending_slot_closes() {
            let sqe = opcode::Close::new(types::Fixed(slot))
                .build()
                .user_data(FIXED_CLOSE_BASE + u64::from(slot));
            self.push(&sqe)?;
        }
        fd::take_pending_closes(&mut self.closing);
        let mut closing = std::mem::take(&mut self.closing);
        for raw in closing.drain(..) {
            let sqe = opcode::Close::new(types::Fd(raw))
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(CLOSE_TOKEN);
            self.push(&sqe)?;
        }
        self.closing = closing;
        Ok(())
    }

    /// Close what is still queued without the ring (at shutdown).
    pub(crate) fn close_pending_now() {
        let mut closing = Vec::new();
        fd::take_pending_closes(&mut closing);
        for raw in closing {
            // SAFETY: `close_later` took these from OwnedFds; each is closed exactly once.
            drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
        }
    }

    fn flush_deferred(&mut self) -> io::Result<()> {
        if fd::has_pending_closes() || fd::has_pending_slot_closes() {
            self.flush_closes()?;
        }
        if self.deferred.is_empty() {
            return Ok(());
        }
        // Taken out (and put back) so `push` may reap while we iterate; keeps the capacity.
        let mut deferred = std::mem::take(&mut self.deferred);
        for (key, sqe) in deferred.drain(..) {
            if let Err(e) = self.push(&sqe) {
                if let Some(Slot::Pending(w)) = self.slots.get_mut(key) {
                    // Complete it with the error so its future sees it.
                    let w = w.take();
                    self.slots[key] = Slot::Completed {
                        result: -e.raw_os_error().unwrap_or(libc::EIO),
                        flags: 0,
                    };
                    if let Some(w) = w {
                        w.wake();
                    }
                }
            }
        }
        self.deferred = deferred;
        Ok(())
    }

    /// Poll a slot: the completion if there is one, otherwise remember the waker.
    pub(crate) fn poll_slot(&mut self, key: usize, waker: &Waker) -> Option<(i32, u32)> {
        let slot = self.slots.get_mut(key)?;
        match slot {
            Slot::Completed { result, flags } => {
                let out = (*result, *flags);
                self.slots.remove(key);
                Some(out)
            }
            Slot::Pending(w) => {
                match w {
                    Some(old) if old.will_wake(waker) => {}
                    _ => *w = Some(waker.clone()),
                }
                None
            }
            Slot::Abandoned { .. } | Slot::Multi { .. } | Slot::MultiAbandoned { .. } => None,
        }
    }

    /// The op future went away before completion: cancel it and park its data in the slot.
    /// `release` frees the resource a completion nobody takes may carry.
    pub(crate) fn abandon(&mut self, key: usize, data: Box<dyn Any>, release: fn(i32, u32)) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        match slot {
            Slot::Completed { result, flags } => {
                let (result, flags) = (*result, *flags);
                self.slots.remove(key);
                drop(data);
                release(result, flags);
            }
            Slot::Pending(_) => {
                if let Some(pos) = self.deferred.iter().position(|(k, _)| *k == key) {
                    // The kernel never saw it: nothing to cancel, nothing it could write.
                    self.deferred.remove(pos);
                    self.slots.remove(key);
                    drop(data);
                    return;
                }
                *slot = Slot::Abandoned { data, release };
                let cancel = opcode::AsyncCancel::new(key as u64)
                    .build()
                    .user_data(CANCEL_TOKEN);
                if let Err(e) = self.push(&cancel) {
                    // The op still completes on its own (sockets close, timers fire); the data
                    // stays parked until then.
                    tracing::warn!(error = %e, "could not queue an io_uring cancel");
                }
            }
            Slot::Abandoned { .. } | Slot::Multi { .. } | Slot::MultiAbandoned { .. } => {}
        }
    }

    /// Ops submitted or waiting on the kernel, not counting the driver's own wake-up read.
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.len()
    }

    /// Whether the next [`Driver::submit_and_reap`] has anything to do without a syscall.
    fn needs_enter(&mut self) -> bool {
        let sq = self.ring.submission();
        !sq.is_empty() || sq.taskrun() || sq.cq_overflow()
    }

    /// Non-blocking: hand queued SQEs to the kernel (and, with DEFER_TASKRUN, let it post
    /// completions), then reap whatever completed.
    pub(crate) fn submit_and_reap(&mut self) -> io::Result<Reaped> {
        self.flush_deferred()?;
        if self.needs_enter() {
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if is_transient(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.reap())
    }

    /// Block in the ring until at least one completion, a wake-up through the eventfd, or
    /// `timeout` elapses (`None`: no timer pending).
    pub(crate) fn park(&mut self, timeout: Option<Duration>) -> io::Result<Reaped> {
        #[cfg(test)]
        if let Some(errno) = self.fail_park {
            return Err(io::Error::from_raw_os_error(errno));
        }
        self.flush_deferred()?;
        if !self.wake_armed {
            self.arm_wake_read()?;
        }
        let res = match timeout {
            Some(d) => {
                let ts = types::Timespec::from(d);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
            None => self.ring.submitter().submit_and_wait(1),
        };
        match res {
            Ok(_) => {}
            Err(e) if is_transient(&e) || e.raw_os_error() == Some(libc::ETIME) => {}
            Err(e) => return Err(e),
        }
        Ok(self.reap())
    }

    fn reap(&mut self) -> Reaped {
        let mut reaped = Reaped::default();
        let mut to_cancel: Vec<u64> = Vec::new();
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let ud = cqe.user_data();
            match ud {
                CANCEL_TOKEN => continue,
                CLOSE_TOKEN => {
                    // Only failures post a completion (SKIP_SUCCESS).
                    tracing::debug!(error = %io::Error::from_raw_os_error(-cqe.result()), "close failed");
                    continue;
                }
                WAKE_TOKEN => {
                    self.wake_armed = false;
                    reaped.woke_by_eventfd = true;
                    continue;
                }
                MSG_WAKE_TOKEN => {
                    reaped.woke_by_msg_ring = true;
                    continue;
                }
                ud if (FIXED_CLOSE_BASE..MSG_SENT_BASE).contains(&ud) => {
                    if cqe.result() < 0 {
                        tracing::debug!(error = %io::Error::from_raw_os_error(-cqe.result()), "closing a registered slot failed");
                    }
                    if let Some(free) = self.fixed.as_mut() {
                        free.push((ud - FIXED_CLOSE_BASE) as u32);
                    }
                    continue;
                }
                ud if ud >= MSG_SENT_BASE => {
                    tracing::debug!(error = %io::Error::from_raw_os_error(-cqe.result()), "MSG_RING wake-up failed; using the eventfd");
                    self.msg_ring_failed.push((ud - MSG_SENT_BASE) as usize);
                    continue;
                }
                _ => {}
            }
            reaped.completions += 1;
            let key = ud as usize;
            let Some(slot) = self.slots.get_mut(key) else {
                tracing::error!(key, "io_uring completion for an unknown slot");
                continue;
            };
            match slot {
                Slot::Pending(waker) => {
                    let waker = waker.take();
                    *slot = Slot::Completed {
                        result: cqe.result(),
                        flags: cqe.flags(),
                    };
                    if let Some(w) = waker {
                        w.wake();
                    }
                }
                Slot::Abandoned { release, .. } => {
                    let release = *release;
                    // Drops the op's data (buffers, its descriptor share) now that the kernel
                    // is done with it.
                    self.slots.remove(key);
                    release(cqe.result(), cqe.flags());
                }
                Slot::Completed { .. } => {
                    tracing::error!(key, "second completion for a single-shot op");
                }
                Slot::Multi {
                    kind,
                    cqes,
                    waker,
                    finished,
                    cancelling,
                    ..
                } => {
                    let merged = *kind == MultiKind::Poll
                        && cqueue::more(cqe.flags())
                        && cqe.result() >= 0
                        && cqes
                            .back_mut()
                            .filter(|(r, f)| *r >= 0 && cqueue::more(*f))
                            .map(|last| last.0 |= cqe.result())
                            .is_some();
                    if !merged {
                        let ring = self.buf_ring.as_deref();
                        let bundled = per_buffer(*kind, ring, cqe.result(), cqe.flags(), |r, f| {
                            cqes.push_back((r, f))
                        });
                        self.recv_bundles += u64::from(bundled);
                    }
                    if !cqueue::more(cqe.flags()) {
                        *finished = true;
                    } else if *kind == MultiKind::Accept
                        && cqes.len() >= ACCEPT_QUEUE_LIMIT
                        && !*cancelling
                    {
                        *cancelling = true;
                        to_cancel.push(ud);
                    }
                    if let Some(w) = waker.take() {
                        w.wake();
                    }
                }
                Slot::MultiAbandoned { kind, .. } => {
                    let kind = *kind;
                    let flags = cqe.flags();
                    if !cqueue::more(flags) {
                        self.slots.remove(key);
                    }
                    let ring = self.buf_ring.as_deref();
                    per_buffer(kind, ring, cqe.result(), flags, |r, f| {
                        discard(kind, ring, r, f)
                    });
                }
            }
        }
        drop(cq);
        for key in to_cancel {
            let cancel = opcode::AsyncCancel::new(key)
                .build()
                .user_data(CANCEL_TOKEN);
            if let Err(e) = self.push(&cancel) {
                tracing::warn!(error = %e, "could not queue an io_uring cancel");
            }
        }
        if !self.wake_armed {
            if let Err(e) = self.arm_wake_read() {
                tracing::error!(error = %e, "could not re-arm the shard wake-up read");
            }
        }
        reaped
    }

    /// At shutdown: cancel whatever is still in flight and wait (bounded) for the kernel to let
    /// go of the buffers, so dropping the ring frees nothing the kernel still uses. Whatever
    /// is still in flight when the time is up, or when the ring fails, is leaked, never freed.
    pub(crate) fn drain(&mut self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        for (key, _) in std::mem::take(&mut self.deferred) {
            self.slots.remove(key);
        }
        let keys: Vec<usize> = self.slots.iter().map(|(k, _)| k).collect();
        for key in keys {
            if let Some(
                Slot::Pending(_)
                | Slot::Multi {
                    finished: false, ..
                },
            ) = self.slots.get(key)
            {
                let cancel = opcode::AsyncCancel::new(key as u64)
                    .build()
                    .user_data(CANCEL_TOKEN);
                let _ = self.push(&cancel);
            }
        }
        while self.slots.iter().any(|(_, s)| !s.is_settled()) {
            let now = std::time::Instant::now();
            if now >= deadline {
                self.leak_in_flight("ops still in flight at shard shutdown");
                return;
            }
            if let Err(e) = self.park(Some(deadline - now)) {
                tracing::error!(error = %e, "the ring failed while draining");
                self.leak_in_flight("the ring failed with ops in flight");
                return;
            }
        }
        self.slots.clear();
        // Closes queued while draining go out now, without waiting for their results.
        let _ = self.flush_closes();
        let _ = self.ring.submit();
    }

    /// Forget every slot the kernel may still use; completed slots hold no kernel-visible data
    /// and are freed.
    fn leak_in_flight(&mut self, why: &str) {
        let still = self.slots.iter().filter(|(_, s)| !s.is_settled()).count();
        tracing::warn!(in_flight = still, "{why}; leaking their buffers");
        self.leaked = true;
        for (_, slot) in std::mem::take(&mut self.slots) {
            if slot.is_settled() {
                drop(slot);
            } else {
                // Leak rather than free memory the kernel may still write to.
                std::mem::forget(slot);
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(ring) = self.buf_ring.take() {
            // The kernel reads the ring and writes the buffers until the group is gone: free
            // them (when the last RecvBuf is back) only once it is, or never.
            if self.leaked
                || self
                    .ring
                    .submitter()
                    .unregister_buf_ring(buf_ring::BUF_GROUP)
                    .is_err()
            {
                std::mem::forget(ring);
            }
        }
        if self.wake_armed {
            // The kernel may still hold the wake-up read until the ring is torn down, which
            // happens asynchronously after close: keep its 8-byte target alive for good.
            let buf = std::mem::replace(&mut self.wake_buf, Box::new(0));
            Box::leak(buf);
        }
    }
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
fn discard(kind: MultiKind, ring: Option<&BufRing>, result: i32, flags: u32) {
    match kind {
        MultiKind::Recv => {
            if let (Some(bid), Some(ring)) = (cqueue::buffer_select(flags), ring) {
                ring.took_and_returned(bid);
            }
        }
        MultiKind::Accept => op::release_new_fd(result),
        MultiKind::SendZc | MultiKind::Poll => {}
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
    )
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::rc::Rc;

    use super::*;

    /// Stands for an op's buffers: records whether it was freed.
    struct Buffers(Rc<Cell<bool>>);

    impl Drop for Buffers {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        let (r, w) = std::io::pipe().expect("pipe");
        (r.into(), w.into())
    }

    /// Issue 8, item 12: when the ring fails while draining at shutdown, the data of ops the
    /// kernel may still own is leaked, never freed (it used to be freed by `slots.clear()`).
    #[test]
    fn drain_leaks_abandoned_buffers_when_the_ring_fails() {
        let (wake_r, _wake_w) = pipe();
        let (never_readable, _writer) = pipe();
        let mut driver =
            Driver::new(8, wake_r.as_raw_fd(), RecvBuffers::default(), 0).expect("ring");
        let sqe = opcode::PollAdd::new(types::Fd(never_readable.as_raw_fd()), libc::POLLIN as u32)
            .build();
        let key = driver.submit_op(sqe).expect("submit");
        driver
            .submit_and_reap()
            .expect("the poll reaches the kernel");
        let freed = Rc::new(Cell::new(false));
        driver.abandon(key, Box::new(Buffers(freed.clone())), |_, _| {});
        driver.fail_park = Some(libc::EFAULT);
        driver.drain(Duration::from_secs(1));
        assert!(!freed.get(), "buffers the kernel may still use were freed");
        assert_eq!(driver.in_flight(), 0, "the slot was forgotten, not kept");
    }

    /// The same data is freed once its completion arrives (the normal path).
    #[test]
    fn drain_frees_abandoned_buffers_after_their_completion() {
        let (wake_r, _wake_w) = pipe();
        let (never_readable, _writer) = pipe();
        let mut driver =
            Driver::new(8, wake_r.as_raw_fd(), RecvBuffers::default(), 0).expect("ring");
        let sqe = opcode::PollAdd::new(types::Fd(never_readable.as_raw_fd()), libc::POLLIN as u32)
            .build();
        let key = driver.submit_op(sqe).expect("submit");
        driver
            .submit_and_reap()
            .expect("the poll reaches the kernel");
        let freed = Rc::new(Cell::new(false));
        driver.abandon(key, Box::new(Buffers(freed.clone())), |_, _| {});
        driver.drain(Duration::from_secs(5));
        assert!(
            freed.get(),
            "the cancelled op's data was not freed after its completion"
        );
    }
}
