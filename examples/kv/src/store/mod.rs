//! A shard's keyspace: string keys and values with optional expiry, executed single-threaded
//! by the shard that owns them. Time comes from the caller (`now_ms`, Unix milliseconds), so
//! the store never reads a clock and tests control time exactly.

mod bitmap;
mod cluster;
mod compact;
mod emit;
mod entry;
mod expiring;
mod fields;
mod hll;
mod keyops;
mod keys;
mod keyspace;
mod lazyfree;
mod lcs;
mod list_pack;
mod lolwut;
mod memory;
mod object;
mod positions;
mod rdb_object;
mod snapshot;
mod sort;
mod stats;
mod strings;
mod sweep;
mod table;
mod types;
mod value;
mod zorder;

use bytes::Bytes;

use crate::change::{ChangeSink, NoLog};
use crate::command::{Command, CommandError};
use crate::reply::Reply;

use cluster::SlotIndex;
use expiring::ExpiringIndex;
use stats::Counters;

pub(crate) use cluster::key_at;
pub use memory::{EvictionPolicy, MemoryLimit};
pub use object::EncodingLimits;
pub use rdb_object::CheckedStream;
pub use snapshot::SnapshotProgress;
pub use stats::ShardStats;
pub use sweep::SweepOutcome;
pub(crate) use types::args::format_double;
pub use types::stream::read::{
    served_from as stream_served_from, ReadArgs as StreamReadArgs, Ready as StreamReady,
};
pub use value::ValueType;
/// A stream's parts (`Value::Stream` holds a [`stream::Stream`]), for code that saves and
/// loads one: entries through `range`/`append`, the metadata and groups as fields.
pub(crate) mod stream {
    #[allow(unused_imports)]
    pub(crate) use super::types::stream::group::{Consumer, Group, Nack};
    #[allow(unused_imports)]
    pub(crate) use super::types::stream::{NodeLimits, Stream, StreamId};
}

/// XREAD / XREADGROUP's options (`None` when they do not parse).
pub fn stream_read_args(args: &[Bytes], op: crate::command::TypedOp) -> Option<StreamReadArgs> {
    types::stream::read::parse_read(args, op == crate::command::TypedOp::XReadGroup).ok()
}

/// The keys of an XREAD / XREADGROUP (none when the arguments are wrong).
pub fn stream_read_keys(args: &[Bytes]) -> &[Bytes] {
    types::stream::read::read_keys(args)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// Largest value APPEND may build (Redis `proto-max-bulk-len`).
    pub max_value_len: usize,
    /// This shard's share of `--maxmemory`, and what happens past it.
    pub memory: MemoryLimit,
    /// The thresholds OBJECT ENCODING reports against.
    pub encoding: EncodingLimits,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            max_value_len: 512 * 1024 * 1024,
            memory: MemoryLimit::default(),
            encoding: EncodingLimits::default(),
        }
    }
}

/// One shard's data. Not `Sync` by design: only its shard thread touches it.
///
/// Keys and values are copied on insert rather than kept as slices of the request, because a
/// slice would pin the connection's whole read buffer for as long as the key lives.
///
/// The keyspace is a `table::KeyTable` (store/table.rs): a hash table with a dense order, like an
/// `IndexMap`'s (which it replaced, see `table.rs`). Removal is
/// `swap_remove` (the last entry fills the hole), insertion appends, and nothing else moves
/// an entry. A walk downwards over the indices can therefore resume between loop iterations
/// while commands run and still meet every key that stays (a key moved by `swap_remove` comes
/// from the part already walked): the AOF rewrite's snapshot relies on it
/// ([`Store::snapshot_begin`]), and SCAN and random sampling can use the same order.
#[derive(Debug)]
pub struct Store {
    map: table::KeyTable,
    expiring: ExpiringIndex,
    counters: Counters,
    data_bytes: usize,
    config: StoreConfig,
    /// The snapshot in progress: see `snapshot.rs`.
    snapshot: Option<snapshot::Snapshot>,
    /// The keys of each hash slot, kept in cluster mode only ([`Store::enable_slot_index`]).
    slot_index: Option<SlotIndex>,
    /// The access clock and eviction counters of `--maxmemory`.
    memory: memory::MemoryState,
    /// INFO's `instantaneous_ops_per_sec` (sampled by [`Store::sample_rates`]) and the
    /// running `avg_ttl` the sweep estimates.
    ops_rate: stats::RateSampler,
    avg_ttl_ms: u64,
    /// UNLINKed values waiting to be freed (see `lazyfree.rs`).
    lazy_free: lazyfree::LazyFree,
    /// The keyspace events of the command running (see [`crate::notify`]).
    events: crate::notify::EventLog,
    /// The command running does not count as an access to its keys (TYPE, TTL, EXISTS,
    /// OBJECT: Redis's `LOOKUP_NOTOUCH`).
    no_touch: bool,
    /// Collections the command running emptied (and so removed), whose `del` event follows
    /// the command's own event on them, as in Redis.
    emptied: Vec<Bytes>,
    /// How many changes the command running made, when it says (SETBIT, BITFIELD, PFADD,
    /// PFCOUNT, SORT STORE count as Redis's `server.dirty` does); otherwise a write that
    /// succeeds counts one.
    changes: Option<u64>,
    /// What an expired key is to the command running (a replica's keys expire only when
    /// its master says so).
    expiry_view: ExpiryView,
}

/// How the command running treats keys past their TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpiryView {
    /// A master: an expired key met is deleted (lazy expiry), and memory is made room for.
    #[default]
    Delete,
    /// A replica serving its clients: an expired key reads as missing but stays until the
    /// master's DEL arrives; nothing is evicted.
    Hide,
    /// A replica applying its master's stream: every key is there until the master deletes
    /// it (the master deletes what expired before it touches it).
    Keep,
}

impl Default for Store {
    fn default() -> Self {
        Store::new(StoreConfig::default())
    }
}

impl Store {
    pub fn new(config: StoreConfig) -> Self {
        Store {
            map: table::KeyTable::default(),
            expiring: ExpiringIndex::default(),
            counters: Counters::default(),
            data_bytes: 0,
            config,
            snapshot: None,
            slot_index: None,
            memory: memory::MemoryState::default(),
            ops_rate: stats::RateSampler::default(),
            avg_ttl_ms: 0,
            lazy_free: lazyfree::LazyFree::default(),
            events: crate::notify::EventLog::default(),
            no_touch: false,
            emptied: Vec::new(),
            changes: None,
            expiry_view: ExpiryView::Delete,
        }
    }

    /// How the commands run from now on treat expired keys (the glue sets it per command
    /// on a replica).
    pub fn set_expiry_view(&mut self, view: ExpiryView) {
        self.expiry_view = view;
    }

    /// Whether the store records the keyspace events of what it runs (see
    /// [`Store::take_events`]).
    pub fn set_event_log(&mut self, on: bool) {
        self.events.set_enabled(on);
    }

    pub fn event_log_enabled(&self) -> bool {
        self.events.is_enabled()
    }

    /// The keyspace events recorded since the last call, in order.
    pub fn take_events(&mut self) -> crate::notify::Events {
        self.events.take()
    }

    /// Records a keyspace event (Redis's `notifyKeyspaceEvent`): free while the log is off.
    #[inline]
    pub(crate) fn notify(&mut self, class: crate::notify::Class, event: &'static str, key: &[u8]) {
        self.events.record(class, event, key);
    }

    /// The `del` event of `key` if the command running emptied it.
    pub(crate) fn notify_emptied(&mut self, key: &[u8]) {
        if let Some(at) = self.emptied.iter().position(|k| &k[..] == key) {
            let key = self.emptied.swap_remove(at);
            self.notify(crate::notify::Class::Generic, "del", &key);
        }
    }

    /// CONFIG SET of the encodings' thresholds.
    pub fn set_encoding_limits(&mut self, limits: EncodingLimits) {
        self.config.encoding = limits;
    }

    pub fn encoding_limits(&self) -> EncodingLimits {
        self.config.encoding
    }

    /// The glue's tick (every sweep interval): samples the command rate at `now_ms`.
    pub fn sample_rates(&mut self, now_ms: u64) {
        self.ops_rate
            .sample(now_ms, self.counters.commands_processed);
    }

    /// Executes one command (or one shard's part of a fanned-out command) at `now_ms`.
    /// Every write, including lazy expirations it triggers, is reported to `sink` before the
    /// call returns, so an AOF record exists before the reply can be released.
    ///
    /// INFO's per-shard reply is [`ShardStats::to_reply`]; [`crate::routing::Merger`] turns the
    /// parts into the INFO text.
    pub fn execute<S: ChangeSink>(&mut self, command: Command, now_ms: u64, sink: &mut S) -> Reply {
        self.counters.commands_processed += 1;
        self.memory.clock = memory::lru_clock(now_ms);
        self.no_touch = object::is_no_touch(&command);
        // A replica never evicts (`replica-ignore-maxmemory yes`): its master decides.
        if self.expiry_view == ExpiryView::Delete {
            if let Err(error) = self.make_room(&command, now_ms, sink) {
                return error.into();
            }
        }
        let write = command.is_write();
        let reply = self.run(command, now_ms, sink);
        let changes = self.changes.take();
        if !reply.is_error() {
            self.counters.dirty += changes.unwrap_or(u64::from(write));
        }
        // Emptied collections whose command sent no event of its own still get their `del`.
        for key in std::mem::take(&mut self.emptied) {
            self.notify(crate::notify::Class::Generic, "del", &key);
        }
        reply
    }

    /// Applies a command read back from the AOF.
    ///
    /// Runs at time 0, i.e. before any logged expiry (logged times are absolute and
    /// positive), so nothing expires during replay: expirations that happened originally are
    /// in the log as DELs. Once replay is done, normal calls with the real clock expire
    /// whatever is due. Not counted in the stats.
    pub fn apply_replayed(&mut self, command: Command) -> Reply {
        self.run(command, 0, &mut NoLog)
    }

    /// Heap bytes the key table holds, its spare capacity included (MEMORY STATS's
    /// `overhead.hashtable.main`).
    pub fn table_heap_bytes(&self) -> u64 {
        self.map.heap_bytes() as u64
    }

    pub fn stats(&self) -> ShardStats {
        ShardStats {
            keys: self.map.len() as u64,
            expires: self.expiring.len() as u64,
            data_bytes: self.data_bytes as u64,
            keyspace_hits: self.counters.keyspace_hits,
            keyspace_misses: self.counters.keyspace_misses,
            commands_processed: self.counters.commands_processed,
            expired_keys: self.counters.expired_keys,
            used_memory: self.used_memory(),
            evicted_keys: self.memory.evicted_keys,
            ops_per_sec: self.ops_rate.per_sec(),
            avg_ttl_ms: self.avg_ttl_ms,
            dirty: self.counters.dirty,
            lazyfree_pending_objects: self.lazy_free.pending(),
            lazyfreed_objects: self.lazy_free.freed(),
            aof: Default::default(),
        }
    }

    /// Keys currently stored, including expired ones not yet removed (like Redis DBSIZE).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// CONFIG SET maxmemory / maxmemory-policy: this shard's new share and policy.
    pub fn set_memory_limit(&mut self, limit: MemoryLimit) {
        self.config.memory = limit;
    }

    pub fn memory_limit(&self) -> MemoryLimit {
        self.config.memory
    }

    /// CONFIG RESETSTAT: the counters INFO reports start again from zero.
    pub fn reset_stats(&mut self) {
        self.counters = Counters::default();
        self.ops_rate = stats::RateSampler::default();
        self.memory.evicted_keys = 0;
        self.lazy_free.reset_stats();
    }

    /// Frees a batch of the values UNLINK left to free later (called on the shard's tick);
    /// whether some still wait.
    pub fn free_lazily(&mut self) -> bool {
        self.lazy_free.drain()
    }

    /// `key`'s TTL as WATCH sees it: `None` if the key is not stored, `Some(None)` if it is
    /// stored without a TTL, `Some(Some(at_ms))` with one (possibly past: expired but not yet
    /// reclaimed). Looks only.
    pub fn stored_expiry(&self, key: &[u8]) -> Option<Option<u64>> {
        self.map.get(key).map(|entry| self.expiring.of(key, entry))
    }

    /// Whether `key` holds a live, non-empty list at `now_ms`: a blocked pop would be served.
    /// Looks only (no lazy expiry, nothing logged).
    pub fn has_list_items(&self, key: &[u8], now_ms: u64) -> bool {
        self.map.get(key).is_some_and(|entry| {
            !self.expiring.expired(key, entry, now_ms)
                && matches!(&entry.value, value::Value::List(list) if !list.is_empty())
        })
    }

    /// Whether `key` holds a live, non-empty sorted set at `now_ms`: a blocked BZPOPMIN,
    /// BZPOPMAX or BZMPOP would be served. Looks only.
    pub fn has_zset_items(&self, key: &[u8], now_ms: u64) -> bool {
        self.map.get(key).is_some_and(|entry| {
            !self.expiring.expired(key, entry, now_ms)
                && matches!(&entry.value, value::Value::ZSet(zset) if zset.len() > 0)
        })
    }

    /// Whether a blocking pop on `keys` answers at once at `now_ms` (an item to pop, or a key
    /// of another type: WRONGTYPE) rather than waiting. Looks only, like
    /// [`Store::has_list_items`].
    pub fn pop_would_answer(&self, keys: &[&[u8]], now_ms: u64) -> bool {
        keys.iter().any(|key| {
            self.map.get(key).is_some_and(|entry| {
                !self.expiring.expired(key, entry, now_ms)
                    && match &entry.value {
                        value::Value::List(list) => !list.is_empty(),
                        _ => true,
                    }
            })
        })
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether a program blocked over several shards on `keys` should be woken at once: as
    /// [`Store::pop_would_answer`], except that a stream is only ready once written after
    /// the program waits (its read just found nothing new).
    pub fn waker_ready(&self, keys: &[&[u8]], now_ms: u64) -> bool {
        keys.iter().any(|key| {
            self.map.get(key).is_some_and(|entry| {
                !self.expiring.expired(key, entry, now_ms)
                    && match &entry.value {
                        value::Value::List(list) => !list.is_empty(),
                        value::Value::Stream(_) => false,
                        _ => true,
                    }
            })
        })
    }

    fn run<S: ChangeSink>(&mut self, command: Command, now: u64, sink: &mut S) -> Reply {
        let result = match command {
            Command::Get(key) => self.read_counted(&key, now, sink).map(Reply::bulk_or_null),
            Command::Set(set) => self.set(set, now, sink),
            Command::GetSet { key, value } => self.getset(key, value, now, sink),
            Command::IncrBy { key, delta } => self.incr_by(key, delta, now, sink),
            Command::Append { key, value } => self.append(key, value, now, sink),
            Command::Strlen(key) => self.strlen(&key, now, sink),
            // The key vectors may be the thread's, lent by the parser: back for the next
            // request once read.
            Command::MGet(keys) => {
                let reply = self.mget(&keys, now, sink);
                crate::command::argv::give_back(keys);
                Ok(reply)
            }
            Command::MSet(pairs) => Ok(self.mset(pairs, sink)),
            Command::Del(keys) => {
                let reply = self.del(&keys, now, sink);
                crate::command::argv::give_back(keys);
                Ok(reply)
            }
            Command::Exists(keys) => {
                let reply = self.exists(&keys, now, sink);
                crate::command::argv::give_back(keys);
                Ok(reply)
            }
            Command::Expire(expire) => self.expire(expire, now, sink),
            Command::Ttl { key, unit } => Ok(self.ttl(&key, unit, now, sink)),
            Command::Persist(key) => Ok(self.persist(&key, now, sink)),
            Command::DbSize => Ok(Reply::Integer(self.map.len() as i64)),
            Command::FlushAll => Ok(self.flush_all(sink)),
            Command::Info(_) => Ok(self.stats().to_reply()),
            Command::Ping(None) => Ok(Reply::simple("PONG")),
            Command::Ping(Some(message)) | Command::Echo(message) => Ok(Reply::Bulk(message)),
            other @ (Command::ConfigGet(_)
            | Command::Client(_)
            | Command::Introspect(_)
            | Command::Auth { .. }
            | Command::Acl(_)
            | Command::Replica(_)
            | Command::Repl(_)
            | Command::Quit
            | Command::Reset
            | Command::Select(_)
            | Command::BgRewriteAof
            | Command::Multi
            | Command::Exec
            | Command::Discard
            | Command::Watch(_)
            | Command::Unwatch
            | Command::Transaction(_)
            | Command::Subscription(_)
            | Command::Publish { .. }
            | Command::PubSub(_)
            | Command::ShardPubSub(_)
            | Command::Hello(_)
            | Command::ConfigSet(_)
            | Command::ConfigRewrite
            | Command::Help { .. }
            | Command::Script(_)
            | Command::ConfigApply(_)) => Err(CommandError::NotShardCommand {
                command: other.name(),
            }),
            Command::ConfigResetStat => {
                self.reset_stats();
                Ok(Reply::ok())
            }
            Command::Cluster(request) => self.run_cluster(request, now, sink),
            Command::Typed(typed) => self.run_typed(typed, now, sink),
            Command::Key(key) => self.run_key_op(key, now, sink),
        };
        result.unwrap_or_else(Reply::from)
    }

    fn flush_all<S: ChangeSink>(&mut self, sink: &mut S) -> Reply {
        self.map.clear();
        self.expiring.clear();
        self.data_bytes = 0;
        self.snapshot_fix_clear();
        if let Some(index) = &mut self.slot_index {
            index.clear();
        }
        sink.record(crate::change::WriteOp::FlushAll);
        Reply::ok()
    }
}

#[cfg(test)]
mod hash_tests;
#[cfg(test)]
mod tests;
