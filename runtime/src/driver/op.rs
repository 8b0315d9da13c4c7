//! Operation futures, written once for both backends. Each op owns everything the kernel
//! reads or writes (buffers, socket addresses, iovecs, the descriptor itself) until it is
//! done with them, even if the future is dropped first. The op layer is private to this
//! crate: users get typed I/O objects (`net::TcpStream`, `fs::File`, ...), so no safe code
//! outside it can hand the kernel a pointer.
//!
//! On io_uring an op is an SQE whose completion arrives later; on epoll it is a non-blocking
//! syscall tried when its descriptor is ready ([`EpollKind::Ready`]), or, for file
//! operations epoll cannot wait on, a blocking call on a helper thread
//! ([`EpollKind::Blocking`]), which then plays the kernel's part: the data stays in the
//! driver until the call returned.

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::squeue;

use super::epoll::Interest;
use super::fd::SharedFd;
use super::Driver;
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

/// How the epoll backend runs an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpollKind {
    /// [`OpCode::attempt`] on the shard, again whenever [`OpCode::epoll_fd`] becomes ready
    /// for the interest after it reported `WouldBlock`.
    Ready(Interest),
    /// [`OpCode::blocking`] on a helper thread (file I/O).
    Blocking,
    /// Not offered on epoll: the callers check `Features` first and take another way.
    Unsupported,
}

/// A blocking call for a helper thread: the result as io_uring reports one (a count, a new
/// descriptor, or `-errno`).
pub(crate) type BlockingCall = Box<dyn FnOnce() -> i32 + Send>;

/// A raw pointer a [`BlockingCall`] may carry to its helper thread: it points into the op's
/// box, which the driver keeps alive and unmoved until the call returned (see [`OpCode`]).
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

// SAFETY: the pointee is used by the helper thread alone while the call runs: the shard
// neither reads nor writes it until the call's completion came back (the op's contract).
unsafe impl<T> Send for SendPtr<T> {}

/// The result of a syscall as io_uring reports one: `rc` when it is not negative, else
/// `-errno`.
pub(crate) fn errno_result(rc: isize) -> i32 {
    if rc < 0 {
        -io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        rc.min(i32::MAX as isize) as i32
    }
}

/// A syscall's return value as a non-blocking attempt's result.
pub(crate) fn attempt_result(rc: isize) -> io::Result<u32> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc.min(u32::MAX as isize) as u32)
    }
}

/// One kind of operation: the data it owns, how each backend runs it, and how its result is
/// read.
///
/// # Safety
///
/// Implementors promise, like compio's `OpCode`:
/// - every pointer in the entry [`OpCode::sqe`] returns, and every pointer a
///   [`BlockingCall`] from [`OpCode::blocking`] carries, points into `self` itself, into
///   memory owned by `self` through a heap allocation (a `Box`, `Vec`, `Bytes`, ...), or into
///   memory owned by the driver, and that memory is neither moved, freed nor accessed by Rust
///   code in a way that conflicts with the kernel's (or the helper thread's) access until
///   `complete` or `release` runs. Pointers into `self` are stable because [`Op::submit`]
///   boxes `self` before calling `sqe` or `blocking`, and the driver keeps that box, unmoved,
///   until the final completion, even when the future is dropped (`complete` takes `self`
///   out of the box only after it);
/// - memory the kernel writes through such a pointer is not reachable through any shared
///   reference while the op is in flight;
/// - every descriptor in the entry or the call is kept open by `self` (a
///   [`super::fd::SharedFd`] clone) or is owned by the driver;
/// - a [`BlockingCall`] touches nothing but what it captured (plain values and such
///   pointers): it runs on another thread;
/// - `attempt` leaves behind no pointer the kernel keeps (a non-blocking syscall is done
///   when it returns);
/// - `complete` interprets `result` only as the kernel defines it for that opcode (for
///   example, trusts a byte count only up to the length it submitted).
pub(crate) unsafe trait OpCode: 'static {
    type Output;
    /// How the epoll backend runs it.
    const EPOLL: EpollKind;
    /// Build the SQE. Called once, after `self` has reached its final address (in a Box).
    fn sqe(&mut self) -> squeue::Entry;
    /// Turn the completion into the op's output, giving back the owned buffers.
    fn complete(self, result: io::Result<u32>, flags: u32) -> Self::Output;
    /// A completion arrived that nobody will take (the future was dropped). Ops whose result
    /// is a resource (a new descriptor from accept or open) release it here.
    fn release(_result: i32, _flags: u32) {}
    /// epoll, [`EpollKind::Ready`]: the descriptor whose readiness the op waits for.
    fn epoll_fd(&self) -> Option<&SharedFd> {
        None
    }
    /// epoll, [`EpollKind::Ready`]: try once without blocking; `WouldBlock` means wait.
    fn attempt(&mut self) -> io::Result<u32> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// epoll, [`EpollKind::Blocking`]: the call to run on a helper thread. Called once,
    /// after `self` reached its final address (in a Box).
    fn blocking(&mut self) -> BlockingCall {
        Box::new(|| -libc::ENOSYS)
    }
}

/// A submitted operation. Resolves to `T::Output`; dropping it cancels the operation.
///
/// `!Send`: its slot key and readiness registration mean something only in the driver of
/// the shard that submitted it.
pub(crate) struct Op<T: OpCode> {
    state: State<T>,
    _shard_bound: PhantomData<*const ()>,
}

enum State<T> {
    /// In a driver slot (io_uring, or a blocking call on epoll); the data stays boxed at one
    /// address until the completion.
    Slot {
        key: usize,
        data: Box<T>,
    },
    /// epoll: tried on the shard; `waiter` is its place among the descriptor's waiters
    /// (0: none yet).
    Ready {
        data: T,
        waiter: u32,
    },
    /// Submission failed (for example the SQ could not be flushed).
    Failed {
        error: io::Error,
        data: Box<T>,
    },
    Done,
}

impl<T: OpCode> Op<T> {
    /// Submit on the current shard's driver. Panics when called outside a shard (a
    /// programming error, not a runtime condition).
    pub(crate) fn submit(data: T) -> Op<T> {
        let state = context::with_driver(|d| match d {
            Driver::Uring(u) => {
                let mut data = Box::new(data);
                let sqe = data.sqe();
                match u.submit_op(sqe) {
                    Ok(key) => State::Slot { key, data },
                    Err(error) => State::Failed { error, data },
                }
            }
            Driver::Epoll(e) => match T::EPOLL {
                EpollKind::Ready(_) => State::Ready { data, waiter: 0 },
                EpollKind::Blocking => {
                    let mut data = Box::new(data);
                    let call = data.blocking();
                    State::Slot {
                        key: e.submit_blocking(call),
                        data,
                    }
                }
                EpollKind::Unsupported => State::Failed {
                    error: io::Error::new(
                        io::ErrorKind::Unsupported,
                        "not offered by the epoll backend",
                    ),
                    data: Box::new(data),
                },
            },
        });
        Op {
            state,
            _shard_bound: PhantomData,
        }
    }
}

impl<T: OpCode> Future for Op<T> {
    type Output = T::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        // Op holds no self-references: kernel-visible data lives in a Box, and a readiness
        // attempt leaves no pointer behind.
        let this = self.get_mut();
        match &mut this.state {
            State::Slot { key, .. } => {
                let key = *key;
                let Some((result, flags)) = context::with_driver(|d| d.poll_slot(key, cx.waker()))
                else {
                    return Poll::Pending;
                };
                let State::Slot { data, .. } = std::mem::replace(&mut this.state, State::Done)
                else {
                    unreachable!("matched above")
                };
                let result = if result < 0 {
                    Err(io::Error::from_raw_os_error(-result))
                } else {
                    Ok(result as u32)
                };
                Poll::Ready(data.complete(result, flags))
            }
            State::Ready { data, waiter } => {
                let interest = match T::EPOLL {
                    EpollKind::Ready(i) => i,
                    _ => unreachable!("only readiness ops take this state"),
                };
                match super::epoll::poll_attempt(data, interest, waiter, cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(result) => {
                        let State::Ready { data, .. } =
                            std::mem::replace(&mut this.state, State::Done)
                        else {
                            unreachable!("matched above")
                        };
                        Poll::Ready(data.complete(result, 0))
                    }
                }
            }
            State::Failed { .. } => {
                let State::Failed { error, data } = std::mem::replace(&mut this.state, State::Done)
                else {
                    unreachable!("matched above")
                };
                Poll::Ready(data.complete(Err(error), 0))
            }
            State::Done => panic!("op polled after completion"),
        }
    }
}

impl<T: OpCode> Drop for Op<T> {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Slot { key, data } => {
                let mut data = Some(data);
                let parked = context::try_with_driver(|d| {
                    d.abandon(key, data.take().expect("taken once"), T::release)
                });
                if parked.is_none() {
                    // No driver on this thread any more: the kernel (or a helper thread) may
                    // still own these buffers, so leak them rather than free memory it could
                    // write to.
                    std::mem::forget(data);
                }
            }
            State::Ready { data, waiter } if waiter != 0 => {
                if let Some(fd) = data.epoll_fd() {
                    super::epoll::forget_waiter(fd, T::EPOLL, waiter);
                }
            }
            _ => {}
        }
    }
}

// An op is never pinned in place: on io_uring its kernel-visible data is boxed, and an epoll
// attempt leaves no pointer into it behind, so the op may move between polls.
impl<T: OpCode> Unpin for Op<T> {}

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
