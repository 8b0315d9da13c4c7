//! MULTI/EXEC across shards: two-phase locking over the shards a transaction touches.
//!
//! EXEC's [`Transaction`] is planned on the connection's shard by a [`Coordinator`]: each
//! queued command is routed as if it ran alone, giving each touched shard its batch of
//! commands (in queue order). The shards where the connection WATCHes keys join the set. The
//! coordinator then takes the shards in ascending order, one lock request at a time (so two
//! transactions never wait on each other); each shard, when it grants, checks and drops the
//! connection's watches there. The request to the last shard carries that shard's batch, which
//! runs as soon as it is granted; the other shards get theirs after it, and each shard lets go
//! right after running its batch. No lock is taken after one is released, so transactions are
//! serialisable, and a shard not touched by a transaction never waits for it.
//!
//! A changed watched key makes the shard answer "dirty": the coordinator lets go of what it
//! holds, runs nothing, and EXEC answers a null array.
//!
//! While a shard is held, every other command for it (local or from another shard) and every
//! other lock request waits in arrival order (see [`lock`]); the active-expiry sweep skips the
//! held shard. Inside a transaction a blocking pop that finds nothing answers nil at once, and
//! the blocked clients a transaction's writes can serve are served after its batch, as Redis
//! does after EXEC; when batches run on several shards, only once every part has run (the
//! coordinator's [`TxnMsg::ServeWritten`]), so no served client runs before another shard's
//! part, nor sees the transaction half done.
//!
//! The coordinator is a [`ReplySink`] on the connection's shard: command replies (including
//! ones the durability gate releases later) and lock grants come back through the ordinary
//! reply path. It runs to the end even if the client goes away, so every lock is released.

mod coordinator;
pub(crate) mod held;
mod lock;
pub(crate) mod multikey;
pub(crate) mod watch;

use std::cell::{Cell, RefCell};

use bytes::Bytes;

use super::shard::Shard;
use super::sink::{Origin, SinkKey};
use crate::command::{ClientRequest, Command};
use crate::notify::KeyEvent;
use crate::repl::shards::BarrierId;
use crate::reply::Reply;
use crate::server::repl_feed::{Block, Group};

pub(crate) use coordinator::Coordinator;
use lock::{ShardLock, TxnId};
use watch::{KeyAtWatch, WatchRegistry, Watcher};

/// The reply `seq` a lock grant carries to the coordinator (command replies use their index
/// in the transaction).
const GRANT_SEQ: u64 = u64::MAX;
/// [`TxnMsg::TryLock`]'s answer when the shard is not free.
const TRY_LOCK_BUSY: i64 = -1;

/// One shard's commands of a transaction, in queue order, with where each reply goes.
pub(crate) type Batch = Vec<(Origin, Command)>;

/// A batch, and the replication group it is part of when the transaction writes on several
/// shards (its parts reach replicas as one MULTI/EXEC: see `repl_feed`).
pub(crate) struct GroupBatch {
    pub batch: Batch,
    pub group: Option<Group>,
    /// Other shards run batches of the same transaction: the blocked clients this batch's
    /// writes can serve wait for [`TxnMsg::ServeWritten`], sent once every part has run.
    pub serve_later: bool,
}

/// When the blocked clients a block's writes can serve are served.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Serve {
    /// Right after the block.
    Now,
    /// When the program lets go of the shard.
    AtRelease,
    /// When the transaction's coordinator says all its parts ran ([`TxnMsg::ServeWritten`]).
    AfterTxn(TxnId),
}

/// Transaction traffic between shards (it travels in the job lane, so it stays in order with
/// the commands the same shard forwards).
pub(crate) enum TxnMsg {
    /// Hold the shard for `txn`, check and drop `watcher`'s watches here, answer the grant;
    /// with a batch, run it at once if the watches are clean, and let go.
    Lock {
        txn: TxnId,
        watcher: Watcher,
        batch: Option<GroupBatch>,
    },
    /// Hold the shard for `txn` only if it is free now, out of the ascending order: answer
    /// the grant (1) or that it is busy ([`TRY_LOCK_BUSY`]) without waiting, so a program
    /// holding higher shards cannot wait in a cycle.
    TryLock { txn: TxnId },
    /// Run this shard's batch (the shard is held for `txn`) and let go.
    Run { txn: TxnId, batch: GroupBatch },
    /// Every part of `txn` ran: serve the blocked clients its batch here can serve (Redis
    /// serves them after EXEC, so none of them sees the transaction half done, nor runs
    /// before a part on another shard, such as a SLOWLOG RESET of the connection's shard).
    ServeWritten(TxnId),
    /// Let go without running anything (a watch elsewhere was dirty).
    /// From a program: its replication group, whose part on this shard closes.
    Release(TxnId, Option<Group>),
    /// An aborted EXEC never reached this shard: drop the connection's watches here.
    Unwatch(Watcher),
    /// Run this batch on the shard `txn` holds, as one block in its log, and keep holding.
    /// `events`: a multi-key command's own events for its keys here, published in place of
    /// the batch's (its write-backs' `restore` and `del`) for those keys.
    Step {
        txn: TxnId,
        batch: Batch,
        events: Vec<KeyEvent>,
        piece: BarrierId,
    },
    /// Answer `origin` with the stored form of `keys` (see [`held::Held::dump`]).
    Dump {
        txn: TxnId,
        origin: Origin,
        keys: Vec<Bytes>,
    },
    /// A program waits for `keys` to get list items (sorted set members with `zset`): wake
    /// `origin` (once) when one does.
    Block {
        origin: Origin,
        keys: Vec<Bytes>,
        zset: bool,
    },
    /// The program at `origin` waits no more: drop its wake-ups here.
    Unblock(Origin),
}

/// Waiting work on a held shard.
pub(crate) enum Waiting {
    Job(Origin, Command),
    Msg(TxnMsg),
}

/// A shard's transaction state.
#[derive(Default)]
pub(crate) struct ShardTxn {
    lock: RefCell<ShardLock<Waiting>>,
    pub(crate) watches: RefCell<WatchRegistry>,
    /// A batch is running: blocking pops do not block, and served waiters wait for its end.
    running: Cell<bool>,
    /// Keys written while `running` that blocked clients may be waiting on.
    written: RefCell<Vec<Bytes>>,
    /// Keys a program's steps wrote: their blocked clients are served when the program lets
    /// go of the shard, after the whole command, script or transaction (as Redis serves
    /// them after the command), not between its steps.
    program_written: RefCell<Vec<Bytes>>,
    /// Keys the batches of transactions over several shards wrote here, served when their
    /// coordinator says every part ran ([`TxnMsg::ServeWritten`]).
    after_txn: RefCell<Vec<(TxnId, Vec<Bytes>)>>,
    /// The program whose [`Shard::program_block`] is open here: its steps here join it.
    /// With the block's time, which its steps run at.
    program_block: Cell<Option<(BarrierId, u64)>>,
    /// A drain of the waiting work is in progress (a release inside it must not start
    /// another).
    draining: Cell<bool>,
    /// The connections of this shard watching keys, and the shards where.
    watching: RefCell<std::collections::HashMap<SinkKey, Vec<usize>>>,
    /// The connections of this shard whose EXEC or multi-key command over several shards
    /// is running: they read no further request until it answers.
    held_back: RefCell<std::collections::HashMap<SinkKey, u64>>,
}

impl ShardTxn {
    pub fn running(&self) -> bool {
        self.running.get()
    }

    /// Whether the shard must not run other work now (held, or work already waiting).
    pub fn is_busy(&self) -> bool {
        let lock = self.lock.borrow();
        lock.is_held() || lock.waiting() > 0
    }

    pub fn note_written(&self, keys: Vec<Bytes>) {
        self.written.borrow_mut().extend(keys);
    }

    /// Connection `sink` reads no further request until the reply to its request `seq`
    /// arrives ([`Self::reply_arrived`]).
    pub fn hold_back(&self, sink: SinkKey, seq: u64) {
        self.held_back.borrow_mut().insert(sink, seq);
    }

    /// A reply for `sink`'s request `seq` is delivered: the connection reads on if it waited
    /// for that one.
    pub fn reply_arrived(&self, sink: SinkKey, seq: u64) {
        let mut held_back = self.held_back.borrow_mut();
        if !held_back.is_empty() && held_back.get(&sink) == Some(&seq) {
            held_back.remove(&sink);
        }
    }

    /// Whether connection `sink` waits for a request it sent (an EXEC, a multi-shard
    /// command) before it parses more. Asked before every request it parses: inlined.
    #[inline]
    pub fn is_held_back(&self, sink: SinkKey) -> bool {
        let held_back = self.held_back.borrow();
        !held_back.is_empty() && held_back.contains_key(&sink)
    }

    /// WATCH from connection `sink` of this shard reaches `shards`.
    pub fn note_watch(&self, sink: SinkKey, shards: impl IntoIterator<Item = usize>) {
        let mut watching = self.watching.borrow_mut();
        let list = watching.entry(sink).or_default();
        for shard in shards {
            if !list.contains(&shard) {
                list.push(shard);
            }
        }
    }

    /// The shards where connection `sink` watches keys; it no longer does.
    pub fn take_watching(&self, sink: SinkKey) -> Vec<usize> {
        let mut shards = self.watching.borrow_mut().remove(&sink).unwrap_or_default();
        shards.sort_unstable();
        shards
    }
}

impl Shard {
    /// A command for this shard: runs now, or waits if a transaction holds the shard.
    /// WATCH and UNWATCH register here.
    #[inline]
    pub(crate) fn execute_gated(
        &self,
        origin: Origin,
        command: Command,
        now: u64,
    ) -> Option<Reply> {
        if self.txn.is_busy() {
            self.txn
                .lock
                .borrow_mut()
                .defer(Waiting::Job(origin, command));
            return None;
        }
        self.execute_free(origin, command, now)
    }

    /// Inlined, as the layers below it up to the store: a call per layer copied the whole
    /// command again.
    #[inline]
    fn execute_free(&self, origin: Origin, command: Command, now: u64) -> Option<Reply> {
        let watcher = (origin.shard, origin.sink);
        match command {
            Command::Watch(keys) => {
                let mut watches = self.txn.watches.borrow_mut();
                for key in keys {
                    let state = match self.with_store(|store| store.stored_expiry(&key)) {
                        Some(Some(at)) if now > at => KeyAtWatch::Expired,
                        Some(Some(at)) => KeyAtWatch::Expiring(at),
                        _ => KeyAtWatch::Other,
                    };
                    watches.watch(watcher, key, state);
                }
                Some(Reply::ok())
            }
            Command::Unwatch => {
                self.txn.watches.borrow_mut().unwatch(watcher);
                Some(Reply::ok())
            }
            Command::Publish { channel, message } => Some(self.publish(&channel, &message)),
            Command::PubSub(query) => Some(self.pubsub.borrow().query(&query)),
            Command::ShardPubSub(request) => Some(self.shard_pubsub(origin, request)),
            Command::ConfigApply(settings) => Some(self.apply_settings(&settings)),
            Command::Introspect(request) if super::rdb_commands::handles(&request) => {
                super::rdb_commands::run(self, origin, request)
            }
            Command::Introspect(request) => Some(self.run_introspect(request)),
            Command::Replica(request) => super::replica::run(self, origin, request),
            Command::Script(script) if script.op.runs_script() => {
                super::script::run_here(self, origin, script)
            }
            // SCRIPT and FUNCTION subcommands queued in a transaction.
            Command::Script(script) => Some(super::script::admin_command(self, script)),
            Command::Client(ClientRequest::Broadcast(request)) => Some(self.clients_part(&request)),
            Command::Client(ClientRequest::Track(keys)) => {
                self.track_keys(origin, &keys);
                Some(Reply::ok())
            }
            Command::ConfigResetStat => {
                // Every shard resets the shared counters too: idempotent.
                self.shared.reset_stats();
                self.reset_introspection();
                self.execute(origin, Command::ConfigResetStat, now)
            }
            command => self.execute(origin, command, now),
        }
    }

    /// Transaction traffic, from another shard's message or from a coordinator here.
    pub(crate) fn on_txn(&self, msg: TxnMsg, now: u64) {
        match msg {
            TxnMsg::Lock {
                txn,
                watcher,
                batch,
            } => {
                let granted = self.try_lock_here(txn);
                if !granted {
                    let msg = TxnMsg::Lock {
                        txn,
                        watcher,
                        batch,
                    };
                    self.txn.lock.borrow_mut().defer(Waiting::Msg(msg));
                    return;
                }
                self.granted(txn, watcher, batch, now);
            }
            TxnMsg::TryLock { txn } => {
                if self.try_lock_here(txn) {
                    self.granted(txn, txn, None, now);
                } else {
                    let grant = Origin {
                        shard: txn.0,
                        sink: txn.1,
                        seq: GRANT_SEQ,
                        part: None,
                    };
                    self.deliver(grant, Reply::Integer(TRY_LOCK_BUSY));
                }
            }
            TxnMsg::Run { txn, batch } => {
                if self.txn.lock.borrow().holder() != Some(txn) {
                    tracing::error!(
                        shard = self.id,
                        "transaction batch for a shard it does not hold"
                    );
                }
                self.run_batch(txn, batch, now);
                self.release(txn, now);
            }
            TxnMsg::ServeWritten(txn) => {
                // Another transaction or program holds the shard: not between its steps.
                if self.txn.is_busy() {
                    let msg = TxnMsg::ServeWritten(txn);
                    self.txn.lock.borrow_mut().defer(Waiting::Msg(msg));
                    return;
                }
                self.serve_after_txn(txn, now);
            }
            TxnMsg::Release(txn, group) => {
                // The program's part ends before the work waiting for the shard runs.
                if let Some(group) = group {
                    // While nothing streams, only a group over several shards has a part
                    // to send (the shard's flag spares the feed's own lookup).
                    if self.feeding() || group.involved.count_ones() >= 2 {
                        crate::server::repl_feed::close_program(group);
                    }
                }
                self.release(txn, now)
            }
            TxnMsg::Unwatch(watcher) => self.txn.watches.borrow_mut().unwatch(watcher),
            TxnMsg::Step {
                txn,
                batch,
                events,
                piece,
            } => {
                if self.txn.lock.borrow().holder() != Some(txn) {
                    tracing::error!(shard = self.id, "program step for a shard it does not hold");
                }
                self.run_batch_with(batch, events, Serve::AtRelease, Block::Piece(piece), now);
            }
            TxnMsg::Dump { txn, origin, keys } => {
                if self.txn.lock.borrow().holder() != Some(txn) {
                    tracing::error!(shard = self.id, "program dump on a shard it does not hold");
                }
                let reply = self.with_store(|store| {
                    let mut items: Vec<Reply> = keys
                        .iter()
                        .map(|key| match store.dump(key, now) {
                            Some((payload, at)) => Reply::Array(vec![
                                Reply::Bulk(payload),
                                Reply::Integer(at.map_or(-1, |at| at as i64)),
                            ]),
                            None => Reply::NullBulk,
                        })
                        .collect();
                    items.push(Reply::Integer(i64::from(store.over_memory_limit())));
                    Reply::Array(items)
                });
                self.deliver(origin, reply);
            }
            TxnMsg::Block { origin, keys, zset } => self.block_waker(origin, keys, zset, now),
            TxnMsg::Unblock(origin) => self.unblock_waker(origin),
        }
    }

    /// [`TxnMsg::Lock`] without a batch from a program on this shard, answered in place:
    /// `Some(clean)` when granted now (as [`Self::granted`] answers it, the shard let go
    /// again when dirty), `None` when it waits (the grant then comes to the program's sink).
    pub(crate) fn lock_here(&self, txn: TxnId, watcher: Watcher, now: u64) -> Option<bool> {
        let granted = self.try_lock_here(txn);
        if !granted {
            let msg = TxnMsg::Lock {
                txn,
                watcher,
                batch: None,
            };
            self.txn.lock.borrow_mut().defer(Waiting::Msg(msg));
            return None;
        }
        let clean = self.txn.watches.borrow_mut().finish(watcher, now);
        if !clean {
            self.release(txn, now);
        }
        Some(clean)
    }

    /// Holds the shard for `txn` when it is free now (not held, no work waiting): every lock
    /// request's first test, and all of [`TxnMsg::TryLock`]'s.
    pub(crate) fn try_lock_here(&self, txn: TxnId) -> bool {
        !self.txn.is_busy() && self.txn.lock.borrow_mut().try_hold(txn)
    }

    /// The shard is held for `txn`: check the watches, run the batch if there is one, tell
    /// the coordinator.
    fn granted(&self, txn: TxnId, watcher: Watcher, batch: Option<GroupBatch>, now: u64) {
        let clean = self.txn.watches.borrow_mut().finish(watcher, now);
        let last = batch.is_some();
        if clean {
            if let Some(batch) = batch {
                self.run_batch(txn, batch, now);
            }
        }
        let grant = Origin {
            shard: txn.0,
            sink: txn.1,
            seq: GRANT_SEQ,
            part: None,
        };
        self.deliver(grant, Reply::Integer(i64::from(clean)));
        // Dirty: nothing runs here, and the coordinator lets go of the others.
        if last || !clean {
            self.release(txn, now);
        }
    }

    fn run_batch(&self, txn: TxnId, batch: GroupBatch, now: u64) {
        let block = batch.group.map_or(Block::Alone, Block::Part);
        let serve = if batch.serve_later {
            Serve::AfterTxn(txn)
        } else {
            Serve::Now
        };
        self.run_batch_with(batch.batch, Vec::new(), serve, block, now);
    }

    /// [`Self::run_batch`], publishing `events` in place of the batch's own for their keys
    /// (before any blocked client the batch serves runs, as the command's events come first).
    fn run_batch_with(
        &self,
        batch: Batch,
        events: Vec<KeyEvent>,
        serve: Serve,
        block: Block,
        now: u64,
    ) {
        let writer = batch.first().map(|(origin, _)| *origin);
        self.in_block(events, writer, serve, block, now, || {
            for (origin, command) in batch {
                if let Some(reply) = self.execute_free(origin, command, now) {
                    self.deliver(origin, reply);
                }
            }
        });
    }

    /// A program's one command on this shard, which it holds: what [`TxnMsg::Step`] of that
    /// command does, with its reply returned when it is ready at once rather than delivered
    /// to the program's inbox (a script's `redis.call` on its own shard). Inside the
    /// program's open [`Self::program_block`] it joins that block and runs at the block's
    /// time (a script's keys do not expire in the middle of its stretch, as Redis keeps a
    /// script's time still); else it is a block alone, now.
    pub(crate) fn step_here(
        &self,
        origin: Origin,
        command: Command,
        piece: BarrierId,
    ) -> Option<Reply> {
        if let Some((open, now)) = self.txn.program_block.get() {
            if open == piece {
                return self.execute_free(origin, command, now);
            }
        }
        let now = super::shard::now_ms();
        if self.txn.lock.borrow().holder() != Some((origin.shard, origin.sink)) {
            tracing::error!(shard = self.id, "program step for a shard it does not hold");
        }
        let mut reply = None;
        self.in_block(
            Vec::new(),
            Some(origin),
            Serve::AtRelease,
            Block::Piece(piece),
            now,
            || {
                reply = self.execute_free(origin, command, now);
            },
        );
        reply
    }

    /// Runs `stretch`, a synchronous run of program `piece`'s steps on this shard (which it
    /// holds), as one block of this shard's log: its [`Self::step_here`] calls join it rather
    /// than open a block each, so a script's writes between two suspensions reach the AOF as
    /// one MULTI/EXEC and the replication feed as one piece. It must not await (a block never
    /// spans a batch of the AOF, nor another client's work); the program closes it before it
    /// waits and opens another when it goes on.
    pub(crate) fn program_block<R>(
        &self,
        holder: TxnId,
        piece: BarrierId,
        now: u64,
        stretch: impl FnOnce() -> R,
    ) -> R {
        if self.txn.lock.borrow().holder() != Some(holder) {
            tracing::error!(shard = self.id, "program block on a shard it does not hold");
        }
        let mut out = None;
        self.in_block(
            Vec::new(),
            None,
            Serve::AtRelease,
            Block::Piece(piece),
            now,
            || {
                self.txn.program_block.set(Some((piece, now)));
                out = Some(stretch());
                self.txn.program_block.set(None);
            },
        );
        out.expect("the stretch ran")
    }

    /// Runs `batch` as one block of this shard's log, `events` published in place of its
    /// own for their keys; `serve`: when the blocked clients its writes can serve are served.
    fn in_block(
        &self,
        events: Vec<KeyEvent>,
        writer: Option<Origin>,
        serve: Serve,
        block: Block,
        now: u64,
        batch: impl FnOnce(),
    ) {
        debug_assert!(
            self.txn.program_block.get().is_none(),
            "a block inside a program's open block"
        );
        self.txn.running.set(true);
        // The batch's writes are one block in this shard's log: replay keeps all or none.
        if let Some(aof) = &self.aof {
            aof.begin_transaction();
        }
        // The shard's copy of the feed's flag spares a shard-local lookup at each end while
        // replication does not stream (a group's part still goes out then).
        if self.feeding() || matches!(block, Block::Part(_)) {
            crate::server::repl_feed::begin_block(block);
        }
        self.replace_events(&events);
        batch();
        self.publish_replaced(events, writer);
        if let Some(aof) = &self.aof {
            aof.end_transaction();
        }
        if self.feeding() {
            crate::server::repl_feed::end_block();
        }
        self.txn.running.set(false);
        let written = std::mem::take(&mut *self.txn.written.borrow_mut());
        match serve {
            Serve::Now => self.serve_written(&written, now),
            Serve::AtRelease => self.txn.program_written.borrow_mut().extend(written),
            Serve::AfterTxn(_) if written.is_empty() => {}
            Serve::AfterTxn(txn) => self.txn.after_txn.borrow_mut().push((txn, written)),
        }
    }

    /// Every part of `txn` ran: the blocked clients its batch here can serve are served.
    fn serve_after_txn(&self, txn: TxnId, now: u64) {
        let written = {
            let mut after = self.txn.after_txn.borrow_mut();
            after
                .iter()
                .position(|(id, _)| *id == txn)
                .map(|at| after.swap_remove(at).1)
        };
        if let Some(written) = written {
            self.serve_written(&written, now);
        }
    }

    /// `txn` lets go of this shard: the waiting work runs, in order, until the next
    /// transaction takes the shard.
    fn release(&self, txn: TxnId, now: u64) {
        if !self.txn.lock.borrow_mut().release(txn) {
            tracing::error!(
                shard = self.id,
                "release by a transaction that does not hold the shard"
            );
        }
        let written = std::mem::take(&mut *self.txn.program_written.borrow_mut());
        if !written.is_empty() {
            self.serve_written(&written, now);
        }
        if self.txn.draining.replace(true) {
            return;
        }
        loop {
            let next = self.txn.lock.borrow_mut().next_ready();
            match next {
                None => break,
                Some(Waiting::Job(origin, command)) => {
                    if let Some(reply) = self.execute_free(origin, command, now) {
                        self.deliver(origin, reply);
                    }
                }
                Some(Waiting::Msg(TxnMsg::Lock {
                    txn,
                    watcher,
                    batch,
                })) => {
                    self.txn.lock.borrow_mut().try_hold(txn);
                    self.granted(txn, watcher, batch, now);
                }
                Some(Waiting::Msg(TxnMsg::ServeWritten(txn))) => self.serve_after_txn(txn, now),
                Some(Waiting::Msg(other)) => {
                    tracing::error!(shard = self.id, "transaction message waited for a lock");
                    self.txn.draining.set(false);
                    self.on_txn(other, now);
                    self.txn.draining.set(true);
                }
            }
        }
        self.txn.draining.set(false);
    }
}
