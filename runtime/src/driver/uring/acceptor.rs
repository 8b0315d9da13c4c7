//! A TCP listener's multishot accept: one armed accept whose connections queue in the
//! driver's slot until taken, re-armed when the kernel ends it. The queue is bounded: once
//! `ACCEPT_QUEUE_LIMIT` (64) connections nobody took are queued, the driver cancels
//! the accept (what the kernel posted in the same batch still arrives: at most the listen
//! backlog more), and further clients wait in the kernel's listen backlog until the queue is
//! taken and the accept re-armed.

use std::cell::Cell;
use std::io;
use std::os::fd::OwnedFd;
use std::task::{Context, Poll};

use crate::driver::fd::SharedFd;
use crate::shard::context;

pub(crate) struct Acceptor {
    /// The armed accept's driver slot.
    armed: Cell<Option<usize>>,
}

impl Acceptor {
    pub(crate) fn new() -> Acceptor {
        Acceptor {
            armed: Cell::new(None),
        }
    }

    /// The next accepted connection. The caller checked that the kernel has multishot accept.
    pub(crate) fn poll_accept(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<OwnedFd>> {
        let ctx = context::current();
        loop {
            let key = match self.armed.get() {
                Some(key) => key,
                None => {
                    let key = ctx
                        .driver
                        .borrow_mut()
                        .uring()
                        .ok_or(io::ErrorKind::Unsupported)?
                        .submit_accept_multishot(fd);
                    ctx.remote.stats.accept_multishot_arms.incr();
                    self.armed.set(Some(key));
                    key
                }
            };
            let next = ctx
                .driver
                .borrow_mut()
                .uring()
                .and_then(|u| u.poll_accept_multishot(key, cx.waker()));
            let Some((result, still_armed)) = next else {
                return Poll::Pending;
            };
            if !still_armed {
                self.armed.set(None);
            }
            match result {
                // Ended by the queue limit (or the kernel): re-arm.
                Err(e) if e.raw_os_error() == Some(libc::ECANCELED) && !still_armed => continue,
                other => return Poll::Ready(other),
            }
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        if let Some(key) = self.armed.take() {
            // Connections queued for nobody are closed; no driver (off the shard, or at its
            // teardown): the slot goes with the driver.
            let _ = context::try_with_driver(|d| d.uring().map(|u| u.abandon_multi(key)));
        }
    }
}
