//! Client-side bookkeeping of calls in flight on one connection.

use std::collections::BTreeSet;
use std::time::Instant;

use super::errors::{ResponseError, WindowFull};
use super::Status;
use crate::frame::{FrameHeader, FrameKind};

/// A call that left the pending set, with the token the caller stored for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    id: u64,
    token: T,
    deadline: Option<Instant>,
}

/// A correlation id is `sequence << SLOT_BITS | slot`: the call's slot in the table in the low
/// bits, so a reply finds its call by index (no hashing on the per-call path), and a sequence
/// number that grows by one per call above them, so a late reply to a call that ended never
/// matches the slot's next call (2^44 calls before the sequence wraps).
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// The window is capped at the number of slots an id can name.
const MAX_WINDOW: usize = 1 << SLOT_BITS;

/// Calls in flight on one connection: allocates correlation ids, bounds how
/// many may be outstanding, and resolves each call exactly once — by a reply,
/// by `expire`, by `fail_all`, or by `cancel` — so none can hang.
///
/// `T` is whatever the glue needs to wake the caller (a oneshot sender, a
/// waker slot index, ...); it is handed back when the call completes.
#[derive(Debug)]
pub struct ClientCalls<T> {
    /// Calls by slot (see [`SLOT_BITS`]); `None` for a free slot.
    slots: Vec<Option<Pending<T>>>,
    /// Free slots, reused last-freed first (a warm slot).
    free: Vec<usize>,
    in_flight: usize,
    /// Deadline order for `expire`/`next_deadline`; ids break ties.
    deadlines: BTreeSet<(Instant, u64)>,
    next_sequence: u64,
    window: usize,
}

impl<T> ClientCalls<T> {
    /// `window` is the maximum number of calls in flight; 0 is treated as 1 so
    /// the session can always make progress, and more than 2^20 as 2^20.
    pub fn new(window: usize) -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            deadlines: BTreeSet::new(),
            next_sequence: 1,
            window: window.clamp(1, MAX_WINDOW),
        }
    }

    /// Most calls in flight at once.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether another call may start now.
    pub fn has_capacity(&self) -> bool {
        self.in_flight < self.window
    }

    /// Whether the call `correlation_id` still waits for its reply.
    pub fn is_pending(&self, correlation_id: u64) -> bool {
        self.find(correlation_id).is_some()
    }

    /// Registers a new call and returns its correlation id, or hands `token`
    /// back when the window is full. A deadline already in the past is
    /// accepted; the next `expire` resolves it.
    pub fn try_start(&mut self, token: T, deadline: Option<Instant>) -> Result<u64, WindowFull<T>> {
        if !self.has_capacity() {
            return Err(WindowFull(token));
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let id = self.next_sequence << SLOT_BITS | slot as u64;
        // Never sequence 0, so no id is 0.
        self.next_sequence = (self.next_sequence + 1) & (u64::MAX >> SLOT_BITS);
        self.next_sequence = self.next_sequence.max(1);
        if let Some(at) = deadline {
            self.deadlines.insert((at, id));
        }
        self.slots[slot] = Some(Pending {
            id,
            token,
            deadline,
        });
        self.in_flight += 1;
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
            kind @ (FrameKind::Request
            | FrameKind::Cancel
            | FrameKind::StreamItem
            | FrameKind::Credit) => {
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

    /// The call a StreamItem frame belongs to; the call stays pending (its Response or Error
    /// ends it). A StreamItem for no pending call is `UnknownCorrelationId` (a late item of
    /// a stream the caller dropped); any other kind is `NotAResponse`.
    pub fn stream_item(&self, header: &FrameHeader) -> Result<&T, ResponseError> {
        let id = header.correlation_id;
        if header.kind != FrameKind::StreamItem {
            return Err(ResponseError::NotAResponse {
                kind: header.kind,
                correlation_id: id,
            });
        }
        let slot = self
            .find(id)
            .ok_or(ResponseError::UnknownCorrelationId(id))?;
        match &self.slots[slot] {
            Some(call) => Ok(&call.token),
            None => Err(ResponseError::UnknownCorrelationId(id)),
        }
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
            if let Some(call) = self.take(id) {
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
        self.free.clear();
        self.in_flight = 0;
        let mut failed: Vec<Completed<T>> = std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .map(|call| Completed {
                correlation_id: call.id,
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
        let call = self.take(id)?;
        if let Some(at) = call.deadline {
            self.deadlines.remove(&(at, id));
        }
        Some(call.token)
    }

    /// The slot of pending call `id`.
    fn find(&self, id: u64) -> Option<usize> {
        let slot = (id & SLOT_MASK) as usize;
        let call = self.slots.get(slot)?.as_ref()?;
        (call.id == id).then_some(slot)
    }

    /// Frees the slot of pending call `id` (its deadline entry is the caller's).
    fn take(&mut self, id: u64) -> Option<Pending<T>> {
        let slot = self.find(id)?;
        self.free.push(slot);
        self.in_flight -= 1;
        self.slots[slot].take()
    }
}
