//! Operation futures. Each op owns everything the kernel reads or writes (buffers, socket
//! addresses, iovecs, the descriptor itself) until its completion arrives, even if the future
//! is dropped first. The op layer is private to this crate: users get typed I/O objects
//! (`net::TcpStream`, `fs::File`, ...), so no safe code outside it can hand the kernel a
//! pointer.

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::squeue;

use crate::shard::context;

pub(crate) mod accept;
pub(crate) mod close;
pub(crate) mod connect;
pub(crate) mod fsync;
pub(crate) mod ftruncate;
pub(crate) mod mkdir_at;
pub(crate) mod open;
pub(crate) mod poll_add;
pub(crate) mod read;
pub(crate) mod recv;
pub(crate) mod recv_from;
pub(crate) mod rename_at;
pub(crate) mod send;
pub(crate) mod send_to;
pub(crate) mod statx;
pub(crate) mod unlink_at;
pub(crate) mod write;
pub(crate) mod writev;

/// One kind of io_uring operation: the data it owns and how its result is read.
///
/// # Safety
///
/// Implementors promise, like compio's `OpCode`:
/// - every pointer in the entry [`OpCode::sqe`] returns points into `self` itself, into
///   memory owned by `self` through a heap allocation (a `Box`, `Vec`, `Bytes`, ...), or into
///   memory owned by the driver, and that memory is neither moved, freed nor accessed by Rust
///   code in a way that conflicts with the kernel's access until `complete` or `release` runs.
///   Pointers into `self` are stable because [`Op::submit`] boxes `self` before calling `sqe`
///   and the driver keeps that box, unmoved, until the final completion, even when the future
///   is dropped (`complete` takes `self` out of the box only after it);
/// - memory the kernel writes through such a pointer is not reachable through any shared
///   reference while the op is in flight;
/// - every descriptor in the entry is kept open by `self` (a [`super::fd::SharedFd`] clone) or
///   is owned by the driver;
/// - `complete` interprets `result` only as the kernel defines it for that opcode (for
///   example, trusts a byte count only up to the length it submitted).
pub(crate) unsafe trait OpCode: 'static {
    type Output;
    /// Build the SQE. Called once, after `self` has reached its final address (in a Box).
    fn sqe(&mut self) -> squeue::Entry;
    /// Turn the completion into the op's output, giving back the owned buffers.
    fn complete(self, result: io::Result<u32>, flags: u32) -> Self::Output;
    /// A completion arrived that nobody will take (the future was dropped). Ops whose result
    /// is a resource (a new descriptor from accept or open) release it here.
    fn release(_result: i32, _flags: u32) {}
}

/// A submitted operation. Resolves to `T::Output`; dropping it cancels the operation.
///
/// `!Send`: the slot key means something only in the ring of the shard that submitted it.
pub(crate) struct Op<T: OpCode> {
    key: Option<usize>,
    data: Option<Box<T>>,
    /// Submission failed (for example the SQ could not be flushed).
    failed: Option<io::Error>,
    _shard_bound: PhantomData<*const ()>,
}

impl<T: OpCode> Op<T> {
    /// Submit on the current shard's ring. Panics when called outside a shard (a programming
    /// error, not a runtime condition).
    pub(crate) fn submit(data: T) -> Op<T> {
        let mut data = Box::new(data);
        let sqe = data.sqe();
        match context::with_driver(|d| d.submit_op(sqe)) {
            Ok(key) => Op {
                key: Some(key),
                data: Some(data),
                failed: None,
                _shard_bound: PhantomData,
            },
            Err(e) => Op {
                key: None,
                data: Some(data),
                failed: Some(e),
                _shard_bound: PhantomData,
            },
        }
    }
}

impl<T: OpCode> Future for Op<T> {
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

impl<T: OpCode> Drop for Op<T> {
    fn drop(&mut self) {
        if let (Some(key), Some(data)) = (self.key.take(), self.data.take()) {
            let mut data = Some(data);
            let parked = context::try_with_driver(|d| {
                d.abandon(key, data.take().expect("taken once"), T::release)
            });
            if parked.is_none() {
                // No driver on this thread any more: the kernel may still own these buffers,
                // so leak them rather than free memory it could write to.
                std::mem::forget(data);
            }
        }
    }
}

/// Compile-time proof that `Op` is `!Send` (a moved op would poll or abandon its slot in
/// another shard's driver). If `Op` were `Send`, the two impls below would both apply and
/// the call in `op_is_not_send` would be ambiguous, which fails to compile.
#[allow(dead_code)]
mod not_send {
    trait AmbiguousIfSend<A> {
        fn check() {}
    }
    impl<T: ?Sized> AmbiguousIfSend<()> for T {}
    impl<T: ?Sized + Send> AmbiguousIfSend<u8> for T {}

    fn op_is_not_send() {
        <super::Op<super::close::Close> as AmbiguousIfSend<_>>::check();
    }
}

/// Close a descriptor that an accept or open produced for a future nobody polls any more.
pub(crate) fn release_new_fd(result: i32) {
    if result >= 0 {
        // SAFETY: a successful accept/openat result is a new descriptor, and its op was
        // abandoned, so nothing else will ever own it.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(result) };
        crate::driver::fd::close_later(fd);
    }
}
