//! What OBJECT and MEMORY USAGE report about one key: Redis 7.0's encoding names judged by
//! the configured thresholds, the shared-integer reference count, the access time and
//! counter, and an estimate of the key's memory.

use super::entry::Entry;
use super::value::Value;
use super::Store;
use crate::command::{Command, KeyOp};
use crate::number::parse_i64;

/// The listpack/intset thresholds of Redis 7.0 (`hash-max-listpack-entries`, ...): OBJECT
/// ENCODING reports a value in the compact encoding Redis would use for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodingLimits {
    pub hash_entries: usize,
    pub hash_value: usize,
    pub set_intset_entries: usize,
    pub zset_entries: usize,
    pub zset_value: usize,
    /// `list-max-listpack-size` (Redis 7.0 reports every list as `quicklist` anyway).
    pub list_size: i64,
    /// `hll-sparse-max-bytes`: a sparse HyperLogLog past this turns dense.
    pub hll_sparse_max_bytes: usize,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash_entries: 512,
            hash_value: 64,
            set_intset_entries: 512,
            zset_entries: 128,
            zset_value: 64,
            list_size: -2,
            hll_sparse_max_bytes: crate::hyperloglog::DEFAULT_SPARSE_MAX_BYTES,
        }
    }
}

/// Redis's `OBJ_SHARED_REFCOUNT`: what OBJECT REFCOUNT says of a shared integer.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// Redis shares the string objects of the integers below this.
const SHARED_INTEGERS: i64 = 10_000;

/// Commands that look at keys without counting as a use of them (Redis's `LOOKUP_NOTOUCH`).
pub(super) fn is_no_touch(command: &Command) -> bool {
    match command {
        Command::Ttl { .. } | Command::Exists(_) => true,
        Command::Key(key) => matches!(
            key.op,
            KeyOp::ObjectEncoding
                | KeyOp::ObjectRefCount
                | KeyOp::ObjectFreq
                | KeyOp::ObjectIdleTime
                | KeyOp::ExpireTime
                | KeyOp::PExpireTime
        ),
        Command::Typed(typed) => typed.op == crate::command::TypedOp::Type,
        _ => false,
    }
}

/// The encoding Redis 7.0 would report for `value` under `limits`.
pub(super) fn encoding(value: &Value, limits: &EncodingLimits) -> &'static str {
    match value {
        Value::Str(bytes) if bytes.len() <= 20 && parse_i64(bytes).is_some() => "int",
        Value::Str(bytes) if bytes.len() <= 44 => "embstr",
        Value::Str(_) => "raw",
        Value::List(_) => "quicklist",
        Value::Hash(hash) => {
            let sizes = hash.map.iter().flat_map(|(f, v)| [f.len(), v.len()]);
            // Once a table, always one (Redis never converts a dict back): the store's own
            // representation turned into a table past its small size.
            if hash.map.is_small()
                && small(
                    hash.map.len(),
                    sizes,
                    limits.hash_entries,
                    limits.hash_value,
                )
            {
                "listpack"
            } else {
                "hashtable"
            }
        }
        Value::Set(set) => {
            let ints = set.len() <= limits.set_intset_entries
                && set.iter().all(|m| parse_i64(m).is_some());
            if ints {
                "intset"
            } else {
                "hashtable"
            }
        }
        Value::ZSet(zset) => {
            let sizes = zset.scores.iter().map(|(member, _)| member.len());
            if small(
                zset.scores.len(),
                sizes,
                limits.zset_entries,
                limits.zset_value,
            ) {
                "listpack"
            } else {
                "skiplist"
            }
        }
    }
}

/// Whether a collection still has Redis's compact encoding.
fn small(
    entries: usize,
    mut sizes: impl Iterator<Item = usize>,
    most: usize,
    largest: usize,
) -> bool {
    entries <= most && sizes.all(|size| size <= largest)
}

impl Store {
    /// OBJECT ENCODING's answer for a live value.
    pub(super) fn encoding_of(&self, value: &Value) -> &'static str {
        encoding(value, &self.config.encoding)
    }

    /// OBJECT REFCOUNT: 1, or Redis's shared count for a small integer string, which Redis
    /// shares unless an LRU/LFU policy needs each key's own access time.
    pub(super) fn refcount_of(&self, value: &Value) -> i64 {
        let policy = self.config.memory.policy;
        let evicting_by_use = !matches!(
            policy,
            super::EvictionPolicy::NoEviction
                | super::EvictionPolicy::AllKeysRandom
                | super::EvictionPolicy::VolatileRandom
                | super::EvictionPolicy::VolatileTtl
        );
        match value {
            Value::Str(bytes) if !evicting_by_use => match parse_i64(bytes) {
                Some(n) if (0..SHARED_INTEGERS).contains(&n) && bytes.len() <= 20 => {
                    SHARED_REFCOUNT
                }
                _ => 1,
            },
            _ => 1,
        }
    }

    /// OBJECT IDLETIME: seconds since the key was last used (`None` under an LFU policy, which
    /// tracks use counts instead).
    pub(super) fn idle_seconds(&self, entry: &Entry, now: u64) -> Option<i64> {
        if self.config.memory.policy.is_lfu() {
            return None;
        }
        let clock = super::memory::lru_clock(now);
        Some(i64::from(clock.wrapping_sub(entry.access) / 1000))
    }

    /// OBJECT FREQ: the logarithmic access counter (`None` unless an LFU policy is set).
    pub(super) fn frequency(&self, entry: &Entry) -> Option<i64> {
        self.config
            .memory
            .policy
            .is_lfu()
            .then_some(i64::from(entry.freq))
    }

    /// MEMORY USAGE: the key's estimated bytes, as `used_memory` counts them (its payload
    /// plus the fixed cost of a key).
    pub(super) fn memory_usage(&self, key: &[u8], value: &Value) -> i64 {
        (key.len() + value.payload_len()) as i64 + super::table::KeyTable::bytes_per_key() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::NoLog;
    use crate::reply::Reply;
    use bytes::Bytes;

    fn run(store: &mut Store, line: &str, now: u64) -> Reply {
        let args = line.split(' ').map(|s| Bytes::from(s.to_owned())).collect();
        store.execute(Command::parse(args).unwrap(), now, &mut NoLog)
    }

    #[test]
    fn encodings_follow_the_thresholds() {
        let mut store = Store::default();
        run(&mut store, "SADD s 1 2 3", 0);
        run(&mut store, "ZADD z 1 a", 0);
        run(&mut store, "SET n 123", 0);
        run(&mut store, "SET e hello", 0);
        assert_eq!(
            run(&mut store, "OBJECT ENCODING s", 0),
            Reply::Bulk("intset".into())
        );
        assert_eq!(
            run(&mut store, "OBJECT ENCODING z", 0),
            Reply::Bulk("listpack".into())
        );
        assert_eq!(
            run(&mut store, "OBJECT ENCODING n", 0),
            Reply::Bulk("int".into())
        );
        assert_eq!(
            run(&mut store, "OBJECT ENCODING e", 0),
            Reply::Bulk("embstr".into())
        );
        store.set_encoding_limits(EncodingLimits {
            set_intset_entries: 2,
            zset_entries: 0,
            ..EncodingLimits::default()
        });
        assert_eq!(
            run(&mut store, "OBJECT ENCODING s", 0),
            Reply::Bulk("hashtable".into())
        );
        assert_eq!(
            run(&mut store, "OBJECT ENCODING z", 0),
            Reply::Bulk("skiplist".into())
        );
    }

    #[test]
    fn refcount_idletime_and_freq() {
        let mut store = Store::default();
        run(&mut store, "SET small 9999", 1_000);
        run(&mut store, "SET big 10000", 1_000);
        assert_eq!(
            run(&mut store, "OBJECT REFCOUNT small", 1_000),
            Reply::Integer(i32::MAX as i64)
        );
        assert_eq!(
            run(&mut store, "OBJECT REFCOUNT big", 1_000),
            Reply::Integer(1)
        );
        assert_eq!(
            run(&mut store, "OBJECT IDLETIME big", 4_500),
            Reply::Integer(3)
        );
        // TTL, TYPE and EXISTS do not count as a use; GET does.
        run(&mut store, "TTL big", 9_000);
        run(&mut store, "TYPE big", 9_000);
        run(&mut store, "EXISTS big", 9_000);
        assert_eq!(
            run(&mut store, "OBJECT IDLETIME big", 9_000),
            Reply::Integer(8)
        );
        run(&mut store, "GET big", 9_000);
        assert_eq!(
            run(&mut store, "OBJECT IDLETIME big", 9_500),
            Reply::Integer(0)
        );
        assert!(run(&mut store, "OBJECT FREQ big", 9_500).is_error());
        assert_eq!(
            run(&mut store, "OBJECT IDLETIME nosuch", 0),
            Reply::NullBulk
        );
        let Reply::Integer(bytes) = run(&mut store, "MEMORY USAGE big", 0) else {
            panic!("no MEMORY USAGE");
        };
        assert!(bytes > 8);
        assert_eq!(run(&mut store, "MEMORY USAGE nosuch", 0), Reply::NullBulk);
    }
}
