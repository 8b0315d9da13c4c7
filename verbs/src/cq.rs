//! Completion queues and the completion channel that signals them (event mode).

use std::cell::Cell;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::{null_mut, NonNull};
use std::rc::Rc;

use crate::device::{Context, ContextInner};
use crate::error::{check_ret, last_errno, Result, VerbsError};
use crate::fd::set_nonblocking;
use crate::sys;
use crate::wc::WorkCompletion;

/// Events are acknowledged in batches: `ibv_ack_cq_events` takes a mutex, so acking each
/// event costs a lock round trip per wakeup for nothing.
const ACK_BATCH: u32 = 32;

/// Work completions fetched per `ibv_poll_cq` call.
const POLL_CHUNK: usize = 16;

/// A completion channel (`ibv_comp_channel`): a file descriptor that becomes readable when
/// an armed CQ gets a completion. The fd is non-blocking; register it with poll/epoll/
/// io_uring. Not `Send`.
#[derive(Clone)]
pub struct CompletionChannel {
    inner: Rc<ChannelInner>,
}

struct ChannelInner {
    ptr: NonNull<sys::ibv_comp_channel>,
    _ctx: Rc<ContextInner>,
}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_comp_channel; every CQ using it holds an Rc to this
        // inner, so none is attached any more.
        let rc = unsafe { sys::ibv_destroy_comp_channel(self.ptr.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_destroy_comp_channel failed");
        }
    }
}

/// Identifies a completion queue in a channel event (compare with `CompletionQueue::key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqKey(usize);

impl CqKey {
    pub(crate) fn from_ptr(cq: *mut sys::ibv_cq) -> CqKey {
        CqKey(cq as usize)
    }
}

impl CompletionChannel {
    /// `ibv_create_comp_channel`, with its fd set non-blocking.
    pub fn new(ctx: &Context) -> Result<Self> {
        // SAFETY: the context is open while we hold ctx.inner.
        let ch = unsafe { sys::ibv_create_comp_channel(ctx.as_ptr()) };
        let ptr = NonNull::new(ch).ok_or_else(|| VerbsError::last("ibv_create_comp_channel"))?;
        let channel = CompletionChannel {
            inner: Rc::new(ChannelInner {
                ptr,
                _ctx: ctx.inner.clone(),
            }),
        };
        set_nonblocking(channel.as_raw_fd())?;
        Ok(channel)
    }

    /// `ibv_get_cq_event`: which CQ fired, or `None` when no event is pending. The CQ must
    /// be re-armed with [`CompletionQueue::req_notify`] (then polled once more: completions
    /// that arrived before re-arming raise no event). Acknowledgement is batched and done
    /// by this crate.
    pub fn get_cq_event(&self) -> Result<Option<CqKey>> {
        let mut cq: *mut sys::ibv_cq = null_mut();
        let mut cq_context: *mut std::ffi::c_void = null_mut();
        // SAFETY: the channel is live; the out-pointers are locals.
        let rc =
            unsafe { sys::ibv_get_cq_event(self.inner.ptr.as_ptr(), &mut cq, &mut cq_context) };
        if rc != 0 {
            let errno = last_errno();
            if errno == libc::EAGAIN {
                return Ok(None);
            }
            return Err(VerbsError::Call {
                call: "ibv_get_cq_event",
                errno,
            });
        }
        // SAFETY: every CQ on this channel was made by CompletionQueue::new, which set
        // cq_context to its boxed EventCount. That CQ is still alive: destroying a CQ waits
        // for its events to be acknowledged, the kernel drops undelivered events of a
        // destroyed CQ, and CQ and channel are !Send, so no other thread can destroy it
        // between the read above and this line.
        let count = unsafe { &*(cq_context as *const EventCount) };
        count.unacked.set(count.unacked.get() + 1);
        if count.unacked.get() >= ACK_BATCH {
            // SAFETY: cq is the live CQ the event came from; we ack exactly what we got.
            unsafe { sys::ibv_ack_cq_events(cq, count.unacked.replace(0)) };
        }
        Ok(Some(CqKey(cq as usize)))
    }
}

impl std::os::fd::AsFd for CompletionChannel {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the channel owns this descriptor until it is destroyed, which cannot happen
        // while `self` is borrowed.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl AsRawFd for CompletionChannel {
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: the channel is live; fd is a plain field.
        unsafe { (*self.inner.ptr.as_ptr()).fd }
    }
}

impl std::fmt::Debug for CompletionChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionChannel")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

/// Completion events received but not yet acknowledged for one CQ. Boxed so that its
/// address (the CQ's `cq_context`) is stable.
struct EventCount {
    unacked: Cell<u32>,
}

/// A completion queue (`ibv_cq`). Cheap to clone (several QPs may share one: a shard polls
/// one CQ for all its connections). Not `Send`.
#[derive(Clone)]
pub struct CompletionQueue {
    pub(crate) inner: Rc<CqInner>,
}

pub(crate) struct CqInner {
    pub(crate) ptr: NonNull<sys::ibv_cq>,
    events: Box<EventCount>,
    _channel: Option<Rc<ChannelInner>>,
    _ctx: Rc<ContextInner>,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        let unacked = self.events.unacked.replace(0);
        // SAFETY: ptr came from ibv_create_cq; QPs using it hold an Rc to this inner, so
        // none is left. ibv_destroy_cq blocks until every delivered event is acknowledged,
        // hence the final ack first.
        unsafe {
            if unacked > 0 {
                sys::ibv_ack_cq_events(self.ptr.as_ptr(), unacked);
            }
            let rc = sys::ibv_destroy_cq(self.ptr.as_ptr());
            if rc != 0 {
                tracing::warn!(rc, "ibv_destroy_cq failed");
            }
        }
    }
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("key", &self.key())
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl CompletionQueue {
    /// `ibv_create_cq` with room for at least `cqe` completions, signalling `channel` (if
    /// any) when armed.
    pub fn new(ctx: &Context, cqe: u32, channel: Option<&CompletionChannel>) -> Result<Self> {
        let cqe = i32::try_from(cqe).map_err(|_| VerbsError::InvalidArgument("cqe"))?;
        let events = Box::new(EventCount {
            unacked: Cell::new(0),
        });
        let ch_ptr = channel.map_or(null_mut(), |c| c.inner.ptr.as_ptr());
        // SAFETY: context and channel are live; cq_context points to `events`, which the
        // CqInner owns for as long as the CQ exists.
        let cq = unsafe {
            sys::ibv_create_cq(
                ctx.as_ptr(),
                cqe,
                &*events as *const EventCount as *mut _,
                ch_ptr,
                0,
            )
        };
        let ptr = NonNull::new(cq).ok_or_else(|| VerbsError::last("ibv_create_cq"))?;
        Ok(CompletionQueue {
            inner: Rc::new(CqInner {
                ptr,
                events,
                _channel: channel.map(|c| c.inner.clone()),
                _ctx: ctx.inner.clone(),
            }),
        })
    }

    /// Moves up to `wcs.len()` completions into `wcs`; returns how many.
    pub fn poll(&self, wcs: &mut [WorkCompletion]) -> Result<usize> {
        let mut raw = [sys::ibv_wc::default(); POLL_CHUNK];
        let mut done = 0;
        while done < wcs.len() {
            let want = (wcs.len() - done).min(POLL_CHUNK);
            // SAFETY: the CQ is live; raw has room for `want` entries.
            let n =
                unsafe { sys::ibv_poll_cq(self.inner.ptr.as_ptr(), want as i32, raw.as_mut_ptr()) };
            if n < 0 {
                return Err(VerbsError::Call {
                    call: "ibv_poll_cq",
                    errno: -n,
                });
            }
            let n = n as usize;
            for (dst, src) in wcs[done..done + n].iter_mut().zip(&raw[..n]) {
                *dst = WorkCompletion::from_raw(src);
            }
            done += n;
            if n < want {
                break;
            }
        }
        Ok(done)
    }

    /// Arms the CQ: its channel fires on the next completion (`solicited_only`: only for
    /// solicited receives or errors).
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        // SAFETY: the CQ is live.
        let rc =
            unsafe { sys::ibv_req_notify_cq(self.inner.ptr.as_ptr(), i32::from(solicited_only)) };
        check_ret("ibv_req_notify_cq", rc)
    }

    /// Acknowledges events received so far now instead of at the next batch.
    pub fn ack_events(&self) {
        let n = self.inner.events.unacked.replace(0);
        if n > 0 {
            // SAFETY: the CQ is live and has exactly n delivered, unacknowledged events.
            unsafe { sys::ibv_ack_cq_events(self.inner.ptr.as_ptr(), n) };
        }
    }

    /// `ibv_resize_cq`: room for at least `cqe` completions (the device may round up; see
    /// [`capacity`](Self::capacity)). Completions already queued are kept.
    pub fn resize(&self, cqe: u32) -> Result<()> {
        let cqe = i32::try_from(cqe).map_err(|_| VerbsError::InvalidArgument("cqe"))?;
        // SAFETY: the CQ is live; resizing keeps its queued completions and its identity.
        let rc = unsafe { sys::ibv_resize_cq(self.inner.ptr.as_ptr(), cqe) };
        check_ret("ibv_resize_cq", rc)
    }

    /// The key [`CompletionChannel::get_cq_event`] reports for this CQ.
    pub fn key(&self) -> CqKey {
        CqKey(self.inner.ptr.as_ptr() as usize)
    }

    /// The actual capacity (may exceed the requested `cqe`).
    pub fn capacity(&self) -> u32 {
        // SAFETY: the CQ is live; cqe is a plain field.
        u32::try_from(unsafe { (*self.inner.ptr.as_ptr()).cqe }).unwrap_or(0)
    }
}
