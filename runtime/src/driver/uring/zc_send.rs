//! Zero-copy send (`IORING_OP_SEND_ZC`) for payloads of at least
//! `RuntimeBuilder::send_zc_threshold` bytes: the kernel sends from the caller's bytes
//! instead of copying them, and says with a second completion (the notification) when it is
//! done with them. The driver's slot keeps a share of the bytes (and of the descriptor) until
//! that notification, even when the future completed or was dropped long before.

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use io_uring::cqueue;

use crate::driver::fd::SharedFd;
use crate::shard::context;

/// A zero-copy send in flight: resolves with the first completion (bytes sent).
pub(crate) struct ZcSend {
    key: Option<usize>,
    buf: Option<Bytes>,
    /// The slot key means something only in this shard's ring.
    _shard_bound: PhantomData<*const ()>,
}

impl ZcSend {
    pub(crate) fn submit(fd: &SharedFd, buf: Bytes) -> ZcSend {
        let ctx = context::current();
        let key = ctx
            .driver
            .borrow_mut()
            .uring()
            .expect("zero-copy sends are io_uring's: the threshold is off on epoll")
            .submit_send_zc(fd, buf.clone());
        ctx.remote.stats.send_zc.incr();
        ZcSend {
            key: Some(key),
            buf: Some(buf),
            _shard_bound: PhantomData,
        }
    }
}

impl Future for ZcSend {
    type Output = (io::Result<usize>, Bytes);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let key = this.key.expect("zero-copy send polled after completion");
        let Some((result, flags)) = context::with_driver(|d| {
            let d = d.uring()?;
            let next = d.poll_multi(key, cx.waker());
            if let Some((_, flags)) = next {
                if cqueue::more(flags) {
                    // The notification is still to come: the slot keeps the bytes until then.
                    d.detach_multi(key);
                }
            }
            next
        }) else {
            return Poll::Pending;
        };
        let _ = flags;
        this.key = None;
        let buf = this.buf.take().expect("taken once");
        let result = if result < 0 {
            Err(io::Error::from_raw_os_error(-result))
        } else {
            Ok(result as usize)
        };
        Poll::Ready((result, buf))
    }
}

impl Drop for ZcSend {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            // Cancelled before its first completion; the slot keeps the bytes until the
            // kernel's last word. No driver (off the shard): the slot goes with the driver.
            let _ = context::try_with_driver(|d| d.uring().map(|u| u.abandon_multi(key)));
        }
    }
}
