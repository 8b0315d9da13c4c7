//! BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX and BZMPOP on a shard: the
//! glue around the sans-I/O wait queues of [`crate::blocking`]. A move waits on its source;
//! serving it runs the move, whose destination may then serve a waiter of its own. A sorted
//! set pop is served only by a sorted set (a list pushed to its key leaves it waiting).
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
//! for a client that is gone. Until every shard has applied the cancel, the close is also
//! listed process-wide (`ServerShared::cancelling`): a push that another connection sent
//! after CLIENT KILL answered can overtake the cancel on its way to the key's shard, which
//! then drops the waiter instead of serving it.
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
use crate::blocking::{parse_timeout, Deadline, WaitQueues};
use crate::command::{mpop_args, zmpop_args, Command, ListEnd, TypedCommand, TypedOp};
use crate::reply::Reply;
use bytes::Bytes;

/// Blocked requests per shard at most (a true bound: beyond it a pop that would block is
/// answered with an error instead).
const MAX_WAITERS: usize = 64 * 1024;

/// Who a waiter answers and what it runs when served: BLPOP/BRPOP pop the key that got an
/// item, BLMPOP pops up to its COUNT from it (as LMPOP); BLMOVE/BRPOPLPUSH run as written
/// (their one source key is the one served).
#[derive(Debug, Clone)]
pub(crate) struct Client {
    origin: Origin,
    op: TypedOp,
    args: Vec<Bytes>,
    /// A program waiting for its keys on several shards: served by waking it (it then pops
    /// under the locks of all its shards), not by a pop here.
    wakes: bool,
}

impl Client {
    fn moves(&self) -> bool {
        matches!(self.op, TypedOp::BLMove | TypedOp::BRPopLPush)
    }

    /// Whether the waiter pops a sorted set (BZPOPMIN, BZPOPMAX, BZMPOP), not a list.
    fn pops_zset(&self) -> bool {
        matches!(
            self.op,
            TypedOp::BZPopMin | TypedOp::BZPopMax | TypedOp::BZMPop
        )
    }

    /// The command that serves this waiter from `key`, with no timeout left.
    fn serving(&self, key: &[u8]) -> Command {
        // ZMPOP/LMPOP 1 key end COUNT n: the same reply, from the served key only.
        let served = match self.op {
            TypedOp::BZMPop => zmpop_args(&self.args[1..])
                .ok()
                .map(|a| (TypedOp::ZMPop, a.end, ["min", "max"], a.count)),
            TypedOp::BLMPop => mpop_args(&self.args[1..])
                .ok()
                .map(|a| (TypedOp::LMPop, a.end, ["left", "right"], a.count)),
            _ => None,
        };
        if let Some((op, end, names, count)) = served {
            let end = match end {
                ListEnd::Left => names[0],
                ListEnd::Right => names[1],
            };
            let args = vec![
                Bytes::from_static(b"1"),
                Bytes::copy_from_slice(key),
                Bytes::from_static(end.as_bytes()),
                Bytes::from_static(b"COUNT"),
                Bytes::from(count.to_string()),
            ];
            return Command::Typed(TypedCommand { op, args });
        }
        let args = if self.moves() {
            let mut args = self.args.clone();
            if let Some(timeout) = args.last_mut() {
                *timeout = Bytes::from_static(b"0");
            }
            args
        } else {
            vec![Bytes::copy_from_slice(key), Bytes::from_static(b"0")]
        };
        Command::Typed(TypedCommand { op: self.op, args })
    }
}

/// What a blocking command answers when it times out: a nil array, for the moves too
/// (Redis 7.0's `replyToBlockedClientTimedOut`).
pub(crate) fn timed_out() -> Reply {
    Reply::NullArray
}

/// What a blocking command answers inside MULTI when it would wait: a nil array for the
/// pops, a nil bulk string for the moves (Redis 7.0's `blmoveGenericCommand`).
fn would_block_in_multi(op: TypedOp) -> Reply {
    match op {
        TypedOp::BLMove | TypedOp::BRPopLPush => Reply::NullBulk,
        _ => Reply::NullArray,
    }
}

pub(crate) struct Blocked {
    queues: RefCell<WaitQueues<Client>>,
    /// This shard's connections that sent a blocking pop (to any shard).
    blockers: RefCell<HashSet<SinkKey>>,
    /// This shard's share of `ServerShared::blocked_clients` (INFO's `blocked_clients`).
    published: Cell<usize>,
    /// Wake-ups of programs blocked over several shards queued here: not counted in
    /// `blocked_clients` (the program counts itself once, on its own shard).
    wakers: Cell<usize>,
}

impl Default for Blocked {
    fn default() -> Blocked {
        Blocked {
            queues: RefCell::new(WaitQueues::new(MAX_WAITERS)),
            blockers: RefCell::new(HashSet::new()),
            published: Cell::new(0),
            wakers: Cell::new(0),
        }
    }
}

/// The blocking pop in `command`, if it is one.
fn blocking_op(command: &Command) -> Option<TypedOp> {
    match command {
        Command::Typed(typed) if typed.blocks() => Some(typed.op),
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
    ///
    /// Inlined into the layers above (a call per layer copied the whole command again); the
    /// blocking commands' own path is [`Self::execute_blocking`].
    #[inline]
    pub(crate) fn execute_blocking_aware(
        &self,
        origin: Origin,
        command: Command,
        now: u64,
    ) -> Option<Reply> {
        match blocking_op(&command) {
            None => self.execute_not_blocking(origin, command, now),
            Some(op) => self.execute_blocking(origin, command, op, now),
        }
    }

    /// A command that never waits: runs, then serves the pops waiting on the keys it wrote.
    #[inline]
    fn execute_not_blocking(&self, origin: Origin, command: Command, now: u64) -> Option<Reply> {
        let flush = matches!(
            &command,
            Command::FlushAll
                | Command::Key(crate::command::KeyCommand {
                    op: crate::command::KeyOp::FlushDb,
                    ..
                })
        );
        let written: Vec<Bytes> = if self.blocked.queues.borrow().is_empty() {
            Vec::new()
        } else if flush {
            // Every key went: the group reads blocked here fail (Redis 7.0 unblocks
            // them on a flush).
            self.blocked.queues.borrow().keys()
        } else if command.is_write() {
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
        reply
    }

    /// A blocking command: answers now when it can, otherwise waits on its keys.
    fn execute_blocking(
        &self,
        origin: Origin,
        command: Command,
        op: TypedOp,
        now: u64,
    ) -> Option<Reply> {
        let Command::Typed(typed) = &command else {
            unreachable!("blocking_op matched a typed command")
        };
        if op.is_stream_read() {
            return self.stream_read_or_wait(origin, typed.clone(), now);
        }
        let mut keys = typed.keys();
        if matches!(op, TypedOp::BLMove | TypedOp::BRPopLPush) {
            // A move waits on its source only.
            keys.truncate(1);
        }
        // BLMOVE's and BLMPOP's syntax errors come before any waiting (the store reports
        // them).
        let syntax_ok = match op {
            TypedOp::BLMove => typed.args[2..4]
                .iter()
                .all(|end| end.eq_ignore_ascii_case(b"left") || end.eq_ignore_ascii_case(b"right")),
            TypedOp::BLMPop => mpop_args(&typed.args[1..]).is_ok(),
            TypedOp::BZMPop => zmpop_args(&typed.args[1..]).is_ok(),
            _ => true,
        };
        let answers_now = !syntax_ok || self.with_store(|store| store.pop_would_answer(&keys, now));
        // BLMPOP's and BZMPOP's timeout comes first, the others' last.
        let timeout = match op {
            TypedOp::BLMPop | TypedOp::BZMPop => typed.args.first(),
            _ => typed.args.last(),
        };
        let deadline = timeout.map(|timeout| parse_timeout(timeout, now));
        let deadline = match deadline {
            // Inside MULTI a pop that would block answers nil at once, as in Redis.
            Some(Ok(_)) if !answers_now && self.txn.running() => {
                return Some(would_block_in_multi(op))
            }
            Some(Ok(deadline)) if !answers_now => deadline,
            // An item, WRONGTYPE, or a bad timeout: the store answers (as Redis, in its order).
            _ => return self.execute_store(origin, command, now),
        };
        let keys: Vec<Bytes> = keys.into_iter().map(Bytes::copy_from_slice).collect();
        let client = Client {
            origin,
            op,
            args: typed.args.clone(),
            wakes: false,
        };
        let blocked = self
            .blocked
            .queues
            .borrow_mut()
            .block(&keys, deadline, client);
        self.publish_blocked();
        match blocked {
            Ok(_) => None,
            Err(_) => Some(Reply::error(
                "ERR too many blocked clients on this shard; try again later",
            )),
        }
    }

    /// XREAD / XREADGROUP with BLOCK: answered at once when something is there (or inside
    /// MULTI, nil), otherwise waiting with its `$` IDs fixed now (see
    /// [`crate::store::Store::stream_read_to_wait`]).
    fn stream_read_or_wait(&self, origin: Origin, typed: TypedCommand, now: u64) -> Option<Reply> {
        let waiting = self.with_store(|store| store.stream_read_to_wait(&typed));
        let block = crate::store::stream_read_args(&typed.args, typed.op).and_then(|a| a.block);
        let reply = self.execute_store(origin, Command::Typed(typed), now)?;
        if reply != Reply::NullArray || self.txn.running() {
            return Some(reply);
        }
        let deadline = match block.map(|arg| crate::blocking::parse_timeout_ms(&arg, now)) {
            Some(Ok(deadline)) => deadline,
            _ => return Some(reply),
        };
        let keys: Vec<Bytes> = waiting
            .keys()
            .into_iter()
            .map(Bytes::copy_from_slice)
            .collect();
        let client = Client {
            origin,
            op: waiting.op,
            args: waiting.args,
            wakes: false,
        };
        let blocked = (self.blocked.queues.borrow_mut()).block(&keys, deadline, client);
        self.publish_blocked();
        match blocked {
            Ok(_) => None,
            Err(_) => Some(Reply::error(
                "ERR too many blocked clients on this shard; try again later",
            )),
        }
    }

    /// Serves the stream reads waiting on `key` that can go on now: every one of them, in
    /// arrival order (Redis's `serveClientsBlockedOnStreamKey`: one that cannot is passed
    /// over, not an end to the round).
    fn serve_stream_waiters(&self, key: &[u8], now: u64) {
        let waiting = self.blocked.queues.borrow().waiting_on(key);
        for id in waiting {
            let client = {
                let queues = self.blocked.queues.borrow();
                match queues.get(id) {
                    Some(waiter) if waiter.client.op.is_stream_read() && !waiter.client.wakes => {
                        waiter.client.clone()
                    }
                    _ => continue,
                }
            };
            let typed = TypedCommand {
                op: client.op,
                args: client.args.clone(),
            };
            let ready = self.with_store(|store| store.stream_ready(&typed, key, now));
            let reply = match ready {
                crate::store::StreamReady::Wait => continue,
                crate::store::StreamReady::Fail(reply) => Some(reply),
                crate::store::StreamReady::Serve => {
                    let served = crate::store::stream_served_from(&typed, key);
                    self.blocked.queues.borrow_mut().remove(id);
                    self.publish_blocked();
                    let reply = self.execute_store(client.origin, Command::Typed(served), now);
                    if let Some(reply) = reply {
                        self.deliver(client.origin, reply);
                    }
                    continue;
                }
            };
            self.blocked.queues.borrow_mut().remove(id);
            self.publish_blocked();
            if let Some(reply) = reply {
                self.deliver(client.origin, reply);
            }
        }
    }

    /// Brings INFO's `blocked_clients` up to date after this shard's queues changed.
    fn publish_blocked(&self) {
        let now = (self.blocked.queues.borrow().len()).saturating_sub(self.blocked.wakers.get());
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
        self.serve_stream_waiters(key, now);
        loop {
            // Who the key can serve now: a sorted set its sorted-set pops, a list its list
            // pops (in arrival order past the others, as Redis serves each blocked client from
            // a key of its type). A key that became another type serves nobody: its waiters
            // keep waiting, as in Redis (programs blocked over several shards too).
            let (zset_ready, list_ready, answers) = self.with_store(|store| {
                (
                    store.has_zset_items(key, now),
                    store.has_list_items(key, now),
                    store.pop_would_answer(&[key], now),
                )
            });
            let next = {
                let queues = self.blocked.queues.borrow();
                let ready = |waiter: &crate::blocking::Waiter<Client>| match &waiter.client {
                    // Served by `serve_stream_waiters`.
                    client if client.op.is_stream_read() && !client.wakes => false,
                    client if client.pops_zset() => zset_ready,
                    client if client.wakes => answers,
                    _ => list_ready,
                };
                queues
                    .first_ready_on(key, ready)
                    .and_then(|id| queues.get(id).map(|w| (id, w.client.clone())))
            };
            let Some((id, client)) = next else {
                return;
            };
            let origin = client.origin;
            if origin.shard != self.id && self.shared.cancelling.is_gone(origin.shard, origin.sink)
            {
                // Its connection closed; the cancel is on its way: drop the waiter now.
                self.blocked.queues.borrow_mut().remove(id);
                self.publish_blocked();
                continue;
            }
            if client.wakes {
                // The item stays for the program, which comes to take it under its locks;
                // the waiters behind it get the next write's items.
                self.blocked.queues.borrow_mut().remove(id);
                self.blocked.wakers.set(self.blocked.wakers.get() - 1);
                self.publish_blocked();
                self.deliver(client.origin, Reply::Integer(1));
                return;
            }
            self.blocked.queues.borrow_mut().remove(id);
            self.publish_blocked();
            let served = client.serving(key);
            if let Some(reply) = self.execute_store(client.origin, served, now) {
                self.deliver(client.origin, reply);
            }
            // A move fills its destination, which may have waiters of its own (each round
            // serves one waiter, so a chain of moves ends).
            if client.moves() {
                if let Some(destination) = client.args.get(1) {
                    if destination.as_ref() != key {
                        self.serve_waiters(destination, now);
                    }
                }
            }
        }
    }

    /// A program blocked on keys of several shards waits here on `keys` (without deadline:
    /// the program keeps its own) until one gets items.
    pub(crate) fn block_waker(&self, origin: Origin, keys: Vec<Bytes>, zset: bool, now: u64) {
        let ready = self.with_store(|store| {
            let keys: Vec<&[u8]> = keys.iter().map(|key| &key[..]).collect();
            store.waker_ready(&keys, now)
        });
        if ready {
            self.deliver(origin, Reply::Integer(1));
            return;
        }
        let client = Client {
            origin,
            op: if zset {
                TypedOp::BZPopMin
            } else {
                TypedOp::BLPop
            },
            args: Vec::new(),
            wakes: true,
        };
        let blocked = (self.blocked.queues.borrow_mut()).block(&keys, Deadline::Never, client);
        if blocked.is_ok() {
            self.blocked.wakers.set(self.blocked.wakers.get() + 1);
        }
        self.publish_blocked();
        if blocked.is_err() {
            self.deliver(
                origin,
                Reply::error("ERR too many blocked clients on this shard; try again later"),
            );
        }
    }

    /// The program at `origin` no longer waits: its wake-ups here go.
    pub(crate) fn unblock_waker(&self, origin: Origin) {
        let removed = (self.blocked.queues.borrow_mut()).remove_clients(|client| {
            client.origin.shard == origin.shard && client.origin.sink == origin.sink
        });
        self.blocked
            .wakers
            .set(self.blocked.wakers.get().saturating_sub(removed));
        self.publish_blocked();
    }

    /// A program on this shard blocked over several shards: counted once in INFO's
    /// `blocked_clients` while it waits.
    pub(crate) fn program_blocked(&self, blocked: bool) {
        let total = &self.shared.blocked_clients;
        if blocked {
            total.fetch_add(1, Ordering::Relaxed);
        } else {
            total.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The sweep tick: waiters past their deadline get the nil reply.
    pub(crate) fn expire_waiters(&self, now: u64) {
        let expired = self.blocked.queues.borrow_mut().expire(now);
        if !expired.is_empty() {
            self.publish_blocked();
        }
        for waiter in expired {
            self.deliver(waiter.client.origin, timed_out());
        }
    }

    /// Connection `sink` of this shard closed: drop its waiters here and on every other shard.
    pub(crate) fn cancel_waits(&self, sink: SinkKey) {
        if !self.blocked.blockers.borrow_mut().remove(&sink) {
            return;
        }
        let from = self.id;
        self.drop_waiters_of(from, sink);
        self.shared.cancelling.begin(from, sink, self.count - 1);
        for target in (0..self.count).filter(|&target| target != from) {
            self.forward
                .push_cancel(target, Cancel { shard: from, sink });
        }
    }

    /// A batch of cancels from another shard (runs from the inbox).
    pub(crate) fn cancel_all(&self, cancels: Vec<Cancel>) {
        for cancel in cancels {
            self.drop_waiters_of(cancel.shard, cancel.sink);
            self.shared.cancelling.applied(cancel.shard, cancel.sink);
        }
    }

    /// CLIENT UNBLOCK: the waits here of connection `sink` of `shard` end with `reply`;
    /// whether it had any.
    pub(crate) fn unblock_waits(&self, shard: usize, sink: SinkKey, reply: Reply) -> bool {
        let mut origins = Vec::new();
        self.blocked.queues.borrow_mut().remove_clients(|client| {
            let hit = client.origin.shard == shard && client.origin.sink == sink;
            if hit {
                origins.push(client.origin);
            }
            hit
        });
        self.publish_blocked();
        for origin in &origins {
            self.deliver(*origin, reply.clone());
        }
        !origins.is_empty()
    }

    fn drop_waiters_of(&self, shard: usize, sink: SinkKey) {
        self.blocked
            .queues
            .borrow_mut()
            .remove_clients(|client| client.origin.shard == shard && client.origin.sink == sink);
        self.publish_blocked();
    }
}
