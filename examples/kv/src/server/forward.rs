//! Forwarding to other shards, in batches. Commands for another shard and replies going back are
//! queued per peer shard; a flusher task sends each non-empty queue as ONE runtime mesh message. The
//! flusher is woken by the first item queued, so it runs after the tasks already scheduled in
//! this loop iteration: every connection served in the iteration shares the message, pipelined
//! or not. The receiving shard runs the batch straight from its inbox (no task per message).
//!
//! Order: each (from, to) queue is FIFO and the runtime's inboxes are FIFO, so commands from
//! one shard reach another in the order they were dispatched. Commands on the same key always
//! go to the same shard, so a connection's writes and reads of a key stay in order.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use corewire::runtime::send_to;
use corewire::sync::Notify;

use super::shard::{self, Shard};
use super::sink::{Origin, SinkKey};
use crate::command::Command;
use crate::reply::Reply;

/// A command (or one shard's part of one) to run on its owning shard.
pub(crate) struct Job {
    pub origin: Origin,
    pub command: Command,
}

/// What travels in the job lane: commands, and transaction traffic (in the same lane so a
/// shard's commands and its transactions reach another shard in the order they were sent).
pub(crate) enum Work {
    Run(Job),
    Txn(super::txn::TxnMsg),
    /// A message for this shard's connections that answers no request: a keyspace event to
    /// publish, a tracking invalidation, a MONITOR line (see `notify.rs`).
    Note(super::notify::Note),
    /// The function libraries changed: shard 0 logs them (see `server/script.rs`).
    LogFunctions,
}

/// A reply on its way back to the shard its request came from.
pub(crate) struct Done {
    pub origin: Origin,
    pub reply: Reply,
}

/// A closed connection of shard `shard`: drop its blocked pops (see `blocking.rs`).
#[derive(Clone, Copy)]
pub(crate) struct Cancel {
    pub shard: usize,
    pub sink: SinkKey,
}

pub(crate) struct Forward {
    jobs: RefCell<Vec<Vec<Work>>>,
    dones: RefCell<Vec<Vec<Done>>>,
    /// Sent after the jobs, so a cancel reaches a shard after every job its connection sent.
    cancels: RefCell<Vec<Vec<Cancel>>>,
    flush: Notify,
    /// Items per message at most; 0: no limit. 1 turns batching off (for measuring it).
    max_batch: usize,
    stats: MeshStats,
}

#[derive(Default)]
struct MeshStats {
    job_messages: Cell<u64>,
    job_items: Cell<u64>,
    done_messages: Cell<u64>,
    done_items: Cell<u64>,
}

/// How well batching works on one shard: items per message is `*_items / *_messages`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardCounters {
    /// Messages that carried commands to other shards, and the commands they carried.
    pub job_messages: u64,
    pub job_items: u64,
    /// Messages that carried replies back, and the replies they carried.
    pub done_messages: u64,
    pub done_items: u64,
}

impl Forward {
    pub fn new(shards: usize, max_batch: usize) -> Forward {
        Forward {
            jobs: RefCell::new((0..shards).map(|_| Vec::new()).collect()),
            dones: RefCell::new((0..shards).map(|_| Vec::new()).collect()),
            cancels: RefCell::new((0..shards).map(|_| Vec::new()).collect()),
            flush: Notify::default(),
            max_batch,
            stats: MeshStats::default(),
        }
    }

    pub fn counters(&self) -> ForwardCounters {
        ForwardCounters {
            job_messages: self.stats.job_messages.get(),
            job_items: self.stats.job_items.get(),
            done_messages: self.stats.done_messages.get(),
            done_items: self.stats.done_items.get(),
        }
    }

    pub fn push_job(&self, target: usize, job: Job) {
        self.push_work(target, Work::Run(job));
    }

    pub fn push_work(&self, target: usize, work: Work) {
        self.jobs.borrow_mut()[target].push(work);
        self.flush.notify_one();
    }

    pub fn push_done(&self, target: usize, done: Done) {
        self.dones.borrow_mut()[target].push(done);
        self.flush.notify_one();
    }

    pub fn push_cancel(&self, target: usize, cancel: Cancel) {
        self.cancels.borrow_mut()[target].push(cancel);
        self.flush.notify_one();
    }

    fn take_cancels(&self, target: usize) -> Vec<Cancel> {
        std::mem::take(&mut self.cancels.borrow_mut()[target])
    }

    fn take_jobs(&self, target: usize) -> Vec<Work> {
        std::mem::take(&mut self.jobs.borrow_mut()[target])
    }

    fn take_dones(&self, target: usize) -> Vec<Done> {
        std::mem::take(&mut self.dones.borrow_mut()[target])
    }
}

/// The shard's flusher task: forever sends whatever was queued for other shards.
pub(crate) async fn run_flusher(shard: Rc<Shard>) {
    let forward = &shard.forward;
    let stats = &forward.stats;
    loop {
        forward.flush.notified().await;
        for target in 0..shard.count {
            if target == shard.id {
                continue;
            }
            // Replies first: they complete work that clients are already waiting for.
            let dones = forward.take_dones(target);
            bump(&stats.done_items, dones.len());
            let sent = send_batches(target, dones, forward.max_batch, Shard::deliver_all).await;
            bump(&stats.done_messages, sent);
            // Jobs and cancels taken together (no await between), cancels sent after the
            // jobs: a connection's jobs were queued before its cancel, so they go first.
            let jobs = forward.take_jobs(target);
            let cancels = forward.take_cancels(target);
            bump(&stats.job_items, jobs.len());
            let sent = send_batches(target, jobs, forward.max_batch, Shard::run_jobs).await;
            bump(&stats.job_messages, sent);
            send_batches(target, cancels, forward.max_batch, Shard::cancel_all).await;
        }
    }
}

/// Sends `items` to `target` in messages of at most `max` items (0: one message); each runs
/// `handler` on the target shard. Returns the number of messages.
async fn send_batches<T: Send + 'static>(
    target: usize,
    mut items: Vec<T>,
    max: usize,
    handler: fn(&Shard, Vec<T>),
) -> usize {
    let mut messages = 0;
    while !items.is_empty() {
        let rest = if max > 0 && items.len() > max {
            items.split_off(max)
        } else {
            Vec::new()
        };
        messages += 1;
        // Waits while the peer's inbox is full; the peer drains it without needing us.
        if send_to(target, move || shard::with(|s| handler(s, items)))
            .await
            .is_err()
        {
            tracing::error!(target, "mesh message for a missing shard");
        }
        items = rest;
    }
    messages
}

fn bump(counter: &Cell<u64>, by: usize) {
    counter.set(counter.get() + by as u64);
}
