//! Shutdown: cancel what is in flight, wait (bounded) for the kernel to let go of it, and
//! leak — never free — whatever it may still use.

use std::time::Duration;

use super::slots::Slot;
use super::{buf_ring, Uring};

impl Uring {
    /// At shutdown: cancel whatever is still in flight and wait (bounded) for the kernel to let
    /// go of the buffers, so dropping the ring frees nothing the kernel still uses. Whatever
    /// is still in flight when the time is up, or when the ring fails, is leaked, never freed.
    pub(crate) fn drain(&mut self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        for (key, _) in std::mem::take(&mut self.deferred) {
            self.slots.remove(key);
        }
        let keys: Vec<usize> = self
            .slots
            .iter()
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Pending(_)
                        | Slot::Multi {
                            finished: false,
                            ..
                        }
                )
            })
            .map(|(k, _)| k)
            .collect();
        for key in keys {
            self.cancel(key as u64);
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

impl Drop for Uring {
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::rc::Rc;

    use io_uring::{opcode, types};

    use super::*;
    use crate::driver::uring::buf_ring::RecvBuffers;

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

    /// When the ring fails while draining at shutdown, the data of ops the kernel may still
    /// own is leaked, never freed (it used to be freed by `slots.clear()`).
    #[test]
    fn drain_leaks_abandoned_buffers_when_the_ring_fails() {
        let (wake_r, _wake_w) = pipe();
        let (never_readable, _writer) = pipe();
        let mut driver =
            Uring::new(8, wake_r.as_raw_fd(), RecvBuffers::default(), 0).expect("ring");
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
            Uring::new(8, wake_r.as_raw_fd(), RecvBuffers::default(), 0).expect("ring");
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
