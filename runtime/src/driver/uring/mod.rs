//! The io_uring backend: one ring per shard, owned by the shard thread.
//!
//! Operations are futures ([`super::op::Op`]) that own their buffers. The driver keeps a slot
//! per in-flight operation, keyed by the SQE's `user_data`; a completion wakes the slot's
//! waker. An operation dropped before its completion is cancelled, and its buffers move into
//! the slot so the kernel never writes into freed memory.
//!
//! The files by concern: `slots` (single-shot ops: submit, poll, abandon), `multishot`
//! (receive, accept, poll and zero-copy send kinds and their queues), `fixed` (the registered
//! file table), `closes` (the close queue), `wake` (the eventfd read and MSG_RING), `drain`
//! (shutdown), `buf_ring` (the provided-buffer ring), `features` (the kernel probe).

pub(crate) mod acceptor;
pub(crate) mod buf_ring;
mod closes;
mod drain;
pub(crate) mod features;
mod fixed;
pub(crate) mod multishot;
mod slots;
mod wake;
pub(crate) mod zc_send;

use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::Duration;

use io_uring::{squeue, types, IoUring};
use slab::Slab;

use super::Reaped;
use buf_ring::{BufRing, RecvBuffers};
use features::Features;
use slots::Slot;

/// `user_data` of the cancel requests the driver issues itself; their completions are ignored.
const CANCEL_TOKEN: u64 = u64::MAX;

pub(crate) struct Uring {
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
    /// Scratch list for the descriptors [`super::fd::close_later`] queued.
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

impl Uring {
    pub(crate) fn new(
        entries: u32,
        wake_fd: RawFd,
        recv_buffers: RecvBuffers,
        registered_fds: u32,
    ) -> io::Result<Uring> {
        let (ring, mut features) = features::build_ring(entries)?;
        let buf_ring = if features.recv_multishot {
            match BufRing::register(&ring, recv_buffers) {
                Ok(r) => Some(r),
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => return Err(e),
                Err(e) => {
                    tracing::info!(error = %e, "{}; single-shot receives", features::why_not("no provided-buffer ring", &e));
                    features.recv_multishot = false;
                    None
                }
            }
        } else {
            None
        };
        let fixed = fixed::register_table(&ring, registered_fds);
        let mut driver = Uring {
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

    /// Queue a cancel of the op in slot `key` (its completion is ignored).
    fn cancel(&mut self, key: u64) {
        let cancel = io_uring::opcode::AsyncCancel::new(key)
            .build()
            .user_data(CANCEL_TOKEN);
        if let Err(e) = self.push(&cancel) {
            // The op still completes on its own (sockets close, timers fire); its data stays
            // parked until then.
            tracing::warn!(error = %e, "could not queue an io_uring cancel");
        }
    }

    /// The shard's buffer ring, when multishot receive is in use.
    pub(crate) fn buf_ring(&self) -> Option<&Rc<BufRing>> {
        self.buf_ring.as_ref()
    }

    /// Whether the next [`Uring::submit_and_reap`] has anything to do without a syscall.
    fn needs_enter(&mut self) -> bool {
        let sq = self.ring.submission();
        !sq.is_empty() || sq.taskrun() || sq.cq_overflow()
    }

    /// Whether the loop has work here: completions not yet reaped, completions the kernel
    /// holds until the next enter (DEFER_TASKRUN raises the TASKRUN flag for them), or ops
    /// queued and not yet handed to the kernel (a reply a task just sent). Loads only, no
    /// syscall.
    pub(crate) fn work_waiting(&mut self) -> bool {
        !self.deferred.is_empty() || !self.ring.completion().is_empty() || self.needs_enter()
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
            if ud == CANCEL_TOKEN {
                continue;
            }
            let result = cqe.result();
            if closes::is_close(ud) {
                closes::completed(result);
                continue;
            }
            if wake::completion(
                ud,
                result,
                &mut self.wake_armed,
                &mut self.msg_ring_failed,
                &mut reaped,
            ) || fixed::close_completed(ud, result, &mut self.fixed)
            {
                continue;
            }
            reaped.completions += 1;
            let key = ud as usize;
            match self.slots.get(key) {
                None => tracing::error!(key, "io_uring completion for an unknown slot"),
                Some(Slot::Multi { .. } | Slot::MultiAbandoned { .. }) => {
                    let ring = self.buf_ring.as_deref();
                    let (bundled, cancel) =
                        multishot::complete(&mut self.slots, ring, key, cqe.result(), cqe.flags());
                    self.recv_bundles += u64::from(bundled);
                    if cancel {
                        to_cancel.push(ud);
                    }
                }
                Some(_) => slots::complete(&mut self.slots, key, cqe.result(), cqe.flags()),
            }
        }
        drop(cq);
        for key in to_cancel {
            self.cancel(key);
        }
        if !self.wake_armed {
            if let Err(e) = self.arm_wake_read() {
                tracing::error!(error = %e, "could not re-arm the shard wake-up read");
            }
        }
        reaped
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
    )
}
