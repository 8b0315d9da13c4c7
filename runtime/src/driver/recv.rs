//! A stream's receive side, on either backend. The state lives in the stream, not in a
//! future: dropping a receive future loses nothing, and the next receive takes what arrived
//! (cancel-safe).
//!
//! io_uring: one multishot receive into the shard's buffer ring while the kernel has it (an
//! idle stream then holds no buffer at all), otherwise one single-shot receive at a time into
//! a buffer of its own. An empty ring (ENOBUFS) ends the multishot receive with the data still
//! in the socket; the stream then receives single-shot into its own buffer (no busy loop:
//! that receive waits for data like any other) and re-arms the multishot receive once the
//! ring has buffers again.
//!
//! epoll: a non-blocking receive into the shard's scratch buffer when the socket is ready,
//! copied out at once; a stream waiting for data holds no buffer either.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use io_uring::cqueue;

use super::buf_ring::RecvBuf;
use super::epoll::Interest;
use super::fd::SharedFd;
use super::op::recv::Recv;
use super::op::Op;
use super::Driver;
use crate::shard::context;

pub(crate) struct Receiver {
    state: RefCell<State>,
    /// epoll: the receive's place among its socket's waiters (0: none), and the socket's
    /// registration it waits in.
    waiter: Cell<(u64, u32)>,
}

enum State {
    /// Nothing in flight (on epoll: always, between receives).
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
            waiter: Cell::new((0, 0)),
        }
    }

    /// The bytes of the chunks waiting to be taken without a new operation.
    pub(crate) fn queued_bytes(&self) -> usize {
        match &*self.state.borrow() {
            State::Armed { key } => {
                let key = *key;
                context::with_driver(|d| d.uring().map_or(0, |u| u.multi_queued_bytes(key)))
            }
            State::Eof | State::Idle | State::Single(_) => 0,
        }
    }

    /// Whether a chunk (or the end) is waiting to be taken without a new operation.
    pub(crate) fn has_queued(&self) -> bool {
        match &*self.state.borrow() {
            State::Armed { key } => {
                let key = *key;
                context::with_driver(|d| d.uring().is_some_and(|u| u.multi_has_queued(key)))
            }
            State::Eof => true,
            // A single-shot receive completes on its own; taking its result would mean
            // submitting the next one, which is the next call's business. On epoll nothing
            // is received before it is asked for.
            State::Idle | State::Single(_) => false,
        }
    }

    /// epoll: receive what is there into `take` (`Some(n)`: bytes, `0` the end), or wait.
    fn poll_epoll(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
        take: impl FnOnce(&[u8]),
    ) -> Option<Poll<io::Result<usize>>> {
        let ctx = context::current();
        let mut driver = ctx.driver.borrow_mut();
        let epoll = driver.epoll()?;
        let (_, mut waiter) = self.waiter.get();
        let polled = epoll.poll_recv_stream(fd, &mut waiter, cx, take);
        self.waiter.set((
            fd.epoll_token().unwrap_or(0),
            if polled.is_pending() { waiter } else { 0 },
        ));
        if matches!(polled, Poll::Ready(Ok(0))) {
            *self.state.borrow_mut() = State::Eof;
        }
        Some(polled)
    }

    /// epoll: append what is there to `buf` (one receive, at most 64 KiB): the bytes
    /// appended, `0` at the end. `None` on io_uring.
    pub(crate) fn poll_recv_into(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Option<Poll<io::Result<usize>>> {
        match &*self.state.borrow() {
            State::Eof => return Some(Poll::Ready(Ok(0))),
            State::Idle => {}
            // On epoll the state is only ever `Idle` or `Eof`: an io_uring receive in flight
            // answers `None` without a look at the driver.
            State::Armed { .. } | State::Single(_) => return None,
        }
        self.poll_epoll(fd, cx, |bytes| {
            if buf.capacity() == 0 {
                // A buffer of exactly this size, without growing an empty one: what an echo
                // or request loop that frees its buffer between requests does every time.
                *buf = BytesMut::from(bytes);
            } else {
                buf.extend_from_slice(bytes);
            }
        })
    }

    /// The next chunk received: `Ok(None)` once the peer closed its side (and for every call
    /// after). Cancel-safe; one consumer at a time (a second one steals the first's waker).
    pub(crate) fn poll_recv(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<RecvBuf>>> {
        if matches!(&*self.state.borrow(), State::Idle) {
            let mut chunk = None;
            if let Some(polled) = self.poll_epoll(fd, cx, |b| chunk = Some(BytesMut::from(b))) {
                return polled
                    .map_ok(|n| (n > 0).then(|| RecvBuf::owned(chunk.take().unwrap_or_default())));
            }
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
                    let ctx = context::current();
                    let mut driver = ctx.driver.borrow_mut();
                    let Some(uring) = driver.uring() else {
                        return Poll::Ready(Err(io::ErrorKind::Unsupported.into()));
                    };
                    let Some((result, flags)) = uring.poll_multi(key, cx.waker()) else {
                        return Poll::Pending;
                    };
                    if !cqueue::more(flags) {
                        *state = State::Idle;
                    }
                    let ring = uring.buf_ring().cloned();
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
        let (token, waiter) = self.waiter.replace((0, 0));
        let armed = match state {
            State::Armed { key } => Some(key),
            // A single-shot receive cancels itself when dropped, which needs the driver: not
            // inside the borrow below (it would find the driver busy and leak the op).
            other => {
                drop(other);
                None
            }
        };
        // No driver (off the shard, or at its teardown): the slot goes with the driver.
        let _ = context::try_with_driver(|d| match d {
            Driver::Uring(u) => {
                if let Some(key) = armed {
                    u.abandon_multi(key);
                }
            }
            Driver::Epoll(e) if waiter != 0 => e.forget_waiter(token, Interest::Read, waiter),
            Driver::Epoll(_) => {}
        });
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
    let Some(uring) = driver.uring() else {
        drop(driver);
        return single(fd);
    };
    let ring_ready = uring
        .buf_ring()
        .is_some_and(|r| r.available() >= low_water(r.count()));
    if ring_ready {
        ctx.remote.stats.recv_multishot_arms.incr();
        State::Armed {
            key: uring.submit_recv_multishot(fd),
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
