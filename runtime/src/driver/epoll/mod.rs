//! The epoll backend: readiness plus non-blocking syscalls, for kernels and sandboxes where
//! io_uring is not allowed (seccomp profiles such as Docker's default, `io_uring_disabled`).
//!
//! One edge-triggered epoll set per shard (`registry` explains the readiness rules). A
//! readiness op ([`crate::driver::op::EpollKind::Ready`]) first tries its syscall; on
//! `WouldBlock` its descriptor joins the set (once for the descriptor's life) and the task
//! waits for the next event. A receive reads into the shard's scratch buffer and copies out
//! what arrived, so a connection waiting for data holds no buffer. File operations run on
//! the blocking pool (`blocking`). The shard's eventfd is in the set: other threads wake a
//! parked shard by writing it, as with io_uring.

mod blocking;
mod registry;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

pub(crate) use registry::Interest;
use registry::Registry;

use super::fd::{self, SharedFd};
use super::op::{attempt_result, EpollKind, OpCode};
use super::Reaped;
use crate::shard::{context, ShardRemote};

/// The token of the shard's wake-up eventfd in the set.
const WAKE_TOKEN: u64 = u64::MAX;
/// How often [`Epoll::work_waiting`] makes its syscall at most (a `poll` costs about as much
/// as encoding a few keys of a snapshot walk, which looks every couple of microseconds).
const LOOK_EVERY: Duration = Duration::from_micros(10);
/// Events taken per `epoll_wait`.
const EVENTS: usize = 1024;
/// The receive scratch buffer: the most one receive takes (as `recv_available` takes at
/// most 64 KiB on io_uring).
const SCRATCH: usize = 64 * 1024;

pub(crate) struct Epoll {
    epfd: OwnedFd,
    /// Owned by the shard's `ShardRemote`, which outlives the driver.
    wake_fd: RawFd,
    events: Vec<libc::epoll_event>,
    registry: Registry,
    blocking: blocking::Blocking,
    /// Receives land here and are copied out: only a connection that got data holds memory.
    scratch: Box<[u8]>,
    closing: Vec<RawFd>,
    deregistering: Vec<(RawFd, u64)>,
    /// When [`Epoll::work_waiting`] last polled the set and found nothing.
    looked: Option<Instant>,
}

impl Epoll {
    pub(crate) fn new(remote: &Arc<ShardRemote>) -> io::Result<Epoll> {
        // SAFETY: epoll_create1 with a valid flag; the result is checked before it is owned.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nobody else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(raw) };
        let epoll = Epoll {
            epfd,
            wake_fd: remote.wake_fd(),
            events: Vec::with_capacity(EVENTS),
            registry: Registry::default(),
            blocking: blocking::Blocking::new(remote.clone()),
            scratch: vec![0u8; SCRATCH].into_boxed_slice(),
            closing: Vec::new(),
            deregistering: Vec::new(),
            looked: None,
        };
        epoll.ctl(
            libc::EPOLL_CTL_ADD,
            epoll.wake_fd,
            libc::EPOLLIN as u32 | libc::EPOLLET as u32,
            WAKE_TOKEN,
        )?;
        Ok(epoll)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event the kernel only reads (and ignores for DEL).
        let rc = unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Add `fd` to the set for `events` (edge-triggered); its token.
    fn add(&mut self, fd: RawFd, events: u32) -> io::Result<u64> {
        let token = self.registry.insert(fd);
        if let Err(e) = self.ctl(
            libc::EPOLL_CTL_ADD,
            fd,
            events | libc::EPOLLET as u32,
            token,
        ) {
            self.registry.remove(token);
            return Err(e);
        }
        Ok(token)
    }

    /// `fd`'s token, adding it to the set (for both directions) the first time.
    fn register(&mut self, fd: &SharedFd) -> io::Result<u64> {
        if let Some(token) = fd.epoll_token() {
            return Ok(token);
        }
        let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP) as u32;
        let token = self.add(fd.raw(), events)?;
        fd.set_epoll_token(Some(token));
        Ok(token)
    }

    /// Watch a descriptor the runtime does not own for readability; its token. The caller
    /// keeps `fd` open until [`Epoll::deregister`].
    pub(crate) fn register_readable(&mut self, fd: RawFd) -> io::Result<u64> {
        self.add(fd, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32)
    }

    /// Take `fd` out of the set (it is still open: the number is still its own).
    pub(crate) fn deregister(&mut self, fd: RawFd, token: u64) {
        if self.registry.remove(token).is_some() {
            if let Err(e) = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0) {
                tracing::debug!(error = %e, fd, "taking a descriptor out of the epoll set failed");
            }
        }
    }

    /// Whether `token` is ready for `interest`; if not, the task waits (see
    /// [`Registry::poll_ready`]).
    pub(crate) fn poll_ready(
        &mut self,
        token: u64,
        interest: Interest,
        waiter: &mut u32,
        waker: &Waker,
    ) -> bool {
        self.registry.poll_ready(token, interest, waiter, waker)
    }

    /// A syscall on `fd` found nothing to do: register it if it was not, and mark it not
    /// ready for `interest` until the next event. Its token.
    fn would_block(&mut self, fd: &SharedFd, interest: Interest) -> io::Result<u64> {
        let token = self.register(fd)?;
        self.registry.clear(token, interest);
        Ok(token)
    }

    /// A readiness watcher took the event (`ReadableEvents`): wait for the next one.
    pub(crate) fn clear_readable(&mut self, token: u64) {
        self.registry.clear(token, Interest::Read);
    }

    pub(crate) fn forget_waiter(&mut self, token: u64, interest: Interest, waiter: u32) {
        self.registry.forget_waiter(token, interest, waiter);
    }

    /// Start a blocking call on the pool; its slot key.
    pub(crate) fn submit_blocking(&mut self, call: super::op::BlockingCall) -> usize {
        self.blocking.submit(call)
    }

    pub(crate) fn poll_blocking(&mut self, key: usize, waker: &Waker) -> Option<(i32, u32)> {
        self.blocking.poll(key, waker)
    }

    pub(crate) fn abandon_blocking(
        &mut self,
        key: usize,
        data: Box<dyn std::any::Any>,
        release: fn(i32, u32),
    ) {
        self.blocking.abandon(key, data, release);
    }

    /// Registrations undone and descriptors closed whose last holder dropped (in that order:
    /// the number is ours until the close).
    fn flush_closes(&mut self) {
        if fd::has_pending_deregistrations() {
            fd::take_pending_deregistrations(&mut self.deregistering);
            let mut list = std::mem::take(&mut self.deregistering);
            for (raw, token) in list.drain(..) {
                self.deregister(raw, token);
            }
            self.deregistering = list;
        }
        if fd::has_pending_closes() {
            fd::take_pending_closes(&mut self.closing);
            for raw in self.closing.drain(..) {
                // SAFETY: `close_later` took these from OwnedFds; each is closed once.
                drop(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        }
    }

    /// Whether the loop has work here: finished blocking calls, or readiness on the set's
    /// ready list (a `poll` of the epoll descriptor, which is readable while that list is
    /// not empty). The syscall is made at most once per [`LOOK_EVERY`]; in between, a look
    /// that found nothing answers for it (work that arrives meanwhile waits that much more).
    pub(crate) fn work_waiting(&mut self) -> bool {
        if self.blocking.has_results() {
            return true;
        }
        let now = Instant::now();
        if self
            .looked
            .is_some_and(|at| now.duration_since(at) < LOOK_EVERY)
        {
            return false;
        }
        let mut pfd = libc::pollfd {
            fd: self.epfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, a zero timeout; the kernel writes only `revents`.
        let ready = unsafe { libc::poll(&mut pfd, 1, 0) } > 0;
        self.looked = (!ready).then_some(now);
        ready
    }

    /// Non-blocking: collect readiness and finished blocking calls, waking their tasks.
    pub(crate) fn submit_and_reap(&mut self) -> io::Result<Reaped> {
        self.flush_closes();
        self.wait(0)
    }

    /// Sleep in `epoll_wait` until an event, an eventfd write, or `timeout` (rounded up to
    /// the millisecond `epoll_wait` counts in, so a timer is never woken for early).
    pub(crate) fn park(&mut self, timeout: Option<Duration>) -> io::Result<Reaped> {
        self.flush_closes();
        let ms = if self.blocking.has_results() {
            0
        } else {
            timeout.map_or(-1, |d| {
                let ms = d.as_nanos().div_ceil(1_000_000);
                ms.min(i32::MAX as u128) as i32
            })
        };
        self.wait(ms)
    }

    fn wait(&mut self, timeout_ms: i32) -> io::Result<Reaped> {
        let mut reaped = Reaped::default();
        self.events.clear();
        // SAFETY: the kernel writes at most `capacity` events into the vector's buffer; the
        // length is set to what it reports.
        let n = unsafe {
            libc::epoll_wait(
                self.epfd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.capacity() as libc::c_int,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        } else {
            // SAFETY: the kernel initialised the first `n` entries.
            unsafe { self.events.set_len(n as usize) };
        }
        for i in 0..self.events.len() {
            let ev = self.events[i];
            let (events, token) = (ev.events, ev.u64);
            if token == WAKE_TOKEN {
                self.drain_wake_fd();
                reaped.woke_by_eventfd = true;
            } else {
                // Readiness nobody waited for (room to send, mostly) is no work: counted, it
                // would cost the loop a pass and an `epoll_wait` for nothing.
                reaped.completions += self.registry.event(token, events);
            }
        }
        reaped.completions += self.blocking.reap();
        Ok(reaped)
    }

    /// Reset the eventfd's counter (edge-triggered: the next write is the next event).
    fn drain_wake_fd(&self) {
        let mut buf = 0u64;
        // SAFETY: reading 8 bytes into a valid u64 from the eventfd (non-blocking).
        let _ = unsafe { libc::read(self.wake_fd, (&mut buf as *mut u64).cast(), 8) };
    }

    /// Ops waiting for readiness, and blocking calls running.
    pub(crate) fn in_flight(&self) -> usize {
        self.registry.waiting() + self.blocking.len()
    }

    /// At shutdown: wait (at most `limit`) for blocking calls still running, then leak what
    /// they may still write into.
    pub(crate) fn drain(&mut self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        self.flush_closes();
        while self.blocking.running() > 0 {
            if std::time::Instant::now() >= deadline {
                tracing::warn!(
                    in_flight = self.blocking.running(),
                    "blocking calls still running at shard shutdown; leaking their buffers"
                );
                self.blocking.leak_running();
                return;
            }
            // The helper threads write the eventfd only to a parked shard: look every ms.
            if let Err(e) = self.wait(1) {
                tracing::error!(error = %e, "epoll failed while draining");
                self.blocking.leak_running();
                return;
            }
        }
        self.flush_closes();
    }

    /// Receive from stream `fd` into the scratch buffer and hand what arrived to `take`:
    /// the byte count, `0` at the end of the stream. Waits (registering the task as
    /// `waiter`) while nothing is there. A connection holds no buffer while it waits, and a
    /// dropped receive loses nothing: the bytes leave the socket only in the poll that
    /// returns them.
    pub(crate) fn poll_recv_stream(
        &mut self,
        fd: &SharedFd,
        waiter: &mut u32,
        cx: &mut Context<'_>,
        take: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<usize>> {
        if let Some(token) = fd.epoll_token() {
            if !self.poll_ready(token, Interest::Read, waiter, cx.waker()) {
                return Poll::Pending;
            }
        }
        for _ in 0..2 {
            // SAFETY: the kernel writes at most `scratch.len()` bytes into the scratch buffer,
            // which nothing else uses during the call.
            let rc = unsafe {
                libc::recv(
                    fd.raw(),
                    self.scratch.as_mut_ptr().cast(),
                    self.scratch.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            match attempt_result(rc as isize) {
                Ok(0) => return Poll::Ready(Ok(0)),
                Ok(n) => {
                    let n = n as usize;
                    if n < self.scratch.len() {
                        // A short read emptied the socket: the next data is the next event
                        // (saves the receive that would only say EAGAIN).
                        if let Some(token) = fd.epoll_token() {
                            self.registry.clear(token, Interest::Read);
                        }
                    }
                    take(&self.scratch[..n]);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let token = match self.would_block(fd, Interest::Read) {
                        Ok(t) => t,
                        Err(e) => return Poll::Ready(Err(e)),
                    };
                    if !self.poll_ready(token, Interest::Read, waiter, cx.waker()) {
                        return Poll::Pending;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        // Ready by a sticky close bit yet EAGAIN: wait for the next event.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// One poll of a readiness op (`EpollKind::Ready`): wait while its descriptor is known not
/// to be ready, else try the syscall; `WouldBlock` registers the descriptor, clears its
/// readiness and waits for the next event.
pub(crate) fn poll_attempt<T: OpCode>(
    data: &mut T,
    interest: Interest,
    waiter: &mut u32,
    cx: &mut Context<'_>,
) -> Poll<io::Result<u32>> {
    let ctx = context::current();
    for _ in 0..2 {
        if let Some(token) = data.epoll_fd().and_then(SharedFd::epoll_token) {
            let mut driver = ctx.driver.borrow_mut();
            let Some(epoll) = driver.epoll() else {
                return Poll::Ready(Err(io::ErrorKind::Unsupported.into()));
            };
            if !epoll.poll_ready(token, interest, waiter, cx.waker()) {
                return Poll::Pending;
            }
        }
        match data.attempt() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let Some(fd) = data.epoll_fd() else {
                    return Poll::Ready(Err(e));
                };
                let mut driver = ctx.driver.borrow_mut();
                let Some(epoll) = driver.epoll() else {
                    return Poll::Ready(Err(io::ErrorKind::Unsupported.into()));
                };
                if let Err(e) = epoll.would_block(fd, interest) {
                    return Poll::Ready(Err(e));
                }
            }
            result => return Poll::Ready(result),
        }
    }
    // Registered and cleared just above, so the loop's second pass waited; reaching here
    // means a sticky close bit with EAGAIN: look again at the next loop iteration.
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// A readiness op that waited as `waiter` went away.
pub(crate) fn forget_waiter(fd: &SharedFd, kind: EpollKind, waiter: u32) {
    let (EpollKind::Ready(interest), Some(token)) = (kind, fd.epoll_token()) else {
        return;
    };
    let _ = context::try_with_driver(|d| {
        if let Some(e) = d.epoll() {
            e.forget_waiter(token, interest, waiter);
        }
    });
}
