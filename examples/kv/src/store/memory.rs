//! `--maxmemory`: each shard gets an equal share of the limit and keeps its own keyspace
//! under it, as Redis does for the whole server. Before any command runs on a shard that is
//! over its share, the policy acts: `noeviction` refuses a command flagged `denyoom` (one
//! that may grow the keyspace) with Redis's OOM error; `allkeys-lru` and `allkeys-lfu`
//! evict keys, each chosen as the least recently (or least frequently) used of
//! [`SAMPLES`] random keys, Redis's `maxmemory-samples` approximation. Evictions are logged
//! as DELs, so the AOF replays them.
//!
//! Memory is estimated from the keyspace, not read from the allocator: payload bytes plus a
//! fixed cost per key for the table slot, the key's handle and the entry, and per element of
//! a collection (see `value.rs`).

use std::fmt;
use std::str::FromStr;

use super::compact::CompactBytes;

use super::table::KeyTable;
use super::Store;
use crate::change::ChangeSink;
use crate::command::{table, Command, CommandError};
use crate::notify::Class;

/// Keys sampled per eviction (Redis's `maxmemory-samples` default).
pub(crate) const SAMPLES: usize = 5;

/// A new key's LFU counter (Redis's `LFU_INIT_VAL`), so new keys are not evicted first.
pub(crate) const LFU_INIT: u8 = 5;

/// Redis's `lfu-log-factor` default: the counter grows logarithmically with accesses.
const LFU_LOG_FACTOR: f64 = 10.0;

/// What a shard does past its share of `--maxmemory` (Redis's `maxmemory-policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Refuse commands that may grow memory (Redis's default).
    #[default]
    NoEviction,
    /// Evict an approximately least recently used key.
    AllKeysLru,
    /// Evict an approximately least frequently used key.
    AllKeysLfu,
    /// Evict a random key.
    AllKeysRandom,
    /// As the `allkeys` ones, among keys with a TTL only.
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    /// The key with a TTL that expires soonest.
    VolatileTtl,
}

const POLICIES: [EvictionPolicy; 8] = [
    EvictionPolicy::VolatileLru,
    EvictionPolicy::VolatileLfu,
    EvictionPolicy::VolatileRandom,
    EvictionPolicy::VolatileTtl,
    EvictionPolicy::AllKeysLru,
    EvictionPolicy::AllKeysLfu,
    EvictionPolicy::AllKeysRandom,
    EvictionPolicy::NoEviction,
];

impl EvictionPolicy {
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Whether keys' access frequency is what counts (OBJECT FREQ answers, IDLETIME not).
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu
        )
    }

    fn is_volatile(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }
}

impl fmt::Display for EvictionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EvictionPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        POLICIES
            .into_iter()
            .find(|policy| policy.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                let names: Vec<&str> = POLICIES.iter().map(|p| p.name()).collect();
                format!("{text}: expected one of {}", names.join(", "))
            })
    }
}

/// One shard's memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Bytes this shard may use; 0 = no limit.
    pub max_bytes: u64,
    pub policy: EvictionPolicy,
    /// Keys sampled per eviction (`maxmemory-samples`).
    pub samples: usize,
}

impl Default for MemoryLimit {
    fn default() -> Self {
        MemoryLimit {
            max_bytes: 0,
            policy: EvictionPolicy::NoEviction,
            samples: SAMPLES,
        }
    }
}

/// The access clock (the low 32 bits of the time in ms: keys' last access, for LRU eviction
/// and OBJECT IDLETIME; ages wrap after 49 days, as Redis's 24-bit clock does after 194)
/// and what eviction did.
#[derive(Debug, Default)]
pub(crate) struct MemoryState {
    pub clock: u32,
    pub evicted_keys: u64,
}

/// The access clock's reading at `now_ms`.
pub(crate) fn lru_clock(now_ms: u64) -> u32 {
    now_ms as u32
}

/// Fixed cost of one key besides its payload: the table's slot (the key's handle and the
/// entry), its control byte and its place in the dense order.
fn per_key_overhead() -> u64 {
    KeyTable::bytes_per_key() as u64
}

impl Store {
    /// The estimated bytes this shard's keyspace takes. An empty keyspace is not free: the
    /// store's own fixed state counts, so the estimate never reaches 0 (nor does Redis's
    /// `used_memory`) and `maxmemory 1` refuses writes on every shard, as in Redis.
    pub fn used_memory(&self) -> u64 {
        std::mem::size_of::<Store>() as u64
            + self.data_bytes as u64
            + self.map.len() as u64 * per_key_overhead()
    }

    /// Whether a command that may grow memory would be refused now (`noeviction` past the
    /// limit): what a multi-key command over several shards checks on each before it runs.
    pub fn over_memory_limit(&self) -> bool {
        let limit = self.config.memory;
        limit.max_bytes != 0
            && limit.policy == EvictionPolicy::NoEviction
            && self.used_memory() > limit.max_bytes
    }

    /// Runs before every command from a client, as Redis's `performEvictions` does: when the
    /// shard is over its limit, the policy evicts (each eviction an `evicted` event, logged as
    /// a DEL) until it is under; a command that may grow memory is refused when that cannot
    /// be done (`noeviction`, or nothing left to evict). Keys' accesses are recorded as
    /// commands look them up (see `keyspace.rs`).
    pub(super) fn make_room<S: ChangeSink>(
        &mut self,
        command: &Command,
        now: u64,
        sink: &mut S,
    ) -> Result<(), CommandError> {
        let limit = self.config.memory;
        if limit.max_bytes == 0 || self.used_memory() <= limit.max_bytes {
            return Ok(());
        }
        if limit.policy != EvictionPolicy::NoEviction {
            while self.used_memory() > limit.max_bytes {
                let Some(victim) = self.pick_victim(limit, now) else {
                    break;
                };
                if let Some((key, _, expire_at)) = self.remove(&victim) {
                    if expire_at.is_some_and(|at| now > at) {
                        self.counters.expired_keys += 1;
                        self.notify(Class::Expired, "expired", &key);
                    } else {
                        self.memory.evicted_keys += 1;
                        self.notify(Class::Evicted, "evicted", &key);
                    }
                    super::keyspace::record_del(sink, &key);
                }
            }
        }
        if self.used_memory() > limit.max_bytes && may_grow(command) {
            return Err(CommandError::OutOfMemory);
        }
        Ok(())
    }

    /// The best victim of `limit.samples` random keys (of the keys with a TTL for the
    /// `volatile` policies): the least recently or frequently used, the one expiring first,
    /// or any.
    fn pick_victim(&self, limit: MemoryLimit, now: u64) -> Option<CompactBytes> {
        let policy = limit.policy;
        let pool = if policy.is_volatile() {
            self.expiring.len()
        } else {
            self.map.len()
        };
        if pool == 0 {
            return None;
        }
        let clock = lru_clock(now);
        let samples = (0..limit.samples.max(1)).filter_map(|_| {
            let index = fastrand::usize(..pool);
            let key = if policy.is_volatile() {
                self.expiring.key(index)?
            } else {
                self.map.get_index(index)?.0
            };
            let entry = self.map.get(key)?;
            Some((key, entry))
        });
        match policy {
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom => {
                samples.map(|(key, _)| key.clone()).next()
            }
            EvictionPolicy::VolatileTtl => samples
                .min_by_key(|(key, entry)| self.expiring.of(key, entry).unwrap_or(u64::MAX))
                .map(|(key, _)| key.clone()),
            _ => samples
                .min_by_key(|(_, entry)| {
                    // Age on the wrapping clock: larger is older.
                    let age = clock.wrapping_sub(entry.access);
                    if policy.is_lfu() {
                        (entry.freq, u32::MAX - age)
                    } else {
                        (0, u32::MAX - age)
                    }
                })
                .map(|(key, _)| key.clone()),
        }
    }
}

/// Whether the command is flagged `denyoom` in the command table (it may add memory).
fn may_grow(command: &Command) -> bool {
    table::find(command.name().as_bytes()).is_some_and(|spec| spec.flags.contains(&"denyoom"))
}

/// Redis's `LFULogIncr`: the counter grows with probability `1 / ((counter - init) *
/// factor + 1)`, so it takes about a million accesses to saturate.
pub(super) fn lfu_increment(counter: u8) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT));
    if fastrand::f64() < 1.0 / (base * LFU_LOG_FACTOR + 1.0) {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::NoLog;
    use crate::reply::Reply;
    use crate::store::StoreConfig;
    use bytes::{Bytes, BytesMut};

    fn store(max_bytes: u64, policy: EvictionPolicy) -> Store {
        Store::new(StoreConfig {
            memory: MemoryLimit {
                max_bytes,
                policy,
                ..MemoryLimit::default()
            },
            ..StoreConfig::default()
        })
    }

    fn run(store: &mut Store, line: &str, sink: &mut impl ChangeSink) -> Reply {
        run_at(store, line, 0, sink)
    }

    fn run_at(store: &mut Store, line: &str, now: u64, sink: &mut impl ChangeSink) -> Reply {
        let args = line.split(' ').map(|s| Bytes::from(s.to_owned())).collect();
        let reply = store.execute(Command::parse(args).unwrap(), now, sink);
        store.assert_consistent();
        reply
    }

    #[test]
    fn an_empty_shard_is_over_a_one_byte_limit() {
        let mut store = store(1, EvictionPolicy::NoEviction);
        assert!(store.over_memory_limit());
        assert_eq!(
            run(&mut store, "SET k v", &mut NoLog),
            Reply::error("OOM command not allowed when used memory > 'maxmemory'.")
        );
        assert_eq!(run(&mut store, "GET k", &mut NoLog), Reply::NullBulk);
        // Eviction empties the shard, then refuses what would grow it.
        let mut store = store_with(1, EvictionPolicy::AllKeysLru, &["SET a 1", "SET b 2"]);
        assert!(run(&mut store, "SET c 3", &mut NoLog).is_error());
        assert_eq!(store.stats().keys, 0);
    }

    fn store_with(max_bytes: u64, policy: EvictionPolicy, lines: &[&str]) -> Store {
        let mut filled = store(0, policy);
        for line in lines {
            assert_eq!(run(&mut filled, line, &mut NoLog), Reply::ok());
        }
        filled.set_memory_limit(MemoryLimit {
            max_bytes,
            policy,
            ..MemoryLimit::default()
        });
        filled
    }

    #[test]
    fn noeviction_refuses_growth_but_not_reads_or_deletes() {
        let mut store = store(2_000, EvictionPolicy::NoEviction);
        let value = "x".repeat(100);
        let mut i = 0;
        let refused = loop {
            let reply = run(&mut store, &format!("SET k{i} {value}"), &mut NoLog);
            if reply.is_error() {
                break reply;
            }
            i += 1;
        };
        assert_eq!(
            refused,
            Reply::error("OOM command not allowed when used memory > 'maxmemory'.")
        );
        assert!(store.used_memory() > 2_000 && i > 5, "{i} keys");
        assert!(matches!(
            run(&mut store, "GET k0", &mut NoLog),
            Reply::Bulk(_)
        ));
        assert_eq!(
            run(&mut store, "DEL k0 k1 k2", &mut NoLog),
            Reply::Integer(3)
        );
        assert_eq!(run(&mut store, "SET again v", &mut NoLog), Reply::ok());
    }

    #[test]
    fn lru_keeps_the_limit_and_the_hot_key() {
        let mut store = store(20_000, EvictionPolicy::AllKeysLru);
        let mut log = BytesMut::new();
        let value = "x".repeat(100);
        run(&mut store, "SET hot 1", &mut log);
        for i in 0..2_000 {
            // The access clock has millisecond resolution: one command per ms.
            let now = 1_000 + 2 * i as u64;
            assert_eq!(
                run_at(&mut store, &format!("SET k{i} {value}"), now, &mut log),
                Reply::ok()
            );
            assert_eq!(
                run_at(&mut store, "GET hot", now + 1, &mut log),
                Reply::Bulk("1".into())
            );
            // One command of slack: a write evicts before it runs.
            assert!(store.used_memory() <= 20_000 + 300);
        }
        let stats = store.stats();
        assert!(stats.evicted_keys > 1_000, "{stats:?}");
        // Every eviction is logged as a DEL.
        let logged = log.windows(5).filter(|w| w == b"\r\nDEL").count();
        assert_eq!(logged as u64, stats.evicted_keys);
        // Recent keys survive far more often than old ones.
        let alive = |range: std::ops::Range<i32>, store: &mut Store| {
            range
                .filter(|i| run(store, &format!("EXISTS k{i}"), &mut NoLog) == Reply::Integer(1))
                .count()
        };
        assert!(alive(1_900..2_000, &mut store) > alive(0..100, &mut store) + 50);
    }

    #[test]
    fn lfu_keeps_the_frequently_used_key() {
        let mut store = store(20_000, EvictionPolicy::AllKeysLfu);
        run(&mut store, "SET hot 1", &mut NoLog);
        for _ in 0..200 {
            run(&mut store, "GET hot", &mut NoLog);
        }
        let value = "x".repeat(100);
        for i in 0..2_000 {
            assert_eq!(
                run(&mut store, &format!("SET k{i} {value}"), &mut NoLog),
                Reply::ok()
            );
        }
        assert_eq!(
            run(&mut store, "GET hot", &mut NoLog),
            Reply::Bulk("1".into())
        );
        assert!(store.stats().evicted_keys > 1_000);
    }

    #[test]
    fn policies_parse_by_name() {
        assert_eq!("ALLKEYS-LRU".parse(), Ok(EvictionPolicy::AllKeysLru));
        assert_eq!("noeviction".parse(), Ok(EvictionPolicy::NoEviction));
        assert_eq!("volatile-ttl".parse(), Ok(EvictionPolicy::VolatileTtl));
        assert!("sometimes".parse::<EvictionPolicy>().is_err());
    }
}
