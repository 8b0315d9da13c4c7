//! The shard's I/O driver: one of two backends, chosen when the runtime starts
//! ([`Backend`]), behind one interface the shard loop calls — submit and reap
//! ([`Driver::submit_and_reap`]), sleep until something happens or a timeout
//! ([`Driver::park`]), drain at shutdown ([`Driver::drain`]). Other threads wake a parked
//! shard through its eventfd (`ShardRemote::notify`), which both backends watch.
//!
//! - `uring/`: io_uring. Operations are submitted as SQEs and complete as CQEs; the kernel
//!   owns an operation's buffers until its completion, so the driver keeps the data of a
//!   dropped operation in its slot until then. Multishot receive into a provided-buffer ring,
//!   multishot accept and poll, bundles, zero-copy send, MSG_RING wake-ups and registered
//!   files live only here.
//! - `epoll/`: readiness. Each operation knows its descriptor and the readiness it waits for
//!   and tries itself with a non-blocking syscall; `WouldBlock` registers the task's waker
//!   with the descriptor's readiness (edge-triggered). File operations, which epoll cannot
//!   wait on, run on the blocking pool.
//!
//! Operations ([`op::Op`]) are written once for both (`op/`, one per file). The dispatch is
//! an enum, matched per call: no virtual call on the hot path.
//!
//! All of the crate's `unsafe` that hands memory to the kernel lives under this module.
#![allow(unsafe_code)] // SQEs and non-blocking syscalls carry pointers the kernel dereferences

mod backend;
pub(crate) mod epoll;
pub(crate) mod fd;
pub(crate) mod op;
pub(crate) mod readable;
pub(crate) mod recv;
pub(crate) mod uring;

use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use backend::memlock_note as backend_memlock_note;
pub use backend::Backend;
pub(crate) use backend::{limits, select, Wanted};
pub(crate) use uring::buf_ring;
use uring::buf_ring::{BufRing, RecvBuffers};
pub(crate) use uring::features;
pub use uring::features::Features;

use crate::shard::ShardRemote;

/// What one reap pass did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reaped {
    pub completions: usize,
    pub woke_by_eventfd: bool,
    pub woke_by_msg_ring: bool,
}

/// The settings a shard's driver is made with.
pub(crate) struct DriverConfig {
    pub backend: Wanted,
    pub ring_entries: u32,
    pub recv_buffers: RecvBuffers,
    pub registered_fds: u32,
}

/// A shard's driver: io_uring or epoll, fixed for the runtime's life.
// One per shard, made once and never moved: boxing the larger variant would only add an
// indirection to every call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Driver {
    Uring(uring::Uring),
    Epoll(epoll::Epoll),
}

impl Driver {
    /// The driver of the shard `remote` stands for (its eventfd wakes the shard), on the
    /// backend asked for (`Auto`: io_uring where it can start, else epoll), and why it is on
    /// that one.
    pub(crate) fn new(
        config: &DriverConfig,
        remote: &Arc<ShardRemote>,
    ) -> io::Result<(Driver, String)> {
        backend::open(
            &config.backend,
            || {
                uring::Uring::new(
                    config.ring_entries,
                    remote.wake_fd(),
                    config.recv_buffers,
                    config.registered_fds,
                )
                .map(Driver::Uring)
            },
            || epoll::Epoll::new(remote).map(Driver::Epoll),
        )
    }

    /// Which backend this is.
    pub(crate) fn backend(&self) -> Backend {
        match self {
            Driver::Uring(_) => Backend::IoUring,
            Driver::Epoll(_) => Backend::Epoll,
        }
    }

    /// The io_uring features in use (none on epoll).
    #[inline]
    pub(crate) fn features(&self) -> Features {
        match self {
            Driver::Uring(u) => u.features,
            Driver::Epoll(_) => Features::default(),
        }
    }

    /// The io_uring backend, for the mechanisms only it has.
    #[inline]
    pub(crate) fn uring(&mut self) -> Option<&mut uring::Uring> {
        match self {
            Driver::Uring(u) => Some(u),
            Driver::Epoll(_) => None,
        }
    }

    /// The epoll backend.
    #[inline]
    pub(crate) fn epoll(&mut self) -> Option<&mut epoll::Epoll> {
        match self {
            Driver::Uring(_) => None,
            Driver::Epoll(e) => Some(e),
        }
    }

    /// Non-blocking: hand queued work to the kernel and collect what completed (io_uring
    /// completions, epoll readiness and finished blocking calls), waking their tasks.
    #[inline]
    pub(crate) fn submit_and_reap(&mut self) -> io::Result<Reaped> {
        match self {
            Driver::Uring(u) => u.submit_and_reap(),
            Driver::Epoll(e) => e.submit_and_reap(),
        }
    }

    /// Whether completions, readiness or queued submissions wait for the loop's next
    /// submit and reap (see [`crate::work_waiting`]).
    #[inline]
    pub(crate) fn work_waiting(&mut self) -> bool {
        match self {
            Driver::Uring(u) => u.work_waiting(),
            Driver::Epoll(e) => e.work_waiting(),
        }
    }

    /// Whether [`Driver::park`] collects everything [`Driver::submit_and_reap`] would before
    /// it sleeps, so a loop pass that is about to park may skip its reap. epoll: yes, the
    /// park's `epoll_wait` returns at once with the readiness a non-blocking one would
    /// return (the shard then makes one `epoll_wait` per idle period, as tokio's does).
    /// io_uring: its reap reads the completion ring without a syscall, and its submit starts
    /// the ops the pass's tasks queued: left as it is.
    #[inline]
    pub(crate) fn park_reaps(&self) -> bool {
        matches!(self, Driver::Epoll(_))
    }

    /// Sleep until something completes, the shard's eventfd is written, or `timeout`
    /// elapses (`None`: no timer pending). The caller published that it parks first
    /// (`ShardRemote::set_parked`), so a wake-up sent meanwhile is not lost.
    pub(crate) fn park(&mut self, timeout: Option<Duration>) -> io::Result<Reaped> {
        match self {
            Driver::Uring(u) => u.park(timeout),
            Driver::Epoll(e) => e.park(timeout),
        }
    }

    /// At shutdown: wait (at most `limit`) for what the kernel or a helper thread still
    /// uses, and leak — never free — what is still in use after that.
    pub(crate) fn drain(&mut self, limit: Duration) {
        match self {
            Driver::Uring(u) => u.drain(limit),
            Driver::Epoll(e) => e.drain(limit),
        }
    }

    /// Operations in flight (io_uring: submitted ops; epoll: ops waiting for readiness and
    /// blocking calls running).
    pub(crate) fn in_flight(&self) -> usize {
        match self {
            Driver::Uring(u) => u.in_flight(),
            Driver::Epoll(e) => e.in_flight(),
        }
    }

    /// Poll the slot of an op in flight (io_uring, or a blocking call on epoll).
    #[inline]
    pub(crate) fn poll_slot(&mut self, key: usize, waker: &std::task::Waker) -> Option<(i32, u32)> {
        match self {
            Driver::Uring(u) => u.poll_slot(key, waker),
            Driver::Epoll(e) => e.poll_blocking(key, waker),
        }
    }

    /// An op's future went away before its completion: keep `data` until the kernel (or the
    /// helper thread) is done with it; `release` frees what that completion carries.
    pub(crate) fn abandon(
        &mut self,
        key: usize,
        data: Box<dyn std::any::Any>,
        release: fn(i32, u32),
    ) {
        match self {
            Driver::Uring(u) => u.abandon(key, data, release),
            Driver::Epoll(e) => e.abandon_blocking(key, data, release),
        }
    }

    /// The shard's receive-buffer ring (io_uring with multishot receive only).
    pub(crate) fn buf_ring(&self) -> Option<&Rc<BufRing>> {
        match self {
            Driver::Uring(u) => u.buf_ring(),
            Driver::Epoll(_) => None,
        }
    }

    /// Receive completions that were bundles, since start (io_uring only).
    pub(crate) fn recv_bundles(&self) -> u64 {
        match self {
            Driver::Uring(u) => u.recv_bundles,
            Driver::Epoll(_) => 0,
        }
    }

    /// Sends of at least this many bytes go zero-copy (io_uring with SEND_ZC only).
    pub(crate) fn send_zc_threshold(&self) -> Option<usize> {
        match self {
            Driver::Uring(u) => u.send_zc_threshold,
            Driver::Epoll(_) => None,
        }
    }

    /// Shards whose MSG_RING wake-up failed since the last call (io_uring only).
    pub(crate) fn take_msg_ring_failed(&mut self) -> Vec<usize> {
        match self {
            Driver::Uring(u) if !u.msg_ring_failed.is_empty() => {
                std::mem::take(&mut u.msg_ring_failed)
            }
            _ => Vec::new(),
        }
    }

    /// Close what is still queued without the driver (at shutdown, after it is gone).
    pub(crate) fn close_pending_now() {
        fd::forget_pending_deregistrations();
        let mut closing = Vec::new();
        fd::take_pending_closes(&mut closing);
        for raw in closing {
            // SAFETY: `close_later` took these from OwnedFds; each is closed exactly once.
            drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
        }
    }
}
