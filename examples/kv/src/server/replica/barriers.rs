//! Barriers on the replica's shard links (the record and the book: `repl::barrier`): a
//! shard link that reads a transaction's part stops there, and the shard that brings the
//! last part runs every part as one transaction over the involved shards, dispatched as
//! its link's command (the replica's two-phase locking keeps it whole for readers); the
//! held links go on once it ran.
//!
//! A part holding a FLUSHALL or FLUSHDB (every shard's part of such a transaction has its
//! own) cannot go as one transaction: dispatched, each flush would reach every shard. Its
//! parts run each on its own shard, one after the other, in a task of their own (their
//! order is the stream's; a reader may see one shard flushed before another, as while a
//! FLUSHALL outside a transaction runs shard by shard).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use corewire::runtime::spawn_local;

use super::super::shard::{self, now_ms, Shard};
use super::super::shared::ServerShared;
use super::super::sink::{Origin, SinkKey};
use crate::command::{Command, Transaction, TxnItem};
use crate::repl::barrier::{Arrival, BarrierId, Book, BookError, Retract};

/// A shard's part: the commands of its block.
pub(super) type PartItems = Vec<TxnItem>;

/// The node's book (in `ReplicaShared`).
pub(crate) struct Barriers(Mutex<Book<PartItems>>);

impl std::fmt::Debug for Barriers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Barriers")
    }
}

impl Barriers {
    pub(super) fn new(shards: usize) -> Barriers {
        Barriers(Mutex::new(Book::new(shards)))
    }

    fn lock(&self) -> MutexGuard<'_, Book<PartItems>> {
        // Every update is a few map operations: a panic while holding it leaves it usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn released(&self, shard: usize) -> bool {
        self.lock().released(shard)
    }

    pub(super) fn retract(&self, shard: usize) -> Retract {
        self.lock().retract(shard)
    }
}

/// What a shard's arrival asks its link to do.
pub(super) enum Step {
    /// Hold the stream until [`Barriers::released`].
    Hold,
    /// Dispatch this transaction (every part), then [`finish`] once it ran.
    Dispatch(Command),
    /// The parts run in a task (flushes inside): hold as for [`Step::Hold`].
    Spawned,
}

/// Shard `here`'s part of barrier `id` over `involved` arrived (its link is idle).
pub(super) fn arrive(
    shared: &Arc<ServerShared>,
    here: usize,
    id: BarrierId,
    involved: u64,
    items: PartItems,
) -> Result<Step, BookError> {
    let arrival = shared
        .replica
        .barriers
        .lock()
        .arrive(here, id, involved, items)?;
    let parts = match arrival {
        Arrival::Hold => return Ok(Step::Hold),
        Arrival::Apply(parts) => parts,
    };
    if parts.iter().any(|(_, items)| items.iter().any(flushes)) {
        let shared = shared.clone();
        spawn_local(async move {
            for (target, items) in parts {
                let _ = corewire::runtime::submit_to(target, move || async move {
                    run_here(items);
                })
                .await;
            }
            finish(&shared, id);
        });
        return Ok(Step::Spawned);
    }
    let items = parts.into_iter().flat_map(|(_, items)| items).collect();
    Ok(Step::Dispatch(Command::Transaction(Box::new(
        Transaction { items },
    ))))
}

/// Barrier `id`'s parts ran: every involved shard's link goes on.
pub(super) fn finish(shared: &ServerShared, id: BarrierId) {
    shared.replica.barriers.lock().finish(id);
    super::wake_link(&shard::current());
}

fn flushes(item: &TxnItem) -> bool {
    use crate::command::{KeyCommand, KeyOp};
    matches!(
        item,
        TxnItem::Run(
            Command::FlushAll
                | Command::Key(KeyCommand {
                    op: KeyOp::FlushDb,
                    ..
                })
        )
    )
}

/// A part's commands on this shard alone, in one go, as its link's.
fn run_here(items: PartItems) {
    let here: std::rc::Rc<Shard> = shard::current();
    let packed = here.shared.replica.shard_slots[here.id]
        .master_sink
        .load(Ordering::Relaxed);
    let Some(sink) = packed.checked_sub(1).map(SinkKey::unpack) else {
        return;
    };
    let origin = Origin {
        shard: here.id,
        sink,
        seq: 0,
        part: None,
    };
    let now = now_ms();
    for item in items {
        if let TxnItem::Run(command) = item {
            if let Some(reply) = here.execute_store(origin, command, now) {
                super::link::note_reply(&reply);
            }
        }
    }
}
