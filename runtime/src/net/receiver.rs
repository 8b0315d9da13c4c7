//! A stream's receive side: one multishot receive into the shard's buffer ring while the
//! kernel has it (an idle stream then holds no buffer at all), otherwise one single-shot
//! receive at a time into a buffer of its own.
//!
//! The state lives in the stream, not in a future: dropping a receive future leaves the
//! operation running, and the next receive takes what it delivered (cancel-safe).
//!
//! [`Receiver::poll_recv_available`] appends every chunk already received in one go, so a
//! request/response loop answers all the requests that arrived together with one send
//! instead of one send per chunk (see its docs).
//!
//! An empty ring (ENOBUFS) ends the multishot receive with the data still in the socket. The
//! stream then receives single-shot into its own buffer (no busy loop: that receive waits for
//! data like any other) and re-arms the multishot receive once the ring has buffers again.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use io_uring::cqueue;

use crate::driver::buf_ring::RecvBuf;
use crate::driver::fd::SharedFd;
use crate::driver::op::recv::Recv;
use crate::driver::op::Op;
use crate::shard::context;

pub(crate) struct Receiver {
    state: RefCell<State>,
    /// An error met while taking chunks already received after others: reported by the
    /// next receive, after the bytes before it.
    failed: Cell<Option<io::Error>>,
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
            failed: Cell::new(None),
        }
    }

    /// Append the next chunk to `buf` (waiting for it), then every chunk already received
    /// behind it, up to [`AVAILABLE_LIMIT`] bytes appended: the bytes appended, `Ok(0)` once
    /// the peer closed its side (after the bytes before the end). Cancel-safe: bytes are
    /// taken only in the poll that returns them. Each chunk's buffer goes back to the ring
    /// at once.
    ///
    /// Why it exists: the shard's ring buffers are small (4 KiB by default) and a multishot
    /// receive delivers one completion per buffer, so requests that arrived together come
    /// out as several chunks; a loop that answered after each chunk would send one reply
    /// per chunk (one TCP segment each), and on loopback each segment costs the sender
    /// about as much kernel time as the bytes.
    pub(crate) fn poll_recv_available(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        let mut appended = match std::task::ready!(self.poll_recv(fd, cx)) {
            Ok(Some(chunk)) => {
                // Room for this chunk and the ones queued behind it (up to the limit) at
                // once: growing chunk by chunk re-copied what was there at every step (9 % of
                // the echo server's time at 4 KiB messages).
                let queued = self.queued_bytes().min(AVAILABLE_LIMIT);
                buf.reserve(chunk.len() + queued);
                buf.extend_from_slice(&chunk);
                chunk.len()
            }
            Ok(None) => return Poll::Ready(Ok(0)),
            Err(e) => return Poll::Ready(Err(e)),
        };
        // What is already here, without registering for more: the task's waker stays with
        // the poll above, and the next receive registers it again if it must wait.
        let mut no_wake = Context::from_waker(Waker::noop());
        while appended < AVAILABLE_LIMIT && self.has_queued() {
            match self.poll_recv(fd, &mut no_wake) {
                Poll::Ready(Ok(Some(chunk))) => {
                    buf.extend_from_slice(&chunk);
                    appended += chunk.len();
                }
                // The end stays the stream's state: the next receive returns it.
                Poll::Ready(Ok(None)) | Poll::Pending => break,
                Poll::Ready(Err(e)) => {
                    self.failed.set(Some(e));
                    break;
                }
            }
        }
        Poll::Ready(Ok(appended))
    }

    /// The bytes of the chunks waiting to be taken without a new operation.
    fn queued_bytes(&self) -> usize {
        match &*self.state.borrow() {
            State::Armed { key } => {
                let key = *key;
                context::with_driver(|d| d.multi_queued_bytes(key))
            }
            State::Eof | State::Idle | State::Single(_) => 0,
        }
    }

    /// Whether a chunk (or the end) is waiting to be taken without a new operation.
    fn has_queued(&self) -> bool {
        match &*self.state.borrow() {
            State::Armed { key } => {
                let key = *key;
                context::with_driver(|d| d.multi_has_queued(key))
            }
            State::Eof => true,
            // A single-shot receive completes on its own; taking its result would mean
            // submitting the next one, which is the next call's business.
            State::Idle | State::Single(_) => false,
        }
    }

    /// The next chunk received: `Ok(None)` once the peer closed its side (and for every call
    /// after). Cancel-safe; one consumer at a time (a second one steals the first's waker).
    pub(crate) fn poll_recv(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<RecvBuf>>> {
        if let Some(e) = self.failed.take() {
            return Poll::Ready(Err(e));
        }
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

/// The most bytes [`Receiver::poll_recv_available`] appends in one call (the first chunk
/// always goes in whole): what one connection copies out of the ring before its consumer
/// gets to the bytes.
pub(crate) const AVAILABLE_LIMIT: usize = 64 * 1024;

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

/// A receive of everything already received
/// ([`TcpStream::recv_available`](super::TcpStream::recv_available),
/// [`UnixStream::recv_available`](super::UnixStream::recv_available)): the bytes appended to
/// the buffer, `0` at end-of-stream. Cancel-safe.
#[must_use = "futures do nothing unless awaited"]
pub struct RecvAvailable<'a> {
    pub(super) rx: &'a Receiver,
    pub(super) fd: &'a SharedFd,
    pub(super) buf: &'a mut BytesMut,
}

impl Future for RecvAvailable<'_> {
    type Output = io::Result<usize>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.rx.poll_recv_available(this.fd, cx, this.buf)
    }
}
