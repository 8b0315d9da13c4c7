//! Asynchronous events of a device context (`ibv_get_async_event`): errors of a queue pair,
//! CQ or shared receive queue, port state changes, and the shared receive queue's low-water
//! mark. The context's `async_fd` is set non-blocking so a shard can wait on it through its
//! ring and drain it.

use std::os::fd::RawFd;

use crate::cq::CqKey;
use crate::device::Context;
use crate::error::{last_errno, Result, VerbsError};
use crate::srq::SrqKey;
use crate::sys;

/// `ibv_event_type`, with the element it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AsyncEvent {
    /// The shared receive queue has fewer posted receives than its armed limit (the limit
    /// is disarmed until [`SharedReceiveQueue::arm_limit`](crate::SharedReceiveQueue::arm_limit)
    /// is called again).
    SrqLimitReached(SrqKey),
    /// The shared receive queue failed (it takes no more receives).
    SrqError(SrqKey),
    /// A queue pair attached to a shared receive queue went to the error state and will take
    /// no more receives from it: it may be destroyed without losing a posted buffer.
    QpLastWqeReached {
        /// The queue pair's number.
        qp_num: u32,
    },
    /// A queue pair failed (fatal, request or access error).
    QpError {
        /// The queue pair's number.
        qp_num: u32,
        /// The raw `ibv_event_type`.
        kind: u32,
    },
    /// The first message arrived on a queue pair not yet marked connected.
    CommEstablished {
        /// The queue pair's number.
        qp_num: u32,
    },
    /// A completion queue overran or failed.
    CqError(CqKey),
    /// The port (its number) became active.
    PortActive(u8),
    /// The port (its number) went down.
    PortError(u8),
    /// The device failed: every object on it is unusable.
    DeviceFatal,
    /// Anything else (`ibv_event_type` value).
    Other(u32),
}

impl Context {
    /// The context's async event fd, made non-blocking.
    pub fn async_fd(&self) -> Result<RawFd> {
        // SAFETY: the context is open; async_fd is a plain field.
        let fd = unsafe { (*self.as_ptr()).async_fd };
        crate::fd::set_nonblocking(fd)?;
        Ok(fd)
    }

    /// [`async_fd`](Self::async_fd), borrowed from the context (for waiting on it).
    pub fn async_event_fd(&self) -> Result<std::os::fd::BorrowedFd<'_>> {
        let fd = self.async_fd()?;
        // SAFETY: the context owns this descriptor until it is closed, which cannot happen
        // while `self` is borrowed.
        Ok(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
    }

    /// The next asynchronous event, already acknowledged, or `None` when none is pending
    /// (call [`async_fd`](Self::async_fd) first so this never blocks).
    pub fn get_async_event(&self) -> Result<Option<AsyncEvent>> {
        let mut raw = std::mem::MaybeUninit::<sys::ibv_async_event>::zeroed();
        // SAFETY: the context is open; raw is a properly sized out-parameter.
        let rc = unsafe { sys::ibv_get_async_event(self.as_ptr(), raw.as_mut_ptr()) };
        if rc != 0 {
            let errno = last_errno();
            if errno == libc::EAGAIN {
                return Ok(None);
            }
            return Err(VerbsError::Call {
                call: "ibv_get_async_event",
                errno,
            });
        }
        // SAFETY: ibv_get_async_event succeeded and filled the event.
        let mut raw = unsafe { raw.assume_init() };
        let event = decode(&raw);
        // SAFETY: the event came from ibv_get_async_event and is acknowledged once, here,
        // after everything we need was copied out of it (destroying the object it names
        // waits for this acknowledgement).
        unsafe { sys::ibv_ack_async_event(&mut raw) };
        Ok(Some(event))
    }
}

fn decode(raw: &sys::ibv_async_event) -> AsyncEvent {
    use sys::ibv_event_type::*;
    // The event type says which union member the provider set, and the object it points to
    // stays alive until the event is acknowledged; each reader below is used only for the
    // event types that set its member.
    // SAFETY: called only for QP events, whose `qp` is set and alive (see above).
    let qp_num = || unsafe { (*raw.element.qp).qp_num };
    // SAFETY: called only for SRQ events, which set `srq`.
    let srq = || unsafe { raw.element.srq };
    // SAFETY: called only for CQ events, which set `cq`.
    let cq = || unsafe { raw.element.cq };
    // SAFETY: called only for port events, which set `port_num`.
    let port = || unsafe { raw.element.port_num };
    match raw.event_type {
        IBV_EVENT_SRQ_LIMIT_REACHED => AsyncEvent::SrqLimitReached(SrqKey::from_ptr(srq())),
        IBV_EVENT_SRQ_ERR => AsyncEvent::SrqError(SrqKey::from_ptr(srq())),
        IBV_EVENT_QP_LAST_WQE_REACHED => AsyncEvent::QpLastWqeReached { qp_num: qp_num() },
        IBV_EVENT_QP_FATAL | IBV_EVENT_QP_REQ_ERR | IBV_EVENT_QP_ACCESS_ERR => {
            AsyncEvent::QpError {
                qp_num: qp_num(),
                kind: raw.event_type,
            }
        }
        IBV_EVENT_COMM_EST => AsyncEvent::CommEstablished { qp_num: qp_num() },
        IBV_EVENT_CQ_ERR => AsyncEvent::CqError(CqKey::from_ptr(cq())),
        IBV_EVENT_PORT_ACTIVE => AsyncEvent::PortActive(u8::try_from(port()).unwrap_or(0)),
        IBV_EVENT_PORT_ERR => AsyncEvent::PortError(u8::try_from(port()).unwrap_or(0)),
        IBV_EVENT_DEVICE_FATAL => AsyncEvent::DeviceFatal,
        other => AsyncEvent::Other(other),
    }
}
