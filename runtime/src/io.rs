//! Waiting on descriptors the runtime does not own (an RDMA completion channel, an rdma_cm
//! event channel) through the shard's ring, without a thread of their own.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use crate::driver::op::poll_add::PollAdd;
use crate::driver::op::Op;

/// Resolve once `fd` is readable. The borrow keeps the descriptor open while the wait is
/// pending. Cancel-safe: readiness is not consumed by a dropped wait.
pub async fn wait_readable(fd: &impl AsFd) -> io::Result<()> {
    let raw = fd.as_fd().as_raw_fd();
    Op::submit(PollAdd::readable(raw)).await.map(|_| ())
}

/// Repeated readiness of a descriptor the runtime does not own (an RDMA completion channel):
/// one multishot poll stays armed for as long as this lives, so each wake-up costs no
/// re-arming submission. Where the kernel lacks multishot poll (`Features::poll_multishot`,
/// or `COREWIRE_IO_URING=plain`), or the kernel ended the multishot poll, a poll is armed
/// again for the next wait. Wake-ups that arrive while nobody waits merge into one: the
/// queue behind this is bounded (one pending wake-up). Dropping it cancels the poll.
pub struct ReadableEvents<F: AsFd> {
    fd: F,
    /// The armed multishot poll, by its driver slot.
    armed: Option<usize>,
    multishot: bool,
    arms: u64,
}

impl<F: AsFd> ReadableEvents<F> {
    /// Watch `fd`, which this owns (and keeps open) while a poll may be armed on it.
    pub fn new(fd: F) -> ReadableEvents<F> {
        let multishot = crate::shard::context::with_driver(|d| d.features.poll_multishot);
        ReadableEvents {
            fd,
            armed: None,
            multishot,
            arms: 0,
        }
    }

    /// Resolve once the descriptor was readable since the last wake-up this returned (or,
    /// the first time, since it was created). Cancel-safe: a wake-up that arrives after
    /// the future is dropped is kept for the next call.
    pub async fn readable(&mut self) -> io::Result<()> {
        if !self.multishot {
            self.arms += 1;
            return wait_readable(&self.fd).await;
        }
        std::future::poll_fn(|cx| self.poll_readable(cx)).await
    }

    fn poll_readable(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        use std::task::Poll;
        let key = match self.armed {
            Some(key) => key,
            None => {
                let raw = self.fd.as_fd().as_raw_fd();
                self.arms += 1;
                let key = crate::shard::context::with_driver(|d| d.submit_poll_multishot(raw));
                self.armed = Some(key);
                key
            }
        };
        let Some((result, flags)) =
            crate::shard::context::with_driver(|d| d.poll_multi(key, cx.waker()))
        else {
            return Poll::Pending;
        };
        if !io_uring::cqueue::more(flags) {
            // Ended (an error, or the kernel let it go): the next call arms a new one.
            self.armed = None;
        }
        if result < 0 {
            let err = io::Error::from_raw_os_error(-result);
            if result == -libc::EINVAL {
                // A kernel without multishot poll: single-shot polls from now on.
                self.multishot = false;
            }
            return Poll::Ready(Err(err));
        }
        Poll::Ready(Ok(()))
    }

    /// Polls armed so far: 1 for as long as one multishot poll serves every wake-up.
    pub fn arms(&self) -> u64 {
        self.arms
    }

    /// Whether a multishot poll serves the wake-ups (else each wait arms its own poll).
    pub fn is_multishot(&self) -> bool {
        self.multishot
    }

    pub fn get_ref(&self) -> &F {
        &self.fd
    }
}

impl<F: AsFd> Drop for ReadableEvents<F> {
    fn drop(&mut self) {
        if let Some(key) = self.armed.take() {
            // Cancelled before `fd` closes (it is dropped after this).
            let _ = crate::shard::context::try_with_driver(|d| d.abandon_multi(key));
        }
    }
}
