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
    /// One other shard has its new broadcast prefixes.
    BroadcasterSet,
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
        self.track_reader((origin.shard, origin.sink), keys);
    }

    /// `reader` read `keys` (it tracks them).
    pub(crate) fn track_reader(&self, reader: Reader, keys: &[Bytes]) {
        let added = (self.tracking.table.borrow_mut()).remember(reader, keys);
        self.tracked_keys_counter()
            .fetch_add(added as u64, Ordering::Relaxed);
        self.refresh_event_log();
        self.enforce_tracking_limit();
    }

    /// The keys `events` modified, written by `writer`: their readers' invalidations.
    pub(crate) fn tracking_written(&self, events: &[KeyEvent], writer: Option<Origin>) {
        // A script's writes are its caller's.
        let writer =
            writer.map(|origin| (self.shared.acting_for).client_of((origin.shard, origin.sink)));
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

    /// A connection of this shard changed its tracking: how many other shards will confirm
    /// its new broadcast prefixes (`TrackingEvent::BroadcasterSet`).
    pub(crate) fn tracking_changed(&self, sink: SinkKey, change: TrackingChange) -> usize {
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
            return self.count - 1;
        }
        0
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

    /// Another shard's broadcaster (see `Note::Broadcaster`): set here, then confirmed to
    /// its connection.
    pub(crate) fn set_remote_broadcaster(&self, reader: Reader, prefixes: Vec<Bytes>) {
        self.set_broadcaster(reader, prefixes);
        self.forward.push_work(
            reader.0,
            Work::Note(Note::BroadcasterSet { sink: reader.1 }),
        );
    }

    /// This shard's connection `sink` has its broadcast prefixes on one more shard.
    pub(crate) fn broadcaster_set(&self, sink: SinkKey) {
        if let Some(sink) = self.sink(sink) {
            sink.tracking(TrackingEvent::BroadcasterSet);
        }
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

/// The programs running for a client (scripts), node-wide: looked up only while some run
/// and a tracked key is written.
#[derive(Default)]
pub(crate) struct ActingFor {
    running: std::sync::atomic::AtomicUsize,
    programs: std::sync::Mutex<std::collections::HashMap<Reader, Reader>>,
}

impl ActingFor {
    fn programs(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Reader, Reader>> {
        // One insert, remove or lookup per use: a panic while holding it leaves it whole.
        self.programs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The client `writer` writes for (itself, unless it is a program running for one).
    fn client_of(&self, writer: Reader) -> Reader {
        if self.running.load(Ordering::Relaxed) == 0 {
            return writer;
        }
        self.programs().get(&writer).copied().unwrap_or(writer)
    }

    fn start(&self, program: Reader, client: Reader) {
        self.programs().insert(program, client);
        self.running.fetch_add(1, Ordering::Relaxed);
    }

    fn end(&self, program: Reader) {
        if self.programs().remove(&program).is_some() {
            self.running.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A script's caller, for client tracking: the script's reads track its declared keys for
/// the caller (once per run), and its writes are the caller's (see [`ActingFor`]).
#[derive(Debug, Clone)]
pub(crate) struct ScriptCaller {
    reader: Reader,
    program: Reader,
    keys: Vec<Bytes>,
    remembered: std::rc::Rc<std::cell::Cell<bool>>,
}

impl Shard {
    /// The caller (`origin`) of a script about to run as `program`: `None` while no client
    /// tracks (nothing to do then).
    pub(crate) fn script_caller(
        &self,
        origin: Origin,
        program: &super::txn::held::Held,
        keys: &[Bytes],
    ) -> Option<ScriptCaller> {
        let tracking = &self.shared.session.live.hot.tracking_clients;
        if tracking.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let program = program.origin(0);
        let caller = ScriptCaller {
            reader: (origin.shard, origin.sink),
            program: (program.shard, program.sink),
            keys: keys.to_vec(),
            remembered: Default::default(),
        };
        self.shared.acting_for.start(caller.program, caller.reader);
        Some(caller)
    }

    pub(crate) fn script_ended(&self, caller: &ScriptCaller) {
        self.shared.acting_for.end(caller.program);
    }

    /// The script read: its caller tracks the script's declared keys (Redis's
    /// `trackingRememberKeys` for a script's caller).
    pub(crate) fn track_for_script(&self, caller: &ScriptCaller) {
        if caller.remembered.replace(true) || caller.keys.is_empty() {
            return;
        }
        let (shard, sink) = caller.reader;
        // A caller of this shard that does not track has nothing to remember.
        if shard == self.id && !self.tracking.local.borrow().contains(&sink) {
            return;
        }
        let mut by_owner: std::collections::BTreeMap<usize, Vec<Bytes>> = Default::default();
        for key in &caller.keys {
            let owner = crate::routing::shard_of(key, self.count);
            by_owner.entry(owner).or_default().push(key.clone());
        }
        for (owner, keys) in by_owner {
            if owner == self.id {
                self.track_reader(caller.reader, &keys);
            } else {
                let note = Note::TrackFor {
                    reader: caller.reader,
                    keys,
                };
                self.forward.push_work(owner, Work::Note(note));
            }
        }
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
