//! Operation futures. Each op owns everything the kernel reads or writes (buffers, socket
//! addresses, iovecs) until its completion arrives, even if the future is dropped first.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::squeue;

use crate::shard::context;

pub mod accept;
pub mod close;
pub mod connect;
pub mod fsync;
pub mod poll_add;
pub mod read;
pub mod recv;
pub mod send;
pub mod timeout;
pub mod write;
pub mod writev;

/// One kind of io_uring operation: the data it owns and how its result is interpreted.
pub trait OpData: 'static {
    type Output;
    /// Build the SQE. Called once, after `self` has reached its final address (inside a Box).
    fn sqe(&mut self) -> squeue::Entry;
    /// Turn the completion into the op's output, giving back the owned buffers.
    fn complete(self, result: io::Result<u32>, flags: u32) -> Self::Output;
}

/// A submitted operation. Resolves to `T::Output`; dropping it cancels the operation.
pub struct Op<T: OpData> {
    key: Option<usize>,
    data: Option<Box<T>>,
    /// Submission failed (for example the SQ could not be flushed).
    failed: Option<io::Error>,
}

impl<T: OpData> Op<T> {
    /// Submit on the current shard's ring. Panics when called outside a shard (a programming
    /// error, not a runtime condition).
    pub fn submit(data: T) -> Op<T> {
        let mut data = Box::new(data);
        let sqe = data.sqe();
        match context::with_driver(|d| d.submit_op(sqe)) {
            Ok(key) => Op {
                key: Some(key),
                data: Some(data),
                failed: None,
            },
            Err(e) => Op {
                key: None,
                data: Some(data),
                failed: Some(e),
            },
        }
    }
}

impl<T: OpData> Future for Op<T> {
    type Output = T::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        // Op holds no self-references: the kernel-visible data lives in a Box.
        let this = self.get_mut();
        if let Some(err) = this.failed.take() {
            let data = this.data.take().expect("op polled after completion");
            return Poll::Ready(data.complete(Err(err), 0));
        }
        let key = this.key.expect("op polled after completion");
        match context::with_driver(|d| d.poll_slot(key, cx.waker())) {
            Some((result, flags)) => {
                this.key = None;
                let data = this.data.take().expect("op polled after completion");
                let result = if result < 0 {
                    Err(io::Error::from_raw_os_error(-result))
                } else {
                    Ok(result as u32)
                };
                Poll::Ready(data.complete(result, flags))
            }
            None => Poll::Pending,
        }
    }
}

impl<T: OpData> Drop for Op<T> {
    fn drop(&mut self) {
        if let (Some(key), Some(data)) = (self.key.take(), self.data.take()) {
            let mut data = Some(data);
            let parked = context::try_with_driver(|d| d.abandon(key, data.take().unwrap()));
            if parked.is_none() {
                // No driver on this thread any more: the kernel may still own these buffers,
                // so leak them rather than free memory it could write to.
                std::mem::forget(data);
            }
        }
    }
}
