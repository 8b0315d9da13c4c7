//! EXEC on the connection's shard: plans the transaction, takes the shards in order, gathers
//! the replies into EXEC's array (see the module above for the protocol).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::{Batch, GroupBatch, TxnId, TxnMsg, Watcher, GRANT_SEQ};
use crate::command::{Transaction, TxnItem};
use crate::reply::Reply;
use crate::routing::{route, FanOut, Route};
use crate::server::forward::Work;
use crate::server::repl_feed::{grouping, new_group_id, Group};
use crate::server::shard::{self, now_ms, Shard};
use crate::server::sink::{Merges, Origin, Part, ReplySink, SinkKey};

pub(crate) struct Coordinator {
    /// Where EXEC's reply goes: the connection and the request.
    exec: Origin,
    /// This coordinator's own sink key, once registered.
    key: Cell<Option<SinkKey>>,
    state: RefCell<State>,
    /// `start` is running: a reply complete already is returned, not delivered (the
    /// connection is borrowed by the caller).
    starting: Cell<bool>,
    early: RefCell<Option<Reply>>,
}

struct State {
    /// The shards to hold, ascending, and each one's batch (taken when sent).
    shards: Vec<usize>,
    batches: Vec<Batch>,
    /// Replication's group, when the batches write on several shards.
    group: Option<Group>,
    watcher: Watcher,
    /// Grants received so far (the shards are asked one at a time).
    granted: usize,
    replies: Vec<Option<Reply>>,
    /// Command replies still expected.
    missing: usize,
    /// Which of `shards` have commands to run.
    ran: Vec<bool>,
    /// Batches run on several shards: the blocked clients they serve wait for the end of
    /// every part ([`TxnMsg::ServeWritten`]).
    serve_later: bool,
    merges: Merges,
    /// A watched key changed: the reply is a null array.
    dirty: bool,
    finished: bool,
}

enum Action {
    Send(usize, TxnMsg),
    Finish(Reply),
}

impl Coordinator {
    /// Plans and starts EXEC for `exec` (the connection's request) on `shard`; `watching`
    /// are the shards where the connection watches keys. Returns EXEC's reply if it is
    /// complete at once.
    pub fn start(
        shard: &Shard,
        exec: Origin,
        transaction: Transaction,
        watching: Vec<usize>,
    ) -> Option<Reply> {
        let coordinator = Rc::new(Coordinator {
            exec,
            key: Cell::new(None),
            state: RefCell::new(State {
                shards: Vec::new(),
                batches: Vec::new(),
                group: None,
                watcher: (exec.shard, exec.sink),
                granted: 0,
                replies: Vec::new(),
                missing: 0,
                ran: Vec::new(),
                serve_later: false,
                merges: Merges::default(),
                dirty: false,
                finished: false,
            }),
            starting: Cell::new(true),
            early: RefCell::new(None),
        });
        let key = shard.register(coordinator.clone());
        coordinator.key.set(Some(key));
        let txn: TxnId = (shard.id, key);
        let first = coordinator.plan(shard, txn, transaction, watching);
        coordinator.perform(shard, first);
        coordinator.starting.set(false);
        let early = coordinator.early.borrow_mut().take();
        early
    }

    fn plan(
        &self,
        shard: &Shard,
        txn: TxnId,
        transaction: Transaction,
        watching: Vec<usize>,
    ) -> Vec<Action> {
        let mut state = self.state.borrow_mut();
        let mut per_shard: Vec<Batch> = (0..shard.count).map(|_| Vec::new()).collect();
        let origin = |seq: usize, part: Part| Origin {
            shard: txn.0,
            sink: txn.1,
            seq: seq as u64,
            part,
        };
        for (i, item) in transaction.items.into_iter().enumerate() {
            let command = match item {
                TxnItem::Answered(reply) => {
                    state.replies.push(Some(reply));
                    continue;
                }
                TxnItem::Run(command) => command,
            };
            if let Some(refusal) = shard.aof.as_ref().and_then(|aof| aof.admit(&command).err()) {
                state.replies.push(Some(refusal));
                continue;
            }
            match route(command, shard.count) {
                Route::Refused(reply) => state.replies.push(Some(reply)),
                // The glue sends such transactions to `multikey` instead.
                Route::Atomic { .. } => state.replies.push(Some(Reply::error(
                    "ERR internal error: a multi-shard step in a batched transaction",
                ))),
                Route::Single { shard, command } => {
                    per_shard[shard].push((origin(i, None), command));
                    state.replies.push(None);
                    state.missing += 1;
                }
                Route::FanOut(FanOut { parts, merger }) => {
                    state.merges.start(i as u64, merger);
                    for (j, part) in parts.into_iter().enumerate() {
                        per_shard[part.shard].push((origin(i, Some(j as u32)), part.command));
                    }
                    state.replies.push(None);
                    state.missing += 1;
                }
            }
        }
        for (id, batch) in per_shard.into_iter().enumerate() {
            if !batch.is_empty() || watching.contains(&id) {
                state.shards.push(id);
                state.batches.push(batch);
            }
        }
        if state.shards.is_empty() {
            return state.finish();
        }
        state.ran = state
            .batches
            .iter()
            .map(|batch| !batch.is_empty())
            .collect();
        state.serve_later = state.ran.iter().filter(|&&ran| ran).count() >= 2;
        state.group = group_of(shard, &state.shards, &state.batches);
        vec![state.lock_next(txn)]
    }

    /// Sends the actions (after the state's borrow ended: a shard here may answer at once,
    /// which calls back into `deliver`).
    fn perform(&self, shard: &Shard, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send(target, msg) if target == shard.id => shard.on_txn(msg, now_ms()),
                Action::Send(target, msg) => shard.forward.push_work(target, Work::Txn(msg)),
                Action::Finish(reply) => {
                    if let Some(key) = self.key.take() {
                        shard.unregister(key);
                    }
                    if self.starting.get() {
                        *self.early.borrow_mut() = Some(reply);
                    } else {
                        shard.deliver(self.exec, reply);
                    }
                }
            }
        }
    }
}

/// A replication group for batches that run on several shards (a bit per shard, so at
/// most 64 shards: more keep one MULTI/EXEC per shard) while replication streams.
fn group_of(shard: &Shard, shards: &[usize], batches: &[Batch]) -> Option<Group> {
    let involved = (shards.iter().zip(batches))
        .filter(|(_, batch)| !batch.is_empty())
        .fold(0u64, |mask, (&id, _)| {
            mask | 1u64.checked_shl(id as u32).unwrap_or(0)
        });
    if shard.count > 64 || involved.count_ones() < 2 || !grouping() {
        return None;
    }
    Some(Group {
        id: new_group_id(),
        involved,
    })
}

impl State {
    /// The group for shard number `i`'s batch (a shard with nothing to run is no part).
    fn group_for(&self, i: usize) -> Option<Group> {
        self.group
            .filter(|group| group.involved & (1u64 << self.shards[i]) != 0)
    }

    /// Shard `i`'s batch, taken out of the plan.
    fn take_batch(&mut self, i: usize) -> GroupBatch {
        GroupBatch {
            group: self.group_for(i),
            serve_later: self.serve_later,
            batch: std::mem::take(&mut self.batches[i]),
        }
    }

    /// The lock request for the next shard; the last one carries its batch.
    fn lock_next(&mut self, txn: TxnId) -> Action {
        let i = self.granted;
        let batch = (i + 1 == self.shards.len()).then(|| self.take_batch(i));
        Action::Send(
            self.shards[i],
            TxnMsg::Lock {
                txn,
                watcher: self.watcher,
                batch,
            },
        )
    }

    fn on_grant(&mut self, txn: TxnId, clean: bool) -> Vec<Action> {
        let i = self.granted;
        self.granted += 1;
        if !clean {
            // That shard let go itself; release the ones before it, and drop the watches on
            // the ones after it (EXEC ends every watch, run or not).
            self.dirty = true;
            let mut actions: Vec<Action> = self.shards[..i]
                .iter()
                .map(|&shard| Action::Send(shard, TxnMsg::Release(txn, None)))
                .collect();
            actions.extend(
                self.shards[i + 1..]
                    .iter()
                    .map(|&shard| Action::Send(shard, TxnMsg::Unwatch(self.watcher))),
            );
            actions.extend(self.finish());
            return actions;
        }
        if self.granted < self.shards.len() {
            return vec![self.lock_next(txn)];
        }
        // All held (the last shard has run its batch): the others run theirs.
        let mut actions: Vec<Action> = (0..i)
            .map(|k| {
                let batch = self.take_batch(k);
                Action::Send(self.shards[k], TxnMsg::Run { txn, batch })
            })
            .collect();
        actions.extend(self.finish_if_done(txn));
        actions
    }

    /// Once every batch ran and answered: EXEC's reply, then (batches on several shards)
    /// each of those shards serves the blocked clients its part's writes can serve.
    fn finish_if_done(&mut self, txn: TxnId) -> Vec<Action> {
        if self.granted != self.shards.len() || self.missing != 0 {
            return Vec::new();
        }
        let mut actions = self.finish();
        if self.serve_later {
            actions.extend(
                (self.shards.iter().zip(&self.ran))
                    .filter(|(_, ran)| **ran)
                    .map(|(&shard, _)| Action::Send(shard, TxnMsg::ServeWritten(txn))),
            );
        }
        actions
    }

    fn finish(&mut self) -> Vec<Action> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let reply = if self.dirty {
            Reply::NullArray
        } else {
            Reply::Array(
                std::mem::take(&mut self.replies)
                    .into_iter()
                    .map(|reply| {
                        reply.unwrap_or_else(|| Reply::error("ERR internal error: missing reply"))
                    })
                    .collect(),
            )
        };
        vec![Action::Finish(reply)]
    }
}

impl ReplySink for Coordinator {
    fn deliver(&self, seq: u64, part: Part, reply: Reply) {
        let Some(key) = self.key.get() else {
            // Finished: a reply after the end (cannot happen; every reply is counted).
            return;
        };
        let shard = shard::current();
        let txn: TxnId = (shard.id, key);
        let actions = {
            let mut state = self.state.borrow_mut();
            if state.finished {
                return;
            }
            if seq == GRANT_SEQ {
                state.on_grant(txn, reply == Reply::Integer(1))
            } else {
                let server = || shard.shared.info();
                if let Some(reply) = state.merges.accept(seq, part, reply, server) {
                    if let Some(slot) = state.replies.get_mut(seq as usize) {
                        *slot = Some(reply);
                        state.missing -= 1;
                    }
                }
                state.finish_if_done(txn)
            }
        };
        self.perform(&shard, actions);
    }
}
