//! The shard's io_uring driver: one ring per shard, owned by the shard thread.
//!
//! Operations are futures ([`op::Op`]) that own their buffers. The driver keeps a slot per
//! in-flight operation, keyed by the SQE's `user_data`; a completion wakes the slot's waker.
//! An operation dropped before its completion is cancelled, and its buffers move into the slot
//! so the kernel never writes into freed memory.

pub(crate) mod features;
pub mod op;

use std::any::Any;
use std::io;
use std::os::fd::RawFd;
use std::task::Waker;
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};
use slab::Slab;

pub use features::Features;

/// `user_data` of the cancel requests the driver issues itself; their completions are ignored.
const CANCEL_TOKEN: u64 = u64::MAX;
/// `user_data` of the read that waits on the shard's wake-up eventfd.
const WAKE_TOKEN: u64 = u64::MAX - 1;

pub(crate) enum Slot {
    /// Submitted; the waker of the task awaiting it, if it was polled.
    Pending(Option<Waker>),
    /// Completed before the future looked again.
    Completed { result: i32, flags: u32 },
    /// The future was dropped; the data the kernel may still touch lives here until the CQE.
    Abandoned(#[allow(dead_code)] Box<dyn Any>),
}

/// What one reap pass did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reaped {
    pub completions: usize,
    pub woke_by_eventfd: bool,
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
}

impl Driver {
    pub(crate) fn new(entries: u32, wake_fd: RawFd) -> io::Result<Driver> {
        let (ring, features) = features::build_ring(entries)?;
        let mut driver = Driver {
            ring,
            slots: Slab::with_capacity(256),
            features,
            wake_fd,
            wake_buf: Box::new(0),
            wake_armed: false,
            deferred: Vec::new(),
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
            // SAFETY: every SQE built by this crate points at memory owned by an op slot, the
            // op future, or the driver itself, all of which outlive the operation (see Slot).
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

    fn flush_deferred(&mut self) -> io::Result<()> {
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
            Slot::Abandoned(_) => None,
        }
    }

    /// The op future went away before completion: cancel it and park its data in the slot.
    pub(crate) fn abandon(&mut self, key: usize, data: Box<dyn Any>) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        match slot {
            Slot::Completed { .. } => {
                self.slots.remove(key);
            }
            Slot::Pending(_) => {
                if let Some(pos) = self.deferred.iter().position(|(k, _)| *k == key) {
                    // The kernel never saw it: nothing to cancel, nothing it could write.
                    self.deferred.remove(pos);
                    self.slots.remove(key);
                    drop(data);
                    return;
                }
                *slot = Slot::Abandoned(data);
                let cancel = opcode::AsyncCancel::new(key as u64)
                    .build()
                    .user_data(CANCEL_TOKEN);
                if let Err(e) = self.push(&cancel) {
                    // The op still completes on its own (sockets close, timers fire); the data
                    // stays parked until then.
                    tracing::warn!(error = %e, "could not queue an io_uring cancel");
                }
            }
            Slot::Abandoned(_) => {}
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
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let ud = cqe.user_data();
            match ud {
                CANCEL_TOKEN => continue,
                WAKE_TOKEN => {
                    self.wake_armed = false;
                    reaped.woke_by_eventfd = true;
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
                Slot::Abandoned(_) => {
                    self.slots.remove(key);
                }
                Slot::Completed { .. } => {
                    tracing::error!(key, "second completion for a single-shot op");
                }
            }
        }
        drop(cq);
        if !self.wake_armed {
            if let Err(e) = self.arm_wake_read() {
                tracing::error!(error = %e, "could not re-arm the shard wake-up read");
            }
        }
        reaped
    }

    /// At shutdown: cancel whatever is still in flight and wait (bounded) for the kernel to let
    /// go of the buffers, so dropping the ring frees nothing the kernel still uses.
    pub(crate) fn drain(&mut self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        for (key, _) in std::mem::take(&mut self.deferred) {
            self.slots.remove(key);
        }
        let keys: Vec<usize> = self.slots.iter().map(|(k, _)| k).collect();
        for key in keys {
            if let Some(Slot::Pending(_)) = self.slots.get(key) {
                let cancel = opcode::AsyncCancel::new(key as u64)
                    .build()
                    .user_data(CANCEL_TOKEN);
                let _ = self.push(&cancel);
            }
        }
        while self
            .slots
            .iter()
            .any(|(_, s)| !matches!(s, Slot::Completed { .. }))
        {
            let now = std::time::Instant::now();
            if now >= deadline {
                tracing::warn!(
                    in_flight = self.slots.len(),
                    "ops still in flight at shard shutdown; leaking their buffers"
                );
                // Leak rather than free memory the kernel may still write to.
                for (_, slot) in std::mem::take(&mut self.slots) {
                    std::mem::forget(slot);
                }
                return;
            }
            if self.park(Some(deadline - now)).is_err() {
                break;
            }
        }
        self.slots.clear();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.wake_armed {
            // The kernel may still hold the wake-up read until the ring is torn down, which
            // happens asynchronously after close: keep its 8-byte target alive for good.
            let buf = std::mem::replace(&mut self.wake_buf, Box::new(0));
            Box::leak(buf);
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
    )
}
