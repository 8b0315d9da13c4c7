//! A stream's receive side: one multishot receive into the shard's buffer ring while the
//! kernel has it (an idle stream then holds no buffer at all), otherwise one single-shot
//! receive at a time into a buffer of its own.
//!
//! The state lives in the stream, not in a future: dropping a receive future leaves the
//! operation running, and the next receive takes what it delivered (cancel-safe).
//!
//! An empty ring (ENOBUFS) ends the multishot receive with the data still in the socket. The
//! stream then receives single-shot into its own buffer (no busy loop: that receive waits for
//! data like any other) and re-arms the multishot receive once the ring has buffers again.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use io_uring::cqueue;

use crate::driver::buf_ring::RecvBuf;
use crate::driver::fd::SharedFd;
use crate::driver::op::recv::Recv;
use crate::driver::op::Op;
use crate::shard::context;

pub(crate) struct Receiver {
    state: RefCell<State>,
}

enum State {
    /// Nothing in flight.
    Idle,
    /// A multishot receive, by its driver slot.
    Armed { key: usize },
    /// A single-shot receive into the stream's own buffer.
    Single(Op<Recv>),
    /// The peer closed its side.
    Eof,
}

impl Receiver {
    pub(crate) fn new() -> Receiver {
        Receiver {
            state: RefCell::new(State::Idle),
        }
    }

    /// The next chunk received: `Ok(None)` once the peer closed its side (and for every call
    /// after). Cancel-safe; one consumer at a time (a second one steals the first's waker).
    pub(crate) fn poll_recv(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<RecvBuf>>> {
        let mut state = self.state.borrow_mut();
        loop {
            match &mut *state {
                State::Eof => return Poll::Ready(Ok(None)),
                State::Idle => *state = start(fd),
                State::Single(op) => {
                    let (result, buf) = std::task::ready!(Pin::new(op).poll(cx));
                    *state = State::Idle;
                    return Poll::Ready(match result {
                        Ok(0) => {
                            *state = State::Eof;
                            Ok(None)
                        }
                        Ok(_) => Ok(Some(RecvBuf::owned(buf))),
                        Err(e) => Err(e),
                    });
                }
                State::Armed { key } => {
                    let key = *key;
                    let Some((result, flags)) =
                        context::with_driver(|d| d.poll_multi(key, cx.waker()))
                    else {
                        return Poll::Pending;
                    };
                    if !cqueue::more(flags) {
                        *state = State::Idle;
                    }
                    let ctx = context::current();
                    let driver = ctx.driver.borrow();
                    let ring = driver.buf_ring().cloned();
                    match (cqueue::buffer_select(flags), ring) {
                        (Some(bid), Some(ring)) if result > 0 => {
                            return Poll::Ready(Ok(Some(ring.take(bid, result as u32))));
                        }
                        (Some(bid), Some(ring)) => ring.took_and_returned(bid),
                        _ => {}
                    }
                    drop(driver);
                    match result {
                        0 => {
                            *state = State::Eof;
                            return Poll::Ready(Ok(None));
                        }
                        r if r == -libc::ENOBUFS => {
                            ctx.remote.stats.recv_buffers_exhausted.incr();
                            // Straight to a receive of our own: re-arming now would only
                            // meet the empty ring again.
                            *state = single(fd);
                        }
                        // Ended without an error (cancelled by the kernel, CQ overflow):
                        // `Idle` re-arms.
                        r if r > 0 || r == -libc::ECANCELED => {}
                        r => return Poll::Ready(Err(io::Error::from_raw_os_error(-r))),
                    }
                }
            }
        }
    }

    /// Hand the receive in flight back (cancelling it) before the descriptor closes.
    pub(crate) fn stop(&self) {
        let state = std::mem::replace(&mut *self.state.borrow_mut(), State::Eof);
        if let State::Armed { key } = state {
            // No driver (off the shard, or at its teardown): the slot goes with the driver.
            let _ = context::try_with_driver(|d| d.abandon_multi(key));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Buffers that must be free before a multishot receive is (re-)armed: fewer, and the ring
/// would run dry again at once.
fn low_water(count: u16) -> u32 {
    (u32::from(count) / 8).max(1)
}

fn start(fd: &SharedFd) -> State {
    let ctx = context::current();
    let mut driver = ctx.driver.borrow_mut();
    let ring_ready = driver
        .buf_ring()
        .is_some_and(|r| r.available() >= low_water(r.count()));
    if ring_ready {
        ctx.remote.stats.recv_multishot_arms.incr();
        State::Armed {
            key: driver.submit_recv_multishot(fd),
        }
    } else {
        drop(driver);
        single(fd)
    }
}

fn single(fd: &SharedFd) -> State {
    let ctx = context::current();
    let size = ctx
        .driver
        .borrow()
        .buf_ring()
        .map_or(FALLBACK_CHUNK, |r| r.size() as usize);
    ctx.remote.stats.recv_single_shot.incr();
    State::Single(Op::submit(Recv::new(
        fd.clone(),
        BytesMut::with_capacity(size),
    )))
}

/// The own buffer of a single-shot receive where there is no ring to take the size from.
const FALLBACK_CHUNK: usize = 16 * 1024;

/// A receive of the next chunk ([`TcpStream::recv_chunk`](super::TcpStream::recv_chunk),
/// [`UnixStream::recv_chunk`](super::UnixStream::recv_chunk)). Cancel-safe: dropping it
/// loses nothing; the next receive delivers what arrived.
#[must_use = "futures do nothing unless awaited"]
pub struct RecvChunk<'a> {
    pub(super) rx: &'a Receiver,
    pub(super) fd: &'a SharedFd,
}

impl Future for RecvChunk<'_> {
    type Output = io::Result<Option<RecvBuf>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.rx.poll_recv(self.fd, cx)
    }
}
