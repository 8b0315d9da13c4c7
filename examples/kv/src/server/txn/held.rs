//! A program that holds shards: the async side of the transaction lock protocol, for work
//! whose steps depend on each other's replies (a multi-key command over several shards, a
//! script, a transaction with such a command inside).
//!
//! [`Held::lock`] takes the shards in ascending order with the same lock requests EXEC
//! sends (so programs and transactions never wait on each other in a cycle); then
//! [`Held::step`] runs commands on a held shard and waits for their replies, any number of
//! times, in any order; [`Held::release`] lets every shard go. A program runs as a task of
//! its own on the connection's shard, so it finishes (and releases) even if the client goes
//! away; dropping a `Held` that still holds shards releases them too.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use corewire::runtime::sync::WakerCell;

use super::{TxnId, TxnMsg, Watcher, GRANT_SEQ};
use crate::command::Command;
use crate::notify::KeyEvent;
use crate::repl::shards::BarrierId;
use crate::reply::Reply;
use crate::server::forward::Work;
use crate::server::repl_feed::{grouping, new_group_id, Group};
use crate::server::shard::{now_ms, Shard};
use crate::server::sink::{Origin, Part, ReplySink, SinkKey};

/// Where a program's replies arrive: grants and step replies by sequence number.
#[derive(Default)]
struct Inbox {
    /// foldhash: a script's every `redis.call` and lock grant pass through here.
    replies: RefCell<HashMap<u64, Reply, foldhash::fast::RandomState>>,
    task: WakerCell,
}

impl ReplySink for Inbox {
    fn deliver(&self, seq: u64, _part: Part, reply: Reply) {
        self.replies.borrow_mut().insert(seq, reply);
        self.task.wake();
    }
}

pub(crate) struct Held {
    shard: Rc<Shard>,
    inbox: Rc<Inbox>,
    key: SinkKey,
    /// The shards held now, ascending.
    held: RefCell<Vec<usize>>,
    next_seq: Cell<u64>,
    /// Its replication group while it holds shards: its steps' writes reach replicas as
    /// one MULTI/EXEC when it lets them go (a new id after each release).
    group_id: Cell<BarrierId>,
}

/// What a lock request found: the watches of its watcher there were clean, or one changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    Clean,
    Dirty,
}

impl Held {
    /// A program on `shard`, holding nothing yet.
    pub fn new(shard: Rc<Shard>) -> Held {
        let inbox = Rc::new(Inbox::default());
        let key = shard.register(inbox.clone());
        Held {
            shard,
            inbox,
            key,
            held: RefCell::new(Vec::new()),
            next_seq: Cell::new(0),
            group_id: Cell::new(new_group_id()),
        }
    }

    pub fn shard(&self) -> &Rc<Shard> {
        &self.shard
    }

    /// This program as a transaction of the lock protocol.
    pub fn txn(&self) -> TxnId {
        (self.shard.id, self.key)
    }

    /// The program's own sink: a watcher with no watches, and where wake-ups of a blocked
    /// program arrive.
    pub fn origin(&self, seq: u64) -> Origin {
        Origin {
            shard: self.shard.id,
            sink: self.key,
            seq,
            part: None,
        }
    }

    pub fn holds(&self, shard: usize) -> bool {
        self.held.borrow().binary_search(&shard).is_ok()
    }

    /// The shards held, ascending.
    pub fn held(&self) -> Vec<usize> {
        self.held.borrow().clone()
    }

    /// Takes `shards` (distinct, ascending, none held yet and all above those held) one at a
    /// time. `watcher`'s watches are checked and dropped on each; the first dirty one makes
    /// the result `Dirty` (the shards are held all the same: release them).
    pub async fn lock(&self, shards: &[usize], watcher: Option<Watcher>) -> Grant {
        let watcher = watcher.unwrap_or((self.shard.id, self.key));
        let mut grant = Grant::Clean;
        for &target in shards {
            debug_assert!(self.held.borrow().last().is_none_or(|&last| last < target));
            // This shard answers in place when it is free (most scripts hold only it).
            let here = (target == self.shard.id)
                .then(|| self.shard.lock_here(self.txn(), watcher, now_ms()))
                .flatten();
            let clean = match here {
                Some(clean) => clean,
                None => {
                    if target != self.shard.id {
                        self.send(
                            target,
                            TxnMsg::Lock {
                                txn: self.txn(),
                                watcher,
                                batch: None,
                            },
                        );
                    }
                    self.reply(GRANT_SEQ).await == Reply::Integer(1)
                }
            };
            self.held.borrow_mut().push(target);
            if !clean {
                grant = Grant::Dirty;
            }
        }
        grant
    }

    /// Takes shard `target` (not held) out of the ascending order, only if it is free now
    /// (see [`TxnMsg::TryLock`]): never waits, so it cannot close a cycle with a program that
    /// holds `target` and waits for a shard held here. `false`: busy, nothing taken.
    pub async fn try_lock(&self, target: usize) -> bool {
        let granted = if target == self.shard.id {
            self.shard.try_lock_here(self.txn())
        } else {
            self.send(target, TxnMsg::TryLock { txn: self.txn() });
            self.reply(GRANT_SEQ).await == Reply::Integer(1)
        };
        if granted {
            let mut held = self.held.borrow_mut();
            if let Err(at) = held.binary_search(&target) {
                held.insert(at, target);
            }
        }
        granted
    }

    /// Runs `commands` on held shard `target`, in order and as one block in its log, and
    /// waits for their replies.
    pub async fn step(&self, target: usize, commands: Vec<Command>) -> Vec<Reply> {
        self.write_back(target, commands, Vec::new()).await
    }

    /// [`Self::step`] for the write-backs of a multi-key command: `target` publishes `events`
    /// (the command's, for its keys there) in place of the write-backs' own.
    pub async fn write_back(
        &self,
        target: usize,
        commands: Vec<Command>,
        events: Vec<KeyEvent>,
    ) -> Vec<Reply> {
        let seqs = self.send_step_with(target, commands, events);
        let mut replies = Vec::new();
        for seq in seqs {
            replies.push(self.reply(seq).await);
        }
        replies
    }

    /// Sends `commands` to held shard `target` (run at once when it is this shard); their
    /// replies come as the returned sequence numbers.
    pub fn send_step(&self, target: usize, commands: Vec<Command>) -> std::ops::Range<u64> {
        self.send_step_with(target, commands, Vec::new())
    }

    fn send_step_with(
        &self,
        target: usize,
        commands: Vec<Command>,
        events: Vec<KeyEvent>,
    ) -> std::ops::Range<u64> {
        debug_assert!(self.holds(target), "a step on a shard not held");
        let first = self.next_seq.get();
        self.next_seq.set(first + commands.len() as u64);
        let batch = commands
            .into_iter()
            .enumerate()
            .map(|(i, command)| (self.origin(first + i as u64), command))
            .collect();
        self.send(
            target,
            TxnMsg::Step {
                txn: self.txn(),
                batch,
                events,
                piece: self.group_id.get(),
            },
        );
        first..self.next_seq.get()
    }

    /// One command on this shard (held): its reply when ready at once, else the sequence
    /// number it comes as.
    pub fn step_here(&self, command: Command) -> Result<Reply, u64> {
        debug_assert!(self.holds(self.shard.id), "a step on a shard not held");
        let seq = self.reserve_seq();
        self.shard
            .step_here(self.origin(seq), command, self.group_id.get())
            .ok_or(seq)
    }

    /// Runs `stretch` (synchronous: it must not await) as one block of this shard's log,
    /// which [`Self::step_here`]'s commands join (see [`Shard::program_block`]).
    pub fn in_block<R>(&self, stretch: impl FnOnce() -> R) -> R {
        debug_assert!(self.holds(self.shard.id), "a block on a shard not held");
        (self.shard).program_block(self.txn(), self.group_id.get(), now_ms(), stretch)
    }

    /// One command on held shard `target`.
    pub async fn call(&self, target: usize, command: Command) -> Reply {
        self.step(target, vec![command])
            .await
            .pop()
            .unwrap_or(Reply::NullBulk)
    }

    /// `command` on shard `target` as any client's command (no lock needed or taken).
    pub async fn ask(&self, target: usize, command: Command) -> Reply {
        let seq = self.reserve_seq();
        let origin = self.origin(seq);
        if target == self.shard.id {
            if let Some(reply) = self.shard.execute_gated(origin, command, now_ms()) {
                return reply;
            }
        } else {
            (self.shard.forward).push_job(target, crate::server::forward::Job { origin, command });
        }
        self.reply(seq).await
    }

    /// The stored form of `keys` (all on held shard `target`): per key its DUMP payload and
    /// expiry, or nothing; and whether the shard is past its memory limit.
    pub async fn dump(&self, target: usize, keys: Vec<Bytes>) -> (Vec<Option<Dumped>>, bool) {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        self.send(
            target,
            TxnMsg::Dump {
                txn: self.txn(),
                origin: self.origin(seq),
                keys,
            },
        );
        let Reply::Array(mut items) = self.reply(seq).await else {
            return (Vec::new(), false);
        };
        let over_limit = items.pop() == Some(Reply::Integer(1));
        let dumped = items
            .into_iter()
            .map(|item| match item {
                Reply::Array(parts) => match &parts[..] {
                    [Reply::Bulk(payload), Reply::Integer(at)] => Some(Dumped {
                        payload: payload.clone(),
                        expire_at: u64::try_from(*at).ok(),
                    }),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        (dumped, over_limit)
    }

    /// A sequence number for a reply that arrives by other means (a wake-up).
    pub fn reserve_seq(&self) -> u64 {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        seq
    }

    /// The reply `seq`, once it has arrived.
    pub async fn reply(&self, seq: u64) -> Reply {
        poll_fn(|cx| match self.inbox.replies.borrow_mut().remove(&seq) {
            Some(reply) => Poll::Ready(reply),
            None => {
                self.inbox.task.register(cx.waker());
                Poll::Pending
            }
        })
        .await
    }

    /// Drops reply `seq` and any earlier ones that arrive later (late wake-ups).
    pub fn forget(&self, seq: u64) {
        self.inbox.replies.borrow_mut().retain(|&at, _| at > seq);
    }

    /// The reply `seq` if it has arrived.
    pub fn try_reply(&self, seq: u64) -> Option<Reply> {
        self.inbox.replies.borrow_mut().remove(&seq)
    }

    /// Waits until a reply arrives or `wait` passes.
    pub async fn wait_any(&self, wait: std::time::Duration) {
        let arrived = poll_fn(|cx| {
            if self.inbox.replies.borrow().is_empty() {
                self.inbox.task.register(cx.waker());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        });
        let _ = corewire::runtime::timeout(wait, arrived).await;
    }

    pub fn send(&self, target: usize, msg: TxnMsg) {
        if target == self.shard.id {
            self.shard.on_txn(msg, now_ms());
        } else {
            self.shard.forward.push_work(target, Work::Txn(msg));
        }
    }

    /// Whether this program may serve another run as it is: it holds nothing, no reply
    /// waits in its inbox and nothing of it waits on keys.
    pub fn idle(&self) -> bool {
        self.held.borrow().is_empty()
            && self.inbox.replies.borrow().is_empty()
            && !self.shard.may_be_blocked(self.key)
    }

    /// Lets every held shard go.
    pub fn release(&self) {
        if self.held.borrow().is_empty() {
            // Nothing to let go, and no step ran under the current id: it stays.
            return;
        }
        let held = std::mem::take(&mut *self.held.borrow_mut());
        let id = self.group_id.replace(new_group_id());
        // The held shards, a bit each, decided here once: none (each shard's part goes
        // alone) past 64 shards or while replication does not stream, so no shard's part
        // waits for one that a shard not streaming yet would not send.
        let involved = if grouping() && held.iter().all(|&s| s < 64) {
            held.iter().fold(0u64, |mask, &s| mask | 1 << s)
        } else {
            0
        };
        for target in held {
            let group = Group { id, involved };
            self.send(target, TxnMsg::Release(self.txn(), Some(group)));
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
        self.shard.unregister_program(self.key);
    }
}

/// One key's stored form, as [`Held::dump`] fetched it.
#[derive(Debug, Clone)]
pub(crate) struct Dumped {
    pub payload: Bytes,
    pub expire_at: Option<u64>,
}
