//! UNLINK's lazy free, as Redis 7.0's `lazyfree.c` decides it: a value whose freeing costs
//! more than [`THRESHOLD`] allocations (Redis's `lazyfreeGetFreeEffort`) leaves the keyspace
//! at once but is not dropped by the command; it waits in a bounded queue that the shard
//! drains on its next tick, so the reply does not wait for the free. Redis frees such values
//! on a background thread; a shard has no thread to spare, so it frees them on its own
//! thread later, off the command's path. Smaller values are dropped at once, as in Redis.
//! INFO's `lazyfree_pending_objects` and `lazyfreed_objects` count the queue and the values
//! freed from it.

use std::collections::VecDeque;

use super::object::{encoding, EncodingLimits};
use super::value::Value;

/// Redis's `LAZYFREE_THRESHOLD`: a value costing more allocations than this is freed lazily.
pub(crate) const THRESHOLD: usize = 64;

/// The most values waiting at once; past it a value is freed by the command itself (the
/// queue never holds more than this many values' memory beyond the keyspace).
const MAX_PENDING: usize = 1024;

/// Values freed per drain: a burst of UNLINKs is spread over ticks.
const DRAIN_BATCH: usize = 64;

/// Redis's `lazyfreeGetFreeEffort`: about how many allocations freeing `value` takes.
pub(crate) fn free_effort(value: &Value, limits: &EncodingLimits) -> usize {
    match value {
        // A quicklist: one allocation per node.
        Value::List(list) => list.chunk_count(),
        // Every node of the stream is an allocation, and so is each consumer group and each
        // entry of its PEL (the first group's PEL stands for all, as Redis estimates).
        Value::Stream(stream) => {
            let pel = stream
                .groups
                .values()
                .next()
                .map_or(0, |group| group.pel.len());
            stream.node_count() + stream.groups.len() * (1 + pel)
        }
        // A table costs one allocation per element; the compact encodings (listpack, intset)
        // and strings are one allocation.
        Value::Hash(hash) if encoding(value, limits) == "hashtable" => hash.map.len(),
        Value::Set(set) if encoding(value, limits) == "hashtable" => set.len(),
        Value::ZSet(zset) if encoding(value, limits) == "skiplist" => zset.scores.len(),
        _ => 1,
    }
}

/// The values waiting to be freed, and how many were.
#[derive(Debug, Default)]
pub(crate) struct LazyFree {
    pending: VecDeque<Value>,
    freed: u64,
}

impl LazyFree {
    /// Takes `value` to free later when it is worth it and there is room; otherwise it is
    /// dropped here and now.
    pub fn release(&mut self, value: Value, limits: &EncodingLimits) {
        if free_effort(&value, limits) > THRESHOLD && self.pending.len() < MAX_PENDING {
            self.pending.push_back(value);
        }
    }

    /// Frees a batch of the waiting values; whether any still wait.
    pub fn drain(&mut self) -> bool {
        let batch = self.pending.len().min(DRAIN_BATCH);
        for value in self.pending.drain(..batch) {
            drop(value);
            self.freed += 1;
        }
        !self.pending.is_empty()
    }

    pub fn pending(&self) -> u64 {
        self.pending.len() as u64
    }

    pub fn freed(&self) -> u64 {
        self.freed
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&mut self) {
        self.freed = 0;
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::change::NoLog;
    use crate::command::Command;
    use crate::store::Store;

    fn run(store: &mut Store, line: &str) {
        let args = line.split(' ').map(|s| Bytes::from(s.to_owned())).collect();
        let reply = store.execute(Command::parse(args).unwrap(), 0, &mut NoLog);
        assert!(!reply.is_error(), "{line}: {reply:?}");
    }

    fn sadd(store: &mut Store, key: &str, members: usize) {
        let members: Vec<String> = (0..members).map(|i| format!("m{i}")).collect();
        run(store, &format!("SADD {key} {}", members.join(" ")));
    }

    fn effort(store: &Store, key: &[u8]) -> usize {
        free_effort(&store.map.get(key).unwrap().value, &store.config.encoding)
    }

    #[test]
    fn unlink_frees_large_values_later_and_small_ones_at_once() {
        let mut store = Store::default();
        sadd(&mut store, "big", 200);
        sadd(&mut store, "small", 3);
        run(&mut store, "SET s v");
        run(&mut store, "UNLINK big small s");
        let stats = store.stats();
        assert_eq!(stats.keys, 0);
        assert_eq!(
            (stats.lazyfree_pending_objects, stats.lazyfreed_objects),
            (1, 0)
        );
        assert!(!store.free_lazily());
        let stats = store.stats();
        assert_eq!(
            (stats.lazyfree_pending_objects, stats.lazyfreed_objects),
            (0, 1)
        );
        store.reset_stats();
        assert_eq!(store.stats().lazyfreed_objects, 0);
    }

    #[test]
    fn del_frees_at_once() {
        let mut store = Store::default();
        sadd(&mut store, "big", 200);
        run(&mut store, "DEL big");
        assert_eq!(store.stats().lazyfree_pending_objects, 0);
        assert!(!store.free_lazily());
        assert_eq!(store.stats().lazyfreed_objects, 0);
    }

    #[test]
    fn the_effort_follows_redis_estimate() {
        let mut store = Store::default();
        store.set_encoding_limits(EncodingLimits {
            stream_node_entries: 5,
            ..EncodingLimits::default()
        });
        for i in 0..1000 {
            run(&mut store, &format!("XADD st * f {i}"));
        }
        run(&mut store, "XGROUP CREATE st g 0");
        run(&mut store, "XREADGROUP GROUP g alice COUNT 2 STREAMS st >");
        // 200 nodes of 5 entries, one group with 2 pending entries.
        assert_eq!(effort(&store, b"st"), 200 + 1 + 2);
        run(&mut store, "XADD tiny * f v");
        assert_eq!(effort(&store, b"tiny"), 1);
        // An intset is one allocation; a table one per member.
        run(&mut store, "SADD ints 1 2 3");
        assert_eq!(effort(&store, b"ints"), 1);
        sadd(&mut store, "small", 3);
        assert_eq!(effort(&store, b"small"), 3);
        sadd(&mut store, "big", 600);
        assert_eq!(effort(&store, b"big"), 600);
        run(&mut store, "SET s v");
        assert_eq!(effort(&store, b"s"), 1);
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut lazy = LazyFree::default();
        let limits = EncodingLimits::default();
        let mut store = Store::default();
        sadd(&mut store, "big", 600);
        let value = store.map.get(&b"big"[..]).unwrap().value.clone();
        for _ in 0..MAX_PENDING + 10 {
            lazy.release(value.clone(), &limits);
        }
        assert_eq!(lazy.pending(), MAX_PENDING as u64);
        while lazy.drain() {}
        assert_eq!(lazy.freed(), MAX_PENDING as u64);
    }
}
