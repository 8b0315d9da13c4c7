//! Client tracking on a shard (see [`crate::clients::tracking`]): the keys its store holds
//! that tracking connections read, the broadcast prefixes of every such connection, and the
//! invalidations its writes cause, sent to the readers' shards. The node-wide count of
//! tracked keys is kept under `tracking-table-max-keys`: a shard over it forgets keys (each
//! forgotten key invalidated) until the count is back, one key per successful decrement of
//! the shared count, so no more keys are forgotten than needed over all shards.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use corewire::sync::Notify;

use super::forward::Work;
use super::notify::Note;
use super::shard::Shard;
use super::sink::{Origin, SinkKey};
use crate::clients::tracking::{Invalidation, Keys, TrackingTable};
use crate::clients::ClientAddress;
use crate::notify::KeyEvent;
use crate::session::TrackingChange;

/// A reading connection: its shard and its key there.
pub(crate) type Reader = (usize, SinkKey);

/// What a shard hands a tracking connection of its own (see [`super::sink::ReplySink::tracking`]).
#[derive(Debug)]
pub(crate) enum TrackingEvent {
    /// Keys it read (or wrote under a broadcast prefix) changed; `None`: everything.
    Invalidate {
        keys: Keys,
        /// Per key: it was written by the connection itself.
        by_self: Vec<bool>,
        bcast: bool,
    },
    /// Another connection's invalidation, redirected to this one.
    Deliver(Keys),
    /// Its redirect target is gone.
    RedirectBroken,
}

/// A shard's tracking state.
#[derive(Default)]
pub(crate) struct ShardTracking {
    table: RefCell<TrackingTable<Reader>>,
    /// This shard's connections with tracking on (they all get FLUSHALL's invalidation), and
    /// those of them that broadcast.
    local: RefCell<HashSet<SinkKey>>,
    broadcasting: RefCell<HashSet<SinkKey>>,
    /// Wakes the task that sends the broadcast invalidations gathered in a turn.
    flush: Notify,
}

impl Shard {
    fn tracked_keys_counter(&self) -> &std::sync::atomic::AtomicU64 {
        &self.shared.session.live.hot.tracking_keys
    }

    /// Whether writes here must be looked at for tracking.
    pub(crate) fn tracking_active(&self) -> bool {
        self.tracking.table.borrow().is_active()
    }

    /// Connection `origin` read `keys` (it tracks them).
    pub(crate) fn track_keys(&self, origin: Origin, keys: &[Bytes]) {
        let added = (self.tracking.table.borrow_mut()).remember((origin.shard, origin.sink), keys);
        self.tracked_keys_counter()
            .fetch_add(added as u64, Ordering::Relaxed);
        self.refresh_event_log();
        self.enforce_tracking_limit();
    }

    /// The keys `events` modified, written by `writer`: their readers' invalidations.
    pub(crate) fn tracking_written(&self, events: &[KeyEvent], writer: Option<Origin>) {
        let writer = writer.map(|origin| (origin.shard, origin.sink));
        let mut invalidations = Vec::new();
        let mut removed = 0;
        {
            let mut table = self.tracking.table.borrow_mut();
            for event in events.iter().filter(|event| event.modifies()) {
                removed += table.written(&event.key, writer, &mut invalidations);
            }
            if table.has_pending() {
                self.tracking.flush.notify_one();
            }
        }
        self.tracked_keys_counter()
            .fetch_sub(removed as u64, Ordering::Relaxed);
        for invalidation in invalidations {
            self.send_invalidation(invalidation);
        }
    }

    /// Keeps the node's tracked keys under `tracking-table-max-keys` (0: no limit).
    pub(crate) fn enforce_tracking_limit(&self) {
        let max = (self.shared.session.live.hot.tracking_max_keys).load(Ordering::Relaxed);
        if max == 0 {
            return;
        }
        let counter = self.tracked_keys_counter();
        let mut invalidations = Vec::new();
        loop {
            let total = counter.load(Ordering::Relaxed);
            if total <= max || self.tracking.table.borrow().keys() == 0 {
                break;
            }
            // Claim one eviction of the node's excess; another shard may take it first.
            if counter
                .compare_exchange(total, total - 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                (self.tracking.table.borrow_mut()).evict_one(&mut invalidations);
            }
        }
        for invalidation in invalidations {
            self.send_invalidation(invalidation);
        }
    }

    /// FLUSHALL here: every key forgotten, and every tracking connection of this shard told.
    pub(crate) fn tracking_flushed(&self) {
        let removed = self.tracking.table.borrow_mut().clear();
        self.tracked_keys_counter()
            .fetch_sub(removed as u64, Ordering::Relaxed);
        let local: Vec<SinkKey> = self.tracking.local.borrow().iter().copied().collect();
        for sink in local {
            self.invalidate_local(sink, None, Vec::new(), false);
        }
    }

    /// A command's keyspace events were too many to keep: every connection that tracks a
    /// key here (or broadcasts) drops its whole cache.
    pub(crate) fn tracking_invalidate_all(&self) {
        let (removed, everyone) = self.tracking.table.borrow_mut().forget_all();
        self.tracked_keys_counter()
            .fetch_sub(removed as u64, Ordering::Relaxed);
        for reader in everyone {
            self.send_to_reader(reader, None, Vec::new(), false);
        }
    }

    /// An invalidation to its reader, here or on its shard.
    fn send_invalidation(&self, invalidation: Invalidation<Reader>) {
        self.send_to_reader(
            invalidation.reader,
            Some(invalidation.keys),
            invalidation.by_self,
            invalidation.bcast,
        );
    }

    fn send_to_reader(&self, reader: Reader, keys: Keys, by_self: Vec<bool>, bcast: bool) {
        let (shard, sink) = reader;
        if shard == self.id {
            self.invalidate_local(sink, keys, by_self, bcast);
        } else {
            self.forward.push_work(
                shard,
                Work::Note(Note::Invalidate {
                    sink,
                    keys,
                    by_self,
                    bcast,
                }),
            );
        }
    }

    /// An invalidation for connection `sink` of this shard.
    pub(crate) fn invalidate_local(
        &self,
        sink: SinkKey,
        keys: Keys,
        by_self: Vec<bool>,
        bcast: bool,
    ) {
        if let Some(sink) = self.sink(sink) {
            sink.tracking(TrackingEvent::Invalidate {
                keys,
                by_self,
                bcast,
            });
        }
    }

    /// A tracking connection of this shard (`reader`) redirects `keys` to client `id`.
    pub(crate) fn redirect_invalidation(&self, id: u64, keys: Keys, reader: SinkKey) {
        let target = self.shared.session.clients.find(id);
        match target {
            None => self.redirect_broken(reader),
            Some(ClientAddress { shard, handle }) => {
                let sink = SinkKey::unpack(handle);
                if shard == self.id {
                    self.deliver_redirected(sink, keys, (self.id, reader));
                } else {
                    self.forward.push_work(
                        shard,
                        Work::Note(Note::TrackingDeliver {
                            sink,
                            keys,
                            reader: (self.id, reader),
                        }),
                    );
                }
            }
        }
    }

    /// A redirected invalidation for connection `sink` of this shard.
    pub(crate) fn deliver_redirected(&self, sink: SinkKey, keys: Keys, reader: Reader) {
        match self.sink(sink) {
            Some(target) => target.tracking(TrackingEvent::Deliver(keys)),
            None if reader.0 == self.id => self.redirect_broken(reader.1),
            None => self.forward.push_work(
                reader.0,
                Work::Note(Note::RedirectBroken { sink: reader.1 }),
            ),
        }
    }

    /// The redirect target of connection `reader` of this shard is gone.
    pub(crate) fn redirect_broken(&self, reader: SinkKey) {
        if let Some(sink) = self.sink(reader) {
            sink.tracking(TrackingEvent::RedirectBroken);
        }
    }

    /// A connection of this shard changed its tracking.
    pub(crate) fn tracking_changed(&self, sink: SinkKey, change: TrackingChange) {
        let mut local = self.tracking.local.borrow_mut();
        if change.on {
            local.insert(sink);
        } else {
            local.remove(&sink);
        }
        drop(local);
        let broadcasting = !change.prefixes.is_empty();
        let was = if broadcasting {
            !self.tracking.broadcasting.borrow_mut().insert(sink)
        } else {
            self.tracking.broadcasting.borrow_mut().remove(&sink)
        };
        if broadcasting || was {
            self.broadcast_prefixes((self.id, sink), change.prefixes);
        }
    }

    /// Connection `sink` of this shard closed.
    pub(crate) fn tracking_closed(&self, sink: SinkKey) {
        // (The node's count of tracking clients is the connection's to keep.)
        self.tracking.local.borrow_mut().remove(&sink);
        if self.tracking.broadcasting.borrow_mut().remove(&sink) {
            self.broadcast_prefixes((self.id, sink), Vec::new());
        }
    }

    /// A broadcasting connection's prefixes (none: it stopped), on every shard.
    fn broadcast_prefixes(&self, reader: Reader, prefixes: Vec<Bytes>) {
        for target in (0..self.count).filter(|&target| target != self.id) {
            self.forward.push_work(
                target,
                Work::Note(Note::Broadcaster {
                    reader,
                    prefixes: prefixes.clone(),
                }),
            );
        }
        self.set_broadcaster(reader, prefixes);
    }

    pub(crate) fn set_broadcaster(&self, reader: Reader, prefixes: Vec<Bytes>) {
        self.tracking
            .table
            .borrow_mut()
            .set_broadcaster(reader, prefixes);
        self.refresh_event_log();
    }

    /// Client tracking's counts here: keys tracked, (key, client) pairs, broadcast prefixes.
    pub(crate) fn tracking_counts(&self) -> [u64; 3] {
        let table = self.tracking.table.borrow();
        [
            table.keys() as u64,
            table.items() as u64,
            table.prefixes() as u64,
        ]
    }
}

/// The shard's task that sends the broadcast invalidations each turn gathered: it runs
/// after the tasks of the turn, so a transaction's keys under one prefix go in one message.
pub(crate) async fn run_flusher(shard: std::rc::Rc<Shard>) {
    loop {
        shard.tracking.flush.notified().await;
        let pending = shard.tracking.table.borrow_mut().take_pending();
        for invalidation in pending {
            shard.send_invalidation(invalidation);
        }
    }
}
