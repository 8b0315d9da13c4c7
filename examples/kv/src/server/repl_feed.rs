//! Each shard's part of the replication stream. While replication is on (from the first
//! replica's sync), every write this shard's store performs is encoded here as the AOF
//! records it ([`crate::change::WriteOp`], through [`Feed`]); a per-shard task hands what
//! accumulated to the hub on shard 0 (`repl_master.rs`) as one mesh message per batch. The
//! channel from a shard to the hub is FIFO, so per key (a key lives on one shard) the
//! stream has the writes in the order they ran.
//!
//! Bytes are numbered per shard (`seq`): a full sync records each shard's `seq` when its
//! snapshot begins (the cut), and the hub forwards to that replica only what came after.
//! A WAIT rides the same channels: every shard sends the hub a mark behind the writes it
//! ran before the WAIT reached it, so the client's earlier writes, wherever they ran, are
//! in the offset it waits for.
//!
//! A transaction (EXEC) whose batches run on several shards is one [`Group`]: each
//! involved shard hands its part to the hub as a [`FeedItem::Part`], and the hub streams
//! the parts as one MULTI/EXEC once all arrived (holding each involved shard's later items
//! until then), so a replica applies it whole, as the master ran it. A program (a script,
//! or a multi-key command over shards) that holds shards writes in steps: each step's
//! block goes to the hub as a [`FeedItem::Piece`] of the program, and releasing the
//! shards closes each shard's part ([`close_program`]); the pieces then go out as one
//! MULTI/EXEC the same way.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};
use corewire::sync::Notify;

use super::sink::Origin;
use crate::change::{ChangeSink, WriteOp};
use crate::repl::shards::BarrierId;

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

/// What a shard sends the hub, in order.
pub(crate) enum FeedItem {
    /// Stream bytes numbered from `start` in this shard's numbering.
    Batch { start: u64, bytes: Bytes },
    /// This shard's part of a FLUSHALL (every shard runs one): the hub streams the first
    /// shard's and drops the others', so one FLUSHALL reaches replicas, before any write
    /// a client made after the FLUSHALL answered.
    FlushAll { start: u64, bytes: Bytes },
    /// This shard's part of transaction group `id` over the shards `involved` (a bit per
    /// shard): its commands without MULTI/EXEC, numbered from `start` (empty when it wrote
    /// nothing, or when this shard's writes are not streamed yet: the hub still needs
    /// every part to let the others go).
    Part {
        id: BarrierId,
        involved: u64,
        start: u64,
        bytes: Bytes,
    },
    /// A step of program `id` on this shard (its commands, numbered from `start`): held by
    /// the hub until the program's parts close.
    Piece {
        id: BarrierId,
        start: u64,
        bytes: Bytes,
    },
    /// This shard's mark of `WAIT replicas timeout` number `id` of the client at `origin`:
    /// every shard sends one behind the writes it ran before it, so the hub takes the
    /// WAIT's offset once all `parts` arrived (the client's writes may have run anywhere).
    Wait {
        origin: Origin,
        id: u64,
        parts: usize,
        replicas: u64,
        timeout_ms: u64,
        /// This shard's own stream's offset at the mark, where it has one (shard links:
        /// `repl_master/shard_link.rs`), set as the mark is queued.
        shard_offset: u64,
    },
}

#[derive(Default)]
struct FeedState {
    pending: BytesMut,
    /// Bytes produced so far (handed off and pending).
    seq: u64,
    /// The start of `pending` in `seq`'s numbering.
    pending_start: u64,
    queue: Vec<FeedItem>,
    /// A transaction block: `Some(false)` begun, `Some(true)` its MULTI written (or, in
    /// a group's part, not to be written).
    block: Option<bool>,
    group: Option<Group>,
    piece: Option<BarrierId>,
}

/// How a block of writes goes to the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block {
    /// One MULTI/EXEC of its own.
    Alone,
    /// This shard's part of a transaction over several shards.
    Part(Group),
    /// A step of a program that holds this shard.
    Piece(BarrierId),
}

/// A transaction over several shards, as each involved shard's batch is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group {
    pub id: BarrierId,
    pub involved: u64,
}

impl FeedState {
    fn seal(&mut self) {
        if !self.pending.is_empty() {
            let bytes = self.pending.split().freeze();
            self.push(FeedItem::Batch {
                start: self.pending_start,
                bytes,
            });
            self.pending_start = self.seq;
        }
    }

    /// Queues `item` for the hub; its bytes go on this shard's own stream too (see
    /// `repl_master/shard_link.rs`).
    fn push(&mut self, mut item: FeedItem) {
        super::repl_master::shard_tap(&mut item);
        self.queue.push(item);
    }

    fn append(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        self.seq += bytes.len() as u64;
    }
}

/// Some shard streams its writes (set before the first shard's cut, never cleared): an
/// EXEC over several shards then forms a [`Group`]. One read per such EXEC.
static STREAMING: AtomicBool = AtomicBool::new(false);

/// Whether a transaction over several shards starting now is streamed as a [`Group`]. A
/// group formed before any shard streams is not needed; one formed just before streaming
/// begins still completes (a shard not streaming yet sends an empty part).
pub(crate) fn grouping() -> bool {
    STREAMING.load(Ordering::Relaxed)
}

corewire::runtime::shard_local! {
    /// This shard's transaction and program ids (see [`new_group_id`]).
    static GROUP_IDS: Cell<u64> = Cell::new(0);
}

/// A new id for a transaction or program that starts on this shard.
pub(crate) fn new_group_id() -> BarrierId {
    let origin = corewire::runtime::shard_id() as u16;
    GROUP_IDS.with(|n| {
        n.set(n.get() + 1);
        BarrierId {
            origin,
            seq: n.get(),
        }
    })
}

corewire::runtime::shard_local! {
    /// Shared with the shard's state ([`feeding_flag`]), which reads it once per command.
    static ACTIVE: Rc<Cell<bool>> = Rc::default();
    static FEED: RefCell<FeedState> = RefCell::new(FeedState::default());
    static KICK: RefCell<Option<Rc<Notify>>> = RefCell::new(None);
}

/// Whether this shard's writes are being streamed (cheap: checked on the write path).
pub(crate) fn feeding() -> bool {
    ACTIVE.with(|active| active.get())
}

/// This shard's [`feeding`] flag itself: the command path reads it without a shard-local
/// lookup, which cost more than a GET's own store work.
pub(crate) fn feeding_flag() -> Rc<Cell<bool>> {
    ACTIVE.with(Rc::clone)
}

/// A change sink that streams what it records (while [`feeding`]) and passes it on.
pub(crate) struct Feed<'a, S> {
    pub inner: &'a mut S,
}

impl<S: ChangeSink> ChangeSink for Feed<'_, S> {
    const ENABLED: bool = true;

    fn record(&mut self, op: WriteOp<'_>) {
        self.inner.record(op);
        if feeding() {
            record(op);
        }
    }
}

/// Streams `op`, recorded outside a store's change sink (the function libraries), while
/// [`feeding`].
pub(crate) fn stream(op: WriteOp<'_>) {
    if feeding() {
        record(op);
    }
}

fn record(op: WriteOp<'_>) {
    FEED.with(|feed| {
        let mut feed = feed.borrow_mut();
        if feed.block == Some(false) {
            feed.block = Some(true);
            feed.append(MULTI);
        }
        let alone = matches!(op, WriteOp::FlushAll) && feed.block.is_none();
        if alone {
            feed.seal();
        }
        let before = feed.pending.len();
        op.encode(&mut feed.pending);
        feed.seq += (feed.pending.len() - before) as u64;
        if alone {
            let start = feed.pending_start;
            let bytes = feed.pending.split().freeze();
            feed.push(FeedItem::FlushAll { start, bytes });
            feed.pending_start = feed.seq;
        }
    });
    kick();
}

/// What runs until [`end_block`] goes out as one MULTI/EXEC (if anything is recorded), as
/// the AOF logs a transaction; in a `group`, as this shard's part of it.
pub(crate) fn begin_block(block: Block) {
    if !feeding() {
        if let Block::Part(group) = block {
            // Nothing of this shard is streamed yet; the others' parts wait for this one.
            send_direct(FeedItem::Part {
                id: group.id,
                involved: group.involved,
                start: 0,
                bytes: Bytes::new(),
            });
        }
        return;
    }
    FEED.with(|feed| {
        let mut feed = feed.borrow_mut();
        match block {
            Block::Part(group) => {
                feed.seal();
                feed.group = Some(group);
                feed.block = Some(true);
            }
            Block::Piece(id) => {
                feed.seal();
                feed.piece = Some(id);
                feed.block = Some(true);
            }
            Block::Alone => feed.block = Some(false),
        }
    });
}

pub(crate) fn end_block() {
    if !feeding() {
        return;
    }
    FEED.with(|feed| {
        let mut feed = feed.borrow_mut();
        let block = feed.block.take();
        if let Some(group) = feed.group.take() {
            let start = feed.pending_start;
            let bytes = feed.pending.split().freeze();
            feed.push(FeedItem::Part {
                id: group.id,
                involved: group.involved,
                start,
                bytes,
            });
            feed.pending_start = feed.seq;
        } else if let Some(id) = feed.piece.take() {
            if !feed.pending.is_empty() {
                let start = feed.pending_start;
                let bytes = feed.pending.split().freeze();
                feed.push(FeedItem::Piece { id, start, bytes });
                feed.pending_start = feed.seq;
            }
        } else if block == Some(true) {
            feed.append(EXEC);
        }
    });
    kick();
}

/// Program `group.id` lets this shard go: its part (its pieces) is complete; with other
/// shards in `group.involved`, the hub waits for theirs too.
pub(crate) fn close_program(group: Group) {
    let part = |start| FeedItem::Part {
        id: group.id,
        involved: group.involved,
        start,
        bytes: Bytes::new(),
    };
    if !feeding() {
        // The other shards' parts wait for this one (the group was formed while
        // replication streams: see `Held::release`).
        if group.involved.count_ones() >= 2 {
            send_direct(part(0));
        }
        return;
    }
    FEED.with(|feed| {
        let mut feed = feed.borrow_mut();
        feed.seal();
        let start = feed.seq;
        feed.push(part(start));
    });
    kick();
}

/// Wakes the shard's task: it runs after the tasks this loop iteration already scheduled,
/// so one message carries every write of the iteration.
fn kick() {
    KICK.with(|kick| {
        if let Some(kick) = &*kick.borrow() {
            kick.notify_one();
        }
    });
}

/// From now on a transaction or program over several shards forms a [`Group`] (set before
/// a cut is taken, so one planned after this is grouped whenever it runs).
pub(crate) fn start_grouping() {
    STREAMING.store(true, Ordering::SeqCst);
}

/// Starts streaming this shard's writes (idempotent) and returns the cut: the number of
/// bytes produced so far, all of them handed to the hub before anything after them.
pub(crate) fn start_and_cut() -> u64 {
    STREAMING.store(true, Ordering::Relaxed);
    if !feeding() {
        ACTIVE.with(|a| a.set(true));
        let notify = Rc::new(Notify::default());
        KICK.with(|kick| *kick.borrow_mut() = Some(notify.clone()));
        corewire::runtime::spawn_local(run(notify));
    }
    let cut = FEED.with(|feed| {
        let mut feed = feed.borrow_mut();
        feed.seal();
        feed.seq
    });
    kick();
    cut
}

/// A WAIT's mark (a [`FeedItem::Wait`]): to the hub behind this shard's writes, or
/// straight there while nothing is streamed from here.
pub(crate) fn wait_mark(item: FeedItem) {
    if !feeding() {
        send_direct(item);
        return;
    }
    FEED.with(|feed| {
        let mut feed = feed.borrow_mut();
        feed.seal();
        feed.push(item);
    });
    kick();
}

/// `item` straight to the hub (this shard streams nothing it must come behind).
fn send_direct(item: FeedItem) {
    let shard = corewire::runtime::shard_id();
    corewire::runtime::spawn_local(async move {
        let _ =
            corewire::runtime::send_to(0, move || super::repl_master::receive(shard, vec![item]))
                .await;
    });
}

/// The shard's task: hands each batch to the hub, one message at a time (a full hub inbox
/// makes it wait: the bound).
async fn run(kick: Rc<Notify>) {
    let shard = corewire::runtime::shard_id();
    loop {
        kick.notified().await;
        loop {
            let items = FEED.with(|feed| {
                let mut feed = feed.borrow_mut();
                // Never split a transaction block: its EXEC is still to come.
                if feed.block.is_none() {
                    feed.seal();
                }
                std::mem::take(&mut feed.queue)
            });
            if items.is_empty() {
                break;
            }
            if shard == 0 {
                super::repl_master::receive(0, items);
            } else if corewire::runtime::send_to(0, move || {
                super::repl_master::receive(shard, items)
            })
            .await
            .is_err()
            {
                tracing::error!("replication hub unreachable");
            }
        }
    }
}
