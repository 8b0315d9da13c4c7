//! The thread-safe face of a shard.
// The wake-up eventfd: eventfd(2) and write(2) have no safe wrapper in std or socket2.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;

use crossbeam_queue::{ArrayQueue, SegQueue};

use super::{ShardId, ShardStats};
use crate::executor::TaskKey;

/// A closure sent to a shard; it runs on the shard thread (usually to spawn a task there).
pub(crate) type Message = Box<dyn FnOnce() + Send>;

/// The part of a shard other threads may touch: its inbox, its remote wake queue, its wake-up
/// eventfd and its counters. Everything else a shard owns stays on its thread.
pub struct ShardRemote {
    pub(crate) id: ShardId,
    /// True while the shard sleeps in its ring (or is about to): only then does a sender pay
    /// for an eventfd write. A busy shard finds new work on its next loop iteration.
    parked: AtomicBool,
    wake_fd: OwnedFd,
    /// A duplicate of the shard's ring descriptor, set when MSG_RING wake-ups are on: other
    /// shards post wake-ups into it. Kept here (not borrowed from the driver) so the number
    /// stays valid as long as any shard can reach this one.
    msg_ring_fd: OnceLock<OwnedFd>,
    pub(crate) stop: AtomicBool,
    wakes: SegQueue<TaskKey>,
    pub(crate) inbox: ArrayQueue<Message>,
    /// Senders waiting for room in a full inbox (backpressure).
    inbox_waiters: Mutex<Vec<Waker>>,
    pub(crate) stats: ShardStats,
    /// Metrics that higher layers keep for this shard (`metrics::register_source`).
    pub(crate) metric_sources: Mutex<Vec<std::sync::Weak<dyn crate::metrics::MetricsSource>>>,
}

impl ShardRemote {
    pub(crate) fn new(id: ShardId, inbox_capacity: usize) -> std::io::Result<Arc<ShardRemote>> {
        // SAFETY: eventfd(2) with valid flags; the result is checked before being wrapped.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Arc::new(ShardRemote {
            id,
            parked: AtomicBool::new(false),
            // SAFETY: `fd` is a fresh descriptor owned by nobody else.
            wake_fd: unsafe { OwnedFd::from_raw_fd(fd) },
            msg_ring_fd: OnceLock::new(),
            stop: AtomicBool::new(false),
            wakes: SegQueue::new(),
            inbox: ArrayQueue::new(inbox_capacity.max(1)),
            inbox_waiters: Mutex::new(Vec::new()),
            stats: ShardStats::default(),
            metric_sources: Mutex::new(Vec::new()),
        }))
    }

    /// The shard's id.
    pub fn id(&self) -> ShardId {
        self.id
    }

    /// The shard's counters.
    pub fn stats(&self) -> &ShardStats {
        &self.stats
    }

    pub(crate) fn wake_fd(&self) -> RawFd {
        self.wake_fd.as_raw_fd()
    }

    /// A task of this shard was woken on another thread.
    pub(crate) fn wake_remote(&self, key: TaskKey) {
        self.wakes.push(key);
        self.notify();
    }

    pub(crate) fn take_remote_wakes(&self, mut f: impl FnMut(TaskKey)) -> usize {
        let mut n = 0;
        while let Some(k) = self.wakes.pop() {
            f(k);
            n += 1;
        }
        n
    }

    /// Try to queue a message; gives it back when the inbox is full.
    pub(crate) fn try_send(&self, msg: Message) -> Result<(), Message> {
        self.inbox.push(msg)?;
        self.notify();
        Ok(())
    }

    /// Register to be woken when the inbox has room again.
    pub(crate) fn wait_for_room(&self, waker: &Waker) {
        let mut waiters = self.inbox_waiters.lock().unwrap_or_else(|e| e.into_inner());
        if !waiters.iter().any(|w| w.will_wake(waker)) {
            waiters.push(waker.clone());
        }
    }

    pub(crate) fn wake_senders(&self) {
        let waiters = {
            let mut w = self.inbox_waiters.lock().unwrap_or_else(|e| e.into_inner());
            if w.is_empty() {
                return;
            }
            std::mem::take(&mut *w)
        };
        for w in waiters {
            w.wake();
        }
    }

    pub(crate) fn has_pending_work(&self) -> bool {
        !self.wakes.is_empty() || !self.inbox.is_empty() || self.stop.load(Ordering::Relaxed)
    }

    /// Let other shards wake this one through its ring (MSG_RING).
    pub(crate) fn accept_msg_ring_wakeups(&self, ring_fd: OwnedFd) {
        let _ = self.msg_ring_fd.set(ring_fd);
    }

    /// Wake the shard if it is parked in its ring.
    pub(crate) fn notify(&self) {
        // Pairs with the fence in `set_parked`: either the shard sees our work before it
        // sleeps, or we see `parked` and wake it.
        fence(Ordering::SeqCst);
        if self.parked.load(Ordering::Relaxed) {
            // From another shard's thread: post a completion into the parked ring from the
            // sender's own ring (no syscall now: it goes out with the sender's next submit).
            if let Some(target) = self.msg_ring_fd.get() {
                let posted = crate::shard::context::try_with_driver(|d| {
                    d.uring().is_some_and(|u| {
                        u.features.msg_ring && u.post_wake(target.as_raw_fd(), self.id).is_ok()
                    })
                });
                if posted == Some(true) {
                    self.stats.msg_ring_wakeups.incr();
                    return;
                }
            }
            self.write_eventfd();
        }
    }

    /// Wake the shard by its eventfd (also after a failed MSG_RING wake-up).
    pub(crate) fn write_eventfd(&self) {
        self.stats.wakeups_sent.incr();
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to an eventfd we own.
        let rc = unsafe { libc::write(self.wake_fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if rc < 0 {
            // EAGAIN: the counter is saturated, so the shard is being woken anyway.
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EAGAIN) {
                tracing::error!(shard = self.id, error = %err, "shard wake-up write failed");
            }
        }
    }

    pub(crate) fn set_parked(&self, parked: bool) {
        self.parked.store(parked, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    pub(crate) fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // By the eventfd, never MSG_RING: a stop is followed by a blocking join, and one made
        // on another runtime's shard (a runtime dropped there) would leave the MSG_RING in
        // that shard's ring, unsubmitted while its thread waits in the join.
        fence(Ordering::SeqCst);
        if self.parked.load(Ordering::Relaxed) {
            self.write_eventfd();
        }
    }
}
