//! BLPOP and BRPOP on a shard: the glue around the sans-I/O wait queues of
//! [`crate::blocking`].
//!
//! A blocking pop runs on the shard owning its keys (all of them: keys on several shards are
//! refused with the hash-tag hint, like other multi-key writes). When a list has an item it is
//! answered at once; otherwise the request waits here, addressed by its [`Origin`], and the
//! shard goes on serving everyone else. After every write the shard offers the written keys
//! that have waiters to them, the client blocked longest first, one item each (Redis's order).
//! Waiters past their deadline get the nil reply on the shard's sweep tick (every
//! `sweep_interval`, 100 ms by default: the same granularity as Redis's `hz 10`).
//!
//! A connection that closes cancels its waits: the shard it ran on remembers which of its
//! connections ever blocked and, when one closes, tells every shard to drop that
//! connection's waiters (through the shard's forwarding queues, after any job the connection
//! sent there, so a pop still on its way cannot block after its cancel), so no item is popped
//! for a client that is gone.
//!
//! Differences from Redis: a connection's requests after a blocked one still run (their
//! replies wait, in order, behind the blocked one's), where Redis reads nothing more from a
//! blocked client.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::atomic::Ordering;

use super::forward::Cancel;
use super::shard::Shard;
use super::sink::{Origin, SinkKey};
use crate::blocking::{parse_timeout, WaitQueues};
use crate::command::{Command, TypedCommand, TypedOp};
use crate::reply::Reply;
use bytes::Bytes;

/// Blocked requests per shard at most (a true bound: beyond it a pop that would block is
/// answered with an error instead).
const MAX_WAITERS: usize = 64 * 1024;

/// Who a waiter answers and which end it pops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client {
    origin: Origin,
    op: TypedOp,
}

pub(crate) struct Blocked {
    queues: RefCell<WaitQueues<Client>>,
    /// This shard's connections that sent a blocking pop (to any shard).
    blockers: RefCell<HashSet<SinkKey>>,
    /// This shard's share of `ServerShared::blocked_clients` (INFO's `blocked_clients`).
    published: Cell<usize>,
}

impl Default for Blocked {
    fn default() -> Blocked {
        Blocked {
            queues: RefCell::new(WaitQueues::new(MAX_WAITERS)),
            blockers: RefCell::new(HashSet::new()),
            published: Cell::new(0),
        }
    }
}

/// The blocking pop in `command`, if it is one.
fn blocking_op(command: &Command) -> Option<TypedOp> {
    match command {
        Command::Typed(TypedCommand {
            op: op @ (TypedOp::BLPop | TypedOp::BRPop),
            ..
        }) => Some(*op),
        _ => None,
    }
}

impl Blocked {
    /// Whether connection `sink` of this shard ever sent a blocking pop (it may be waiting in
    /// one now, here or on another shard).
    pub fn may_be_blocked(&self, sink: SinkKey) -> bool {
        self.blockers.borrow().contains(&sink)
    }

    /// On the connection's own shard, before routing: remember that `sink` may block.
    pub fn note_dispatch(&self, sink: SinkKey, command: &Command) {
        if blocking_op(command).is_some() {
            self.blockers.borrow_mut().insert(sink);
        }
    }
}

impl Shard {
    /// Runs `command` on the store (see [`Shard::execute_plain`]); a blocking pop that found
    /// nothing waits instead of answering, and a write serves the waiters on its keys.
    pub(crate) fn execute_blocking_aware(
        &self,
        origin: Origin,
        command: Command,
        now: u64,
    ) -> Option<Reply> {
        let Some(op) = blocking_op(&command) else {
            let written: Vec<Bytes> =
                if command.is_write() && !self.blocked.queues.borrow().is_empty() {
                    command
                        .keys()
                        .into_iter()
                        .map(Bytes::copy_from_slice)
                        .collect()
                } else {
                    Vec::new()
                };
            let reply = self.execute_store(origin, command, now);
            if self.txn.running() {
                // Served after the transaction's batch, as Redis serves them after EXEC.
                self.txn.note_written(written);
            } else {
                self.serve_written(&written, now);
            }
            return reply;
        };
        let Command::Typed(typed) = &command else {
            unreachable!("blocking_op matched a typed command")
        };
        let keys = typed.keys();
        let answers_now = self.with_store(|store| store.pop_would_answer(&keys, now));
        let deadline = typed.args.last().map(|timeout| parse_timeout(timeout, now));
        let deadline = match deadline {
            // Inside MULTI a pop that would block answers nil at once, as in Redis.
            Some(Ok(_)) if !answers_now && self.txn.running() => return Some(Reply::NullArray),
            Some(Ok(deadline)) if !answers_now => deadline,
            // An item, WRONGTYPE, or a bad timeout: the store answers (as Redis, in its order).
            _ => return self.execute_store(origin, command, now),
        };
        let keys: Vec<Bytes> = keys.into_iter().map(Bytes::copy_from_slice).collect();
        let blocked =
            self.blocked
                .queues
                .borrow_mut()
                .block(&keys, deadline, Client { origin, op });
        self.publish_blocked();
        match blocked {
            Ok(_) => None,
            Err(_) => Some(Reply::error(
                "ERR too many blocked clients on this shard; try again later",
            )),
        }
    }

    /// Brings INFO's `blocked_clients` up to date after this shard's queues changed.
    fn publish_blocked(&self) {
        let now = self.blocked.queues.borrow().len();
        let before = self.blocked.published.replace(now);
        let total = &self.shared.blocked_clients;
        if now > before {
            total.fetch_add(now - before, Ordering::Relaxed);
        } else {
            total.fetch_sub(before - now, Ordering::Relaxed);
        }
    }

    /// Offers each written key to its waiters.
    pub(crate) fn serve_written(&self, keys: &[Bytes], now: u64) {
        for key in keys {
            self.serve_waiters(key, now);
        }
    }

    /// Offers `key` to its waiters, longest blocked first, while it holds items.
    fn serve_waiters(&self, key: &[u8], now: u64) {
        loop {
            let next = {
                let queues = self.blocked.queues.borrow();
                queues
                    .first_on(key)
                    .and_then(|id| queues.get(id).map(|w| (id, w.client)))
            };
            let Some((id, client)) = next else {
                return;
            };
            if !self.with_store(|store| store.has_list_items(key, now)) {
                return;
            }
            self.blocked.queues.borrow_mut().remove(id);
            self.publish_blocked();
            let pop = Command::Typed(TypedCommand {
                op: client.op,
                args: vec![Bytes::copy_from_slice(key), Bytes::from_static(b"0")],
            });
            if let Some(reply) = self.execute_store(client.origin, pop, now) {
                self.deliver(client.origin, reply);
            }
        }
    }

    /// The sweep tick: waiters past their deadline get the nil reply.
    pub(crate) fn expire_waiters(&self, now: u64) {
        let expired = self.blocked.queues.borrow_mut().expire(now);
        if !expired.is_empty() {
            self.publish_blocked();
        }
        for waiter in expired {
            self.deliver(waiter.client.origin, Reply::NullArray);
        }
    }

    /// Connection `sink` of this shard closed: drop its waiters here and on every other shard.
    pub(crate) fn cancel_waits(&self, sink: SinkKey) {
        if !self.blocked.blockers.borrow_mut().remove(&sink) {
            return;
        }
        let from = self.id;
        self.drop_waiters_of(from, sink);
        for target in (0..self.count).filter(|&target| target != from) {
            self.forward
                .push_cancel(target, Cancel { shard: from, sink });
        }
    }

    /// A batch of cancels from another shard (runs from the inbox).
    pub(crate) fn cancel_all(&self, cancels: Vec<Cancel>) {
        for cancel in cancels {
            self.drop_waiters_of(cancel.shard, cancel.sink);
        }
    }

    fn drop_waiters_of(&self, shard: usize, sink: SinkKey) {
        self.blocked
            .queues
            .borrow_mut()
            .remove_clients(|client| client.origin.shard == shard && client.origin.sink == sink);
        self.publish_blocked();
    }
}
