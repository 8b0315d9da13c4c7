//! Single-shot operations: a slot per op in flight, keyed by its SQE's `user_data`, holding
//! the waker of the task that awaits it, its completion, or (once its future is gone) the
//! data the kernel may still use.

use std::any::Any;
use std::collections::VecDeque;
use std::io;
use std::task::Waker;

use io_uring::squeue;
use slab::Slab;

use super::multishot::MultiKind;
use super::Uring;

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

impl Slot {
    /// The kernel will post nothing more for this slot.
    pub(super) fn is_settled(&self) -> bool {
        match self {
            Slot::Completed { .. } => true,
            Slot::Multi { finished, .. } => *finished,
            _ => false,
        }
    }
}

/// A single-shot op's completion: wake its task, or free what its dropped future left.
pub(super) fn complete(slots: &mut Slab<Slot>, key: usize, result: i32, flags: u32) {
    let Some(slot) = slots.get_mut(key) else {
        return;
    };
    match slot {
        Slot::Pending(waker) => {
            let waker = waker.take();
            *slot = Slot::Completed { result, flags };
            if let Some(w) = waker {
                w.wake();
            }
        }
        Slot::Abandoned { release, .. } => {
            let release = *release;
            // Drops the op's data (buffers, its descriptor share) now that the kernel is done
            // with it.
            slots.remove(key);
            release(result, flags);
        }
        Slot::Completed { .. } => {
            tracing::error!(key, "second completion for a single-shot op");
        }
        Slot::Multi { .. } | Slot::MultiAbandoned { .. } => {}
    }
}

impl Uring {
    /// Submit an operation and return its slot key.
    pub(crate) fn submit_op(&mut self, sqe: squeue::Entry) -> io::Result<usize> {
        let key = self.slots.insert(Slot::Pending(None));
        self.deferred.push((key, sqe.user_data(key as u64)));
        Ok(key)
    }

    pub(super) fn flush_deferred(&mut self) -> io::Result<()> {
        if super::super::fd::has_pending_closes() || super::super::fd::has_pending_slot_closes() {
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
                self.cancel(key as u64);
            }
            Slot::Abandoned { .. } | Slot::Multi { .. } | Slot::MultiAbandoned { .. } => {}
        }
    }

    /// Ops submitted or waiting on the kernel, not counting the driver's own wake-up read.
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.len()
    }
}
