//! Waiting on descriptors the runtime does not own (an RDMA completion channel, an rdma_cm
//! event channel) through the shard's driver, without a thread of their own.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use crate::driver::readable::{self, Readable};

/// Resolve once `fd` is readable. The borrow keeps the descriptor open while the wait is
/// pending. Cancel-safe: readiness is not consumed by a dropped wait.
pub async fn wait_readable(fd: &impl AsFd) -> io::Result<()> {
    readable::wait_readable(fd).await
}

/// Repeated readiness of a descriptor the runtime does not own (an RDMA completion channel).
///
/// On io_uring one multishot poll stays armed for as long as this lives, so each wake-up
/// costs no re-arming submission; where the kernel lacks multishot poll
/// (`Features::poll_multishot`, or `COREWIRE_IO_URING=plain`), or the kernel ended the
/// multishot poll, a poll is armed again for the next wait. On epoll the descriptor joins the
/// shard's epoll set once (edge-triggered) and every wake-up is an event of that one
/// registration. Wake-ups that arrive while nobody waits merge into one: the queue behind
/// this is bounded (one pending wake-up). Dropping it cancels the poll (leaves the set).
pub struct ReadableEvents<F: AsFd> {
    fd: F,
    watch: Readable,
}

impl<F: AsFd> ReadableEvents<F> {
    /// Watch `fd`, which this owns (and keeps open) while a poll may be armed on it.
    pub fn new(fd: F) -> ReadableEvents<F> {
        ReadableEvents {
            fd,
            watch: Readable::new(),
        }
    }

    /// Resolve once the descriptor was readable since the last wake-up this returned (or,
    /// the first time, since it was created). Cancel-safe: a wake-up that arrives after
    /// the future is dropped is kept for the next call.
    pub async fn readable(&mut self) -> io::Result<()> {
        let raw = self.fd.as_fd().as_raw_fd();
        std::future::poll_fn(|cx| self.watch.poll_readable(raw, cx)).await
    }

    /// Polls armed (registrations made) so far: 1 for as long as one multishot poll (or one
    /// epoll registration) serves every wake-up.
    pub fn arms(&self) -> u64 {
        self.watch.arms()
    }

    /// Whether one registration serves the wake-ups (else each wait arms its own poll).
    pub fn is_multishot(&self) -> bool {
        self.watch.is_multishot()
    }

    /// The wrapped value.
    pub fn get_ref(&self) -> &F {
        &self.fd
    }
}

impl<F: AsFd> Drop for ReadableEvents<F> {
    fn drop(&mut self) {
        // Before `fd` closes (it is dropped after this).
        let raw = self.fd.as_fd().as_raw_fd();
        self.watch.stop(raw);
    }
}
