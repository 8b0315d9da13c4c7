//! One shard's state, owned by its thread: the store, the AOF, the reply sinks of the
//! connections it serves, and its cross-shard queues. Nothing here is shared between threads,
//! so the data path takes no locks: other shards reach this state only by sending a message
//! that runs here.

use std::cell::{Cell, OnceCell, RefCell, RefMut};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::aof_io::AofShard;
use super::blocking::Blocked;
use super::cluster::{self, ClusterShard};
use super::forward::{Done, Forward, Job, Work};
use super::pubsub::PubSubRegistry;
use super::repl_feed::Feed;
use super::shared::ServerShared;
use super::sink::{Merges, Origin, ReplySink, SinkKey, SinkRegistry};
use super::txn::watch::Tap;
use super::txn::{multikey, Coordinator, ShardTxn};
use crate::change::NoLog;
use crate::command::{Command, TxnItem};
use crate::reply::Reply;
use crate::routing::{route, single_shard, to_shards, FanOut, Route};
use crate::store::{ExpiryView, Store};

/// Sweep passes per tick at most, however much keeps expiring (bounds the pause).
const MAX_SWEEP_PASSES: usize = 4;

pub(crate) struct Shard {
    pub id: usize,
    pub count: usize,
    pub shared: Arc<ServerShared>,
    store: RefCell<Store>,
    pub aof: Option<AofShard>,
    sinks: RefCell<SinkRegistry>,
    /// Waiting connections that hold buffers, for the sweep to free them once idle (one
    /// entry per connection at most: a connection lists itself once until the sweep drops
    /// it; see `session/idle.rs`).
    idle: RefCell<Vec<SinkKey>>,
    pub forward: Forward,
    /// Blocked list pops waiting on this shard's keys.
    pub(crate) blocked: Blocked,
    /// Cluster mode's routing snapshot, and the MIGRATEs running here.
    pub cluster: ClusterShard,
    /// MULTI/EXEC: whether a transaction holds this shard, and the WATCHes here.
    pub(crate) txn: ShardTxn,
    /// This shard's subscribed connections.
    pub(crate) pubsub: RefCell<PubSubRegistry>,
    /// Keyspace notifications and client tracking on this shard (see `notify.rs`).
    pub(crate) notes: super::notify::ShardNotes,
    /// Command statistics, SLOWLOG, LATENCY, MONITOR (see `introspect.rs`).
    pub(crate) introspect: super::introspect::IntroShard,
    /// Client tracking (see `tracking.rs`).
    pub(crate) tracking: super::tracking::ShardTracking,
    /// This shard's Lua state and script stacks.
    pub(crate) scripts: super::script::ScriptShard,
    /// Whether this shard's writes are streamed to replicas (`repl_feed::feeding`'s flag).
    feeding: Rc<Cell<bool>>,
}

corewire::runtime::shard_local! {
    /// The store's state of the shard this runs on (a shard-local, not a thread-local: a
    /// second server in the same process, on the same threads, gets its own).
    static SHARD: OnceCell<Rc<Shard>> = OnceCell::new();
}

/// Makes `shard` this shard's store state; once per shard, at start-up.
pub(crate) fn install(shard: Rc<Shard>) -> Rc<Shard> {
    SHARD.with(|cell| {
        if cell.set(shard.clone()).is_err() {
            tracing::error!(shard = shard.id, "shard state installed twice");
        }
    });
    shard
}

/// This shard's store state. Panics if the server was not started on this shard (a
/// programming error: only server tasks and messages call it).
pub(crate) fn current() -> Rc<Shard> {
    SHARD
        .try_with(|cell| cell.get().cloned())
        .flatten()
        .expect("not a corewire-kv shard")
}

pub(crate) fn with<R>(f: impl FnOnce(&Shard) -> R) -> R {
    f(&current())
}

/// Whether `command` runs as one step over several shards ([`Route::Atomic`]).
fn spans_shards(command: &Command, shards: usize) -> bool {
    matches!(command, Command::Typed(_) | Command::Key(_))
        && matches!(route(command.clone(), shards), Route::Atomic { .. })
}

/// Unix time in milliseconds: the store's clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Shard {
    pub fn new(
        id: usize,
        count: usize,
        shared: Arc<ServerShared>,
        store: Store,
        aof: Option<AofShard>,
        mesh_batch: usize,
        cluster: ClusterShard,
    ) -> Shard {
        Shard {
            id,
            count,
            shared,
            store: RefCell::new(store),
            aof,
            sinks: RefCell::new(SinkRegistry::default()),
            idle: RefCell::default(),
            forward: Forward::new(count, mesh_batch),
            blocked: Blocked::default(),
            cluster,
            txn: ShardTxn::default(),
            pubsub: RefCell::new(PubSubRegistry::default()),
            notes: super::notify::ShardNotes::default(),
            introspect: Default::default(),
            tracking: Default::default(),
            scripts: Default::default(),
            feeding: super::repl_feed::feeding_flag(),
        }
    }

    /// Reads this shard's store (never across an await).
    pub fn with_store<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        f(&self.store.borrow())
    }

    pub fn register(&self, sink: Rc<dyn ReplySink>) -> SinkKey {
        self.sinks.borrow_mut().insert(sink)
    }

    /// Whether this shard's writes are streamed to replicas now ([`super::repl_feed::feeding`]
    /// without the shard-local lookup).
    pub(crate) fn feeding(&self) -> bool {
        self.feeding.get()
    }

    /// See [`super::blocking::Blocked::may_be_blocked`].
    pub fn may_be_blocked(&self, key: SinkKey) -> bool {
        self.blocked.may_be_blocked(key)
    }

    /// A registered sink of this shard.
    pub fn sink(&self, key: SinkKey) -> Option<Rc<dyn ReplySink>> {
        self.sinks.borrow().get(key)
    }

    /// Every registered sink of this shard, with its key.
    pub fn sinks(&self) -> Vec<(SinkKey, Rc<dyn ReplySink>)> {
        self.sinks.borrow().all()
    }

    /// Connection `key` waits holding buffers: the sweep frees them once it is idle.
    pub fn list_idle(&self, key: SinkKey) {
        self.idle.borrow_mut().push(key);
    }

    /// The sweep's pass over the listed connections: those idle for an interval free their
    /// buffers and leave the list; the others (and the ones gone) are looked at again next
    /// time (or dropped).
    fn sweep_idle(&self) {
        let listed = self.idle.take();
        let mut kept = Vec::new();
        for key in listed {
            if self.sink(key).is_some_and(|sink| sink.idle_sweep()) {
                kept.push(key);
            }
        }
        self.idle.borrow_mut().append(&mut kept);
    }

    /// A sink is gone: its subscriptions, blocked waits (here and on every shard) and watches
    /// go with it. Idempotent (a connection CLIENT KILL released closes later, and calls it
    /// again).
    pub fn unregister(&self, key: SinkKey) {
        self.sinks.borrow_mut().remove(key);
        self.forget_subscriber(key);
        self.set_monitor(key, false);
        self.tracking_closed(key);
        self.cancel_waits(key);
        self.drop_watches(key);
        super::repl_master::closed(self, key);
    }

    /// A program's sink (see [`super::txn::held::Held`]) ends: a program never subscribes,
    /// monitors, tracks, watches or replicates under its own key (it acts for its caller),
    /// so only its registration and any wait it left go; [`Self::unregister`] does the rest
    /// for connections.
    pub(crate) fn unregister_program(&self, key: SinkKey) {
        self.sinks.borrow_mut().remove(key);
        self.cancel_waits(key);
    }

    /// Connection `sink` closed: its watches go (after anything it sent to those shards).
    fn drop_watches(&self, sink: SinkKey) {
        let origin = Origin {
            shard: self.id,
            sink,
            seq: 0,
            part: None,
        };
        for target in self.txn.take_watching(sink) {
            let job = Job {
                origin,
                command: Command::Unwatch,
            };
            if target == self.id {
                // The reply has nowhere to go.
                let _ = self.execute_gated(origin, job.command, now_ms());
            } else {
                self.forward.push_job(target, job);
            }
        }
    }

    /// Routes request `seq` of `sink`: parts this shard owns run now (at `now`, Unix ms), the
    /// others are queued for their shards. Returns the reply if it is already complete; otherwise it reaches
    /// the sink later through [`ReplySink::deliver`]. `merges` is the sink's own merge table
    /// (the caller holds it borrowed, which is why local replies are returned, not delivered).
    pub fn dispatch(
        &self,
        sink: SinkKey,
        seq: u64,
        command: Command,
        merges: &mut Merges,
        now: u64,
    ) -> Option<Reply> {
        let mut origin = Origin {
            shard: self.id,
            sink,
            seq,
            part: None,
        };
        if let Some(aof) = &self.aof {
            if let Err(refusal) = aof.admit(&command) {
                return Some(refusal);
            }
        }
        // The setting first: it is off on most servers, and `is_write` is a match over every
        // kind of command.
        let min = (self.shared.session.live.hot.min_replicas_to_write)
            .load(std::sync::atomic::Ordering::Relaxed);
        if min > 0 && command.is_write() {
            if let Some(refusal) = self.shared.repl.write_refusal(min) {
                return Some(refusal);
            }
        }
        self.blocked.note_dispatch(sink, &command);
        // Most commands: their shard follows from the command alone.
        if let Some(shard) = single_shard(&command, self.count) {
            return self.run_single(origin, shard, command, now);
        }
        let route = match command {
            Command::Transaction(transaction) => {
                let watching = self.txn.take_watching(sink);
                if transaction.items.iter().any(|item| match item {
                    TxnItem::Run(command) => {
                        spans_shards(command, self.count) || super::script::is_run(command)
                    }
                    TxnItem::Answered(_) => false,
                }) {
                    multikey::start_transaction(current(), origin, *transaction, watching);
                    return None;
                }
                let reply = Coordinator::start(self, origin, *transaction, watching);
                if reply.is_none() {
                    self.txn.hold_back(sink, seq);
                }
                return reply;
            }
            Command::Unwatch => {
                let watching = self.txn.take_watching(sink);
                if watching.is_empty() {
                    return Some(Reply::ok());
                }
                to_shards(Command::Unwatch, &watching)
            }
            Command::Script(script) => return super::script::dispatch(self, origin, script),
            Command::Repl(request) => return super::repl_master::dispatch(self, origin, request),
            command if super::scan::handles(&command, self.count) => {
                super::scan::start(current(), origin, command);
                return None;
            }
            command => route(command, self.count),
        };
        if let Route::Single {
            shard,
            command: Command::Watch(_),
        } = &route
        {
            self.txn.note_watch(sink, [*shard]);
        }
        if let Route::FanOut(fan_out) = &route {
            if matches!(fan_out.parts.first(), Some(part) if matches!(part.command, Command::Watch(_)))
            {
                self.txn
                    .note_watch(sink, fan_out.parts.iter().map(|part| part.shard));
            }
        }
        match route {
            Route::Refused(reply) => Some(reply),
            Route::Atomic { shards, command } => {
                multikey::start(current(), origin, shards, command);
                None
            }
            Route::Single { shard, command } => self.run_single(origin, shard, command, now),
            Route::FanOut(FanOut { parts, merger }) => {
                merges.start(seq, merger);
                let mut complete = None;
                for (i, part) in parts.into_iter().enumerate() {
                    origin.part = Some(i as u32);
                    if part.shard != self.id {
                        self.forward.push_job(
                            part.shard,
                            Job {
                                origin,
                                command: part.command,
                            },
                        );
                    } else if let Some(reply) = self.execute_gated(origin, part.command, now) {
                        complete = merges.accept(seq, origin.part, reply, || self.shared.info());
                    }
                }
                complete
            }
        }
    }

    /// `command` to the shard that runs it whole: this one, or another through its inbox.
    #[inline]
    fn run_single(
        &self,
        origin: Origin,
        shard: usize,
        command: Command,
        now: u64,
    ) -> Option<Reply> {
        if shard == self.id {
            return self.execute_gated(origin, command, now);
        }
        self.forward.push_job(shard, Job { origin, command });
        None
    }

    /// Runs a command this shard owns, after the cluster check (see [`cluster::execute`]).
    /// `None`: the reply is delivered later (the durability gate holds it until the AOF
    /// covering it is on disk, a MIGRATE holds its keys, or the glue runs it).
    ///
    /// Inlined, as the other layers that only pass the command on: a call per layer copies
    /// the whole command again.
    #[inline]
    pub fn execute(&self, origin: Origin, command: Command, now: u64) -> Option<Reply> {
        cluster::execute(self, origin, command, now)
    }

    /// Runs a command on the store, through the AOF when there is one; a blocking pop with
    /// nothing to pop waits, and a write serves the pops waiting on its keys (see
    /// [`super::blocking`]).
    #[inline]
    pub fn execute_plain(&self, origin: Origin, command: Command, now: u64) -> Option<Reply> {
        self.execute_blocking_aware(origin, command, now)
    }

    /// Runs a command on the store, through the AOF when there is one.
    pub(super) fn execute_store(
        &self,
        origin: Origin,
        command: Command,
        now: u64,
    ) -> Option<Reply> {
        let info = matches!(command, Command::Info(_));
        let flush = matches!(command, Command::FlushAll);
        let reply = self.execute_store_only(origin, command, now);
        // Its keyspace events go out (notifications, tracking invalidations).
        self.after_change(Some(origin), now);
        if flush {
            self.tracking_flushed();
            super::rdb_commands::after_flushall_part(self);
        }
        match reply {
            // INFO's part: the store's numbers and the glue's.
            Some(stats) if info => Some(self.info_part(super::rdb_save::adjust_info(stats))),
            reply => reply,
        }
    }

    fn info_part(&self, stats: Reply) -> Reply {
        let pubsub = self.pubsub.borrow().names();
        let clients_memory = (self.sinks().iter())
            .map(|(_, sink)| sink.memory() as u64)
            .sum();
        crate::info::ShardPart::to_reply(
            stats,
            self.info_calls(),
            self.tracking_counts(),
            pubsub,
            clients_memory,
        )
    }

    fn execute_store_only(&self, origin: Origin, command: Command, now: u64) -> Option<Reply> {
        let mut store = self.store.borrow_mut();
        store.set_expiry_view(self.expiry_view(&origin, now));
        // Only while someone watches keys here do writes go through the watch tap.
        let mut watches = self.txn.watches.borrow_mut();
        let is_flush = matches!(
            &command,
            Command::FlushAll
                | Command::Key(crate::command::KeyCommand {
                    op: crate::command::KeyOp::FlushDb,
                    ..
                })
        );
        if is_flush && !watches.is_empty() {
            watches.touch_stored(|key| store.stored_expiry(key).is_some());
        }
        let watches = (!watches.is_empty()).then_some(&mut *watches);
        // A save in progress keeps what this write changes as it was (see `rdb_save.rs`).
        super::rdb_save::before_write(&mut store, &command, now);
        let reply = match &self.aof {
            None if matches!(command, Command::BgRewriteAof) => Some(Reply::error(
                "ERR BGREWRITEAOF needs the append-only log: start corewire-kv with --aof DIR",
            )),
            None if self.feeding.get() => {
                let mut feed = Feed { inner: &mut NoLog };
                Some(match watches {
                    None => store.execute(command, now, &mut feed),
                    Some(watches) => store.execute(
                        command,
                        now,
                        &mut Tap {
                            inner: &mut feed,
                            watches,
                        },
                    ),
                })
            }
            None => Some(match watches {
                None => store.execute(command, now, &mut NoLog),
                Some(watches) => store.execute(
                    command,
                    now,
                    &mut Tap {
                        inner: &mut NoLog,
                        watches,
                    },
                ),
            }),
            Some(aof) => aof.execute(&mut store, origin, command, now, watches),
        };
        if is_flush {
            // The keyspace's memory back to the system now, not a purge delay later.
            crate::heap::collect(true);
        }
        reply
    }

    /// The shard's store, for the AOF rewrite's snapshot steps. Never hold it across an
    /// await.
    pub fn store(&self) -> RefMut<'_, Store> {
        self.store.borrow_mut()
    }

    /// Sends a reply to the sink that asked, on this shard or another.
    pub fn deliver(&self, origin: Origin, reply: Reply) {
        if origin.shard != self.id {
            self.forward.push_done(origin.shard, Done { origin, reply });
            return;
        }
        self.txn.reply_arrived(origin.sink, origin.seq);
        // Cloned out of the registry so the sink may register or unregister others.
        let sink = self.sinks.borrow().get(origin.sink);
        match sink {
            Some(sink) => sink.deliver(origin.seq, origin.part, reply),
            // The connection closed while its request ran elsewhere.
            None => tracing::trace!(seq = origin.seq, "reply for a closed connection dropped"),
        }
    }

    /// A batch of commands from another shard (runs from the inbox).
    pub fn run_jobs(&self, jobs: Vec<Work>) {
        let now = now_ms();
        for work in jobs {
            let job = match work {
                Work::Run(job) => job,
                Work::Txn(msg) => {
                    self.on_txn(msg, now);
                    continue;
                }
                Work::Note(note) => {
                    self.on_note(note, now);
                    continue;
                }
                Work::LogFunctions => {
                    super::script::log_functions_here(self);
                    continue;
                }
            };
            if let Some(reply) = self.execute_gated(job.origin, job.command, now) {
                self.forward.push_done(
                    job.origin.shard,
                    Done {
                        origin: job.origin,
                        reply,
                    },
                );
            }
        }
    }

    /// A batch of replies for this shard's sinks (runs from the inbox).
    pub fn deliver_all(&self, dones: Vec<Done>) {
        for done in dones {
            self.deliver(done.origin, done.reply);
        }
    }

    /// CONFIG SET's settings, on this shard: its share of `maxmemory` (as at start-up, an
    /// equal share per shard), the policy, the server-wide client limit, the keyspace events
    /// published, the encodings' thresholds and the tracking table's limit.
    pub(crate) fn apply_settings(&self, settings: &[crate::command::Setting]) -> Reply {
        use crate::command::Setting;
        let mut store = self.store.borrow_mut();
        let mut limit = store.memory_limit();
        let mut enforce_tracking = false;
        for setting in settings {
            match *setting {
                Setting::MaxMemory(total) => limit.max_bytes = total.div_ceil(self.count as u64),
                Setting::MaxMemoryPolicy(policy) => limit.policy = policy,
                Setting::MaxMemorySamples(n) => limit.samples = n.max(1),
                Setting::MaxClients(n) => self
                    .shared
                    .maxclients
                    .store(n, std::sync::atomic::Ordering::Relaxed),
                Setting::Notify(flags) => self.set_notify(flags),
                Setting::Encoding(limits) => store.set_encoding_limits(limits),
                Setting::TrackingMaxKeys(_) => enforce_tracking = true,
                Setting::ProtectedMode(on) => self
                    .shared
                    .protected_mode
                    .store(on, std::sync::atomic::Ordering::Relaxed),
            }
        }
        store.set_memory_limit(limit);
        drop(store);
        self.refresh_event_log();
        if enforce_tracking {
            self.enforce_tracking_limit();
        }
        Reply::ok()
    }

    /// How a command from `origin` treats expired keys: as a replica's master says; while
    /// CLIENT PAUSE is in force, hidden but kept (as Redis, which neither deletes nor
    /// evicts then: those would be writes a pause must not let through). `now`: the
    /// command's clock (a clock read per command here cost more than the rest of the check).
    fn expiry_view(&self, origin: &Origin, now: u64) -> ExpiryView {
        match self.shared.replica.expiry_view(origin) {
            ExpiryView::Delete if self.shared.session.clients.is_paused(now) => ExpiryView::Hide,
            view => view,
        }
    }

    /// One tick of active expiry: a few bounded passes over keys with a TTL.
    pub fn sweep(&self, work: usize) {
        self.sweep_idle();
        let now = now_ms();
        // A transaction holding the shard sees no key vanish under it; the next tick sweeps.
        // A replica's keys expire only when its master deletes them; nothing expires while
        // CLIENT PAUSE holds writes (the deletions would be writes).
        let passes = if self.txn.is_busy()
            || !self.introspect.active_expire.get()
            || self.shared.replica.is_replica()
            || self.shared.session.clients.is_paused(now_ms())
        {
            0
        } else {
            MAX_SWEEP_PASSES
        };
        let mut store = self.store.borrow_mut();
        // What UNLINK left to free, off the commands' path (see `store/lazyfree.rs`).
        store.free_lazily();
        let started = std::time::Instant::now();
        store.sample_rates(now);
        for _ in 0..passes {
            let outcome = match &self.aof {
                None if self.feeding.get() => {
                    store.sweep(now, work, &mut Feed { inner: &mut NoLog })
                }
                None => store.sweep(now, work, &mut NoLog),
                Some(aof) => aof.sweep(&mut store, now, work),
            };
            if !outcome.should_continue() {
                break;
            }
        }
        drop(store);
        self.latency_event("expire-cycle", started.elapsed().as_millis() as u64);
        // The keys that expired: their events go out.
        self.after_change(None, now);
        // As Redis's cron does: a limit lowered since is reached again.
        self.enforce_tracking_limit();
        self.expire_waiters(now);
        if let Some(aof) = &self.aof {
            aof.tick(now);
        }
    }
}
