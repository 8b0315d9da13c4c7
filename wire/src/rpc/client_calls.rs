//! Client-side bookkeeping of calls in flight on one connection.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use super::errors::{ResponseError, WindowFull};
use super::Status;
use crate::frame::{FrameHeader, FrameKind};

/// A call that left the pending set, with the token the caller stored for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed<T> {
    /// The call's correlation id.
    pub correlation_id: u64,
    /// What the caller stored with the call.
    pub token: T,
    /// `Ok` for a Response, the failure otherwise (Error frame, timeout, cancel, connection lost).
    pub result: Result<(), Status>,
}

#[derive(Debug)]
struct Pending<T> {
    token: T,
    deadline: Option<Instant>,
}

/// Calls in flight on one connection: allocates correlation ids, bounds how
/// many may be outstanding, and resolves each call exactly once — by a reply,
/// by `expire`, by `fail_all`, or by `cancel` — so none can hang.
///
/// `T` is whatever the glue needs to wake the caller (a oneshot sender, a
/// waker slot index, ...); it is handed back when the call completes.
#[derive(Debug)]
pub struct ClientCalls<T> {
    pending: HashMap<u64, Pending<T>>,
    /// Deadline order for `expire`/`next_deadline`; ids break ties.
    deadlines: BTreeSet<(Instant, u64)>,
    next_id: u64,
    window: usize,
}

impl<T> ClientCalls<T> {
    /// `window` is the maximum number of calls in flight; 0 is treated as 1 so
    /// the session can always make progress.
    pub fn new(window: usize) -> Self {
        Self {
            pending: HashMap::new(),
            deadlines: BTreeSet::new(),
            next_id: 1,
            window: window.max(1),
        }
    }

    /// Most calls in flight at once.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Whether another call may start now.
    pub fn has_capacity(&self) -> bool {
        self.pending.len() < self.window
    }

    /// Whether the call `correlation_id` still waits for its reply.
    pub fn is_pending(&self, correlation_id: u64) -> bool {
        self.pending.contains_key(&correlation_id)
    }

    /// Registers a new call and returns its correlation id, or hands `token`
    /// back when the window is full. A deadline already in the past is
    /// accepted; the next `expire` resolves it.
    pub fn try_start(&mut self, token: T, deadline: Option<Instant>) -> Result<u64, WindowFull<T>> {
        if !self.has_capacity() {
            return Err(WindowFull(token));
        }
        let id = self.allocate_id();
        if let Some(at) = deadline {
            self.deadlines.insert((at, id));
        }
        self.pending.insert(id, Pending { token, deadline });
        Ok(id)
    }

    /// Resolves the call a Response or Error frame answers. A Response with
    /// status Ok succeeds; any other status fails the call with that [`Status`].
    pub fn complete(&mut self, header: &FrameHeader) -> Result<Completed<T>, ResponseError> {
        let id = header.correlation_id;
        let result = match header.kind {
            FrameKind::Response | FrameKind::Error => match Status::from_reply(header) {
                None => Ok(()),
                Some(status) => Err(status),
            },
            kind @ (FrameKind::Request | FrameKind::Cancel) => {
                return Err(ResponseError::NotAResponse {
                    kind,
                    correlation_id: id,
                })
            }
        };
        let token = self
            .remove(id)
            .ok_or(ResponseError::UnknownCorrelationId(id))?;
        Ok(Completed {
            correlation_id: id,
            token,
            result,
        })
    }

    /// Forgets a call the caller gave up on (e.g. its future was dropped); a
    /// late reply then surfaces as `UnknownCorrelationId`. Sending a Cancel
    /// frame to the server is the caller's choice.
    pub fn cancel(&mut self, correlation_id: u64) -> Option<T> {
        self.remove(correlation_id)
    }

    /// Removes and returns, in deadline order, every call whose deadline is at
    /// or before `now`, each failed with `DeadlineExceeded`.
    pub fn expire(&mut self, now: Instant) -> Vec<Completed<T>> {
        let mut expired = Vec::new();
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(call) = self.pending.remove(&id) {
                expired.push(Completed {
                    correlation_id: id,
                    token: call.token,
                    result: Err(Status::DeadlineExceeded),
                });
            }
        }
        expired
    }

    /// Fails every pending call with `reason` (e.g. the connection dropped),
    /// in correlation-id order.
    pub fn fail_all(&mut self, reason: Status) -> Vec<Completed<T>> {
        self.deadlines.clear();
        let mut failed: Vec<Completed<T>> = self
            .pending
            .drain()
            .map(|(id, call)| Completed {
                correlation_id: id,
                token: call.token,
                result: Err(reason.clone()),
            })
            .collect();
        failed.sort_unstable_by_key(|c| c.correlation_id);
        failed
    }

    /// The earliest deadline among pending calls: when to next call `expire`.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(at, _)| at)
    }

    fn remove(&mut self, id: u64) -> Option<T> {
        let call = self.pending.remove(&id)?;
        if let Some(at) = call.deadline {
            self.deadlines.remove(&(at, id));
        }
        Some(call.token)
    }

    fn allocate_id(&mut self) -> u64 {
        // Skipping ids still in use only matters after 2^64 calls wrap, but it
        // keeps uniqueness unconditional. The window bounds the loop.
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            if !self.pending.contains_key(&id) {
                return id;
            }
        }
    }
}
