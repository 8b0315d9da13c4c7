//! Readiness of descriptors the runtime does not own (an RDMA completion channel, an
//! rdma_cm event channel), on either backend: a multishot poll (or one poll per wake-up) on
//! io_uring, an edge-triggered registration in the shard's epoll set on epoll.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::epoll::Interest;
use super::op::poll_add::PollAdd;
use super::op::Op;
use super::Driver;
use crate::shard::context;

/// Repeated readiness of one descriptor (see `io::ReadableEvents`).
pub(crate) enum Readable {
    Uring {
        /// The armed multishot poll, by its driver slot.
        armed: Option<usize>,
        /// The single-shot poll armed where the kernel has no multishot poll.
        single: Option<Op<PollAdd>>,
        multishot: bool,
        arms: u64,
    },
    Epoll {
        /// The registration, once made (one serves every wake-up).
        token: Option<u64>,
        waiter: u32,
    },
}

impl Readable {
    pub(crate) fn new() -> Readable {
        context::with_driver(|d| match d {
            Driver::Uring(u) => Readable::Uring {
                armed: None,
                single: None,
                multishot: u.features.poll_multishot,
                arms: 0,
            },
            Driver::Epoll(_) => Readable::Epoll {
                token: None,
                waiter: 0,
            },
        })
    }

    /// Registrations made: polls armed on io_uring, 1 on epoll once it waited.
    pub(crate) fn arms(&self) -> u64 {
        match self {
            Readable::Uring { arms, .. } => *arms,
            Readable::Epoll { token, .. } => u64::from(token.is_some()),
        }
    }

    /// Whether one registration serves every wake-up.
    pub(crate) fn is_multishot(&self) -> bool {
        match self {
            Readable::Uring { multishot, .. } => *multishot,
            Readable::Epoll { .. } => true,
        }
    }

    /// Ready once `fd` was readable since the last time this returned ready.
    pub(crate) fn poll_readable(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        match self {
            Readable::Uring {
                armed,
                single,
                multishot,
                arms,
            } => {
                if !*multishot {
                    let op = single.get_or_insert_with(|| {
                        *arms += 1;
                        Op::submit(PollAdd::readable(fd))
                    });
                    let result = std::task::ready!(Pin::new(op).poll(cx));
                    *single = None;
                    return Poll::Ready(result.map(|_| ()));
                }
                let key = match armed {
                    Some(key) => *key,
                    None => {
                        *arms += 1;
                        let key = context::with_driver(|d| {
                            d.uring().map(|u| u.submit_poll_multishot(fd))
                        })
                        .ok_or(io::ErrorKind::Unsupported)?;
                        *armed = Some(key);
                        key
                    }
                };
                let next =
                    context::with_driver(|d| d.uring().and_then(|u| u.poll_multi(key, cx.waker())));
                let Some((result, flags)) = next else {
                    return Poll::Pending;
                };
                if !io_uring::cqueue::more(flags) {
                    // Ended (an error, or the kernel let it go): the next call arms a new one.
                    *armed = None;
                }
                if result < 0 {
                    if result == -libc::EINVAL {
                        // A kernel without multishot poll: single-shot polls from now on.
                        *multishot = false;
                    }
                    return Poll::Ready(Err(io::Error::from_raw_os_error(-result)));
                }
                Poll::Ready(Ok(()))
            }
            Readable::Epoll { token, waiter } => context::with_driver(|d| {
                let epoll = d.epoll().ok_or(io::ErrorKind::Unsupported)?;
                let t = match *token {
                    Some(t) => t,
                    None => {
                        let t = epoll.register_readable(fd)?;
                        *token = Some(t);
                        t
                    }
                };
                if epoll.poll_ready(t, Interest::Read, waiter, cx.waker()) {
                    // Taken: the next wait needs the next event.
                    epoll.clear_readable(t);
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                }
            }),
        }
    }

    /// Stop watching `fd` (still open: called before it closes).
    pub(crate) fn stop(&mut self, fd: RawFd) {
        match self {
            Readable::Uring { armed, single, .. } => {
                drop(single.take());
                if let Some(key) = armed.take() {
                    // No driver (off the shard, or at its teardown): the slot goes with it.
                    let _ = context::try_with_driver(|d| {
                        if let Some(u) = d.uring() {
                            u.abandon_multi(key)
                        }
                    });
                }
            }
            Readable::Epoll { token, .. } => {
                if let Some(t) = token.take() {
                    let _ = context::try_with_driver(|d| {
                        if let Some(e) = d.epoll() {
                            e.deregister(fd, t)
                        }
                    });
                }
            }
        }
    }
}

/// Resolve once `fd` is readable (level: at once if it is readable now).
pub(crate) async fn wait_readable(fd: &impl AsFd) -> io::Result<()> {
    let raw = fd.as_fd().as_raw_fd();
    let epoll = context::with_driver(|d| d.epoll().is_some());
    if !epoll {
        return Op::submit(PollAdd::readable(raw)).await.map(|_| ());
    }
    let mut wait = EpollWait {
        raw,
        dup: None,
        token: None,
        waiter: 0,
    };
    std::future::poll_fn(|cx| wait.poll(fd, cx)).await
}

/// One wait for readability on epoll: registered for the wait, out of the set when it ends
/// (the descriptor is only borrowed).
struct EpollWait {
    raw: RawFd,
    /// A duplicate registered instead when the descriptor is in the set already.
    dup: Option<OwnedFd>,
    token: Option<u64>,
    waiter: u32,
}

impl EpollWait {
    fn poll(&mut self, fd: &impl AsFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = context::with_driver(|d| {
            let epoll = d.epoll().ok_or(io::ErrorKind::Unsupported)?;
            let token = match self.token {
                Some(t) => t,
                None => {
                    let t = match epoll.register_readable(self.raw) {
                        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                            // Watched already (by a ReadableEvents of the same descriptor):
                            // a duplicate is another entry of the set.
                            let dup = fd.as_fd().try_clone_to_owned()?;
                            self.raw = dup.as_raw_fd();
                            self.dup = Some(dup);
                            epoll.register_readable(self.raw)?
                        }
                        other => other?,
                    };
                    self.token = Some(t);
                    t
                }
            };
            Ok::<_, io::Error>(epoll.poll_ready(
                token,
                Interest::Read,
                &mut self.waiter,
                cx.waker(),
            ))
        });
        match result {
            Ok(false) => Poll::Pending,
            Ok(true) => {
                self.waiter = 0;
                self.stop();
                Poll::Ready(Ok(()))
            }
            Err(e) => {
                self.stop();
                Poll::Ready(Err(e))
            }
        }
    }

    fn stop(&mut self) {
        if let Some(t) = self.token.take() {
            let raw = self.raw;
            let _ = context::try_with_driver(|d| {
                if let Some(e) = d.epoll() {
                    e.deregister(raw, t)
                }
            });
        }
        self.dup = None;
    }
}

impl Drop for EpollWait {
    fn drop(&mut self) {
        self.stop();
    }
}
