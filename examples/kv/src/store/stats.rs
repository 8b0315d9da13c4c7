use crate::aof::AofStats;
use crate::reply::Reply;

/// Integers of the store's own fields in [`ShardStats::to_reply`].
const STORE_FIELDS: usize = 14;

/// One shard's numbers for INFO.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardStats {
    pub keys: u64,
    /// Keys that carry a TTL.
    pub expires: u64,
    /// Sum of key and value lengths: payload only, no allocator or table overhead.
    pub data_bytes: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Commands this shard executed; a fanned-out command counts once per shard part.
    pub commands_processed: u64,
    pub expired_keys: u64,
    /// Estimated bytes the keyspace takes (see `memory.rs`): what `--maxmemory` limits.
    pub used_memory: u64,
    /// Keys removed by the `--maxmemory` policy.
    pub evicted_keys: u64,
    /// Commands per second over the last samples (see `RateSampler`).
    pub ops_per_sec: u64,
    /// Redis's running estimate of the TTL left on keys with one, in ms (0: none).
    pub avg_ttl_ms: u64,
    /// Writes since start-up (Redis's `dirty`; there is no save to reset it).
    pub dirty: u64,
    /// UNLINKed values waiting to be freed, and those freed so (see `lazyfree.rs`).
    pub lazyfree_pending_objects: u64,
    pub lazyfreed_objects: u64,
    /// The shard's log, filled in by the glue (the store knows nothing of it).
    pub aof: AofStats,
}

impl ShardStats {
    /// The shard's reply to its part of a fanned-out INFO: the fields as integers, in
    /// declaration order. Only [`crate::routing::Merger`] reads it; it never reaches a client.
    pub fn to_reply(&self) -> Reply {
        Reply::Array(
            [
                self.keys,
                self.expires,
                self.data_bytes,
                self.keyspace_hits,
                self.keyspace_misses,
                self.commands_processed,
                self.expired_keys,
                self.used_memory,
                self.evicted_keys,
                self.ops_per_sec,
                self.avg_ttl_ms,
                self.dirty,
                self.lazyfree_pending_objects,
                self.lazyfreed_objects,
            ]
            .into_iter()
            .map(|v| i64::try_from(v).unwrap_or(i64::MAX))
            .chain(self.aof.to_integers())
            .map(Reply::Integer)
            .collect(),
        )
    }

    pub fn from_reply(reply: &Reply) -> Option<ShardStats> {
        let Reply::Array(items) = reply else {
            return None;
        };
        if items.len() != STORE_FIELDS + AofStats::FIELDS {
            return None;
        }
        let ints: Vec<i64> = items
            .iter()
            .map(|item| match item {
                Reply::Integer(v) => Some(*v),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let mut values = ints[..STORE_FIELDS].iter().map(|&v| u64::try_from(v).ok());
        let mut next = || values.next().flatten();
        let stats = ShardStats {
            keys: next()?,
            expires: next()?,
            data_bytes: next()?,
            keyspace_hits: next()?,
            keyspace_misses: next()?,
            commands_processed: next()?,
            expired_keys: next()?,
            used_memory: next()?,
            evicted_keys: next()?,
            ops_per_sec: next()?,
            avg_ttl_ms: next()?,
            dirty: next()?,
            lazyfree_pending_objects: next()?,
            lazyfreed_objects: next()?,
            aof: AofStats::from_integers(&ints[STORE_FIELDS..])?,
        };
        Some(stats)
    }
}

/// Counters the store bumps as it works; keys/expires/data_bytes are read off the keyspace.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub commands_processed: u64,
    pub expired_keys: u64,
    pub dirty: u64,
}

/// Samples kept by [`RateSampler`] (Redis's `STATS_METRIC_SAMPLES`).
const RATE_SAMPLES: usize = 16;

/// Redis's instantaneous metric (`trackInstantaneousMetric`): a counter sampled on a tick,
/// each sample its rate per second since the previous one; the rate is the mean of the last
/// 16 samples (slots not yet filled count as 0, as in Redis).
#[derive(Debug, Default, Clone)]
pub(crate) struct RateSampler {
    /// The previous sample's time (Unix ms; 0: none yet) and counter value.
    last_ms: u64,
    last_value: u64,
    samples: [u64; RATE_SAMPLES],
    next: usize,
}

impl RateSampler {
    pub fn sample(&mut self, now_ms: u64, value: u64) {
        if self.last_ms != 0 && now_ms > self.last_ms {
            let per_sec = value.saturating_sub(self.last_value) * 1000 / (now_ms - self.last_ms);
            self.samples[self.next] = per_sec;
            self.next = (self.next + 1) % RATE_SAMPLES;
        }
        if now_ms > self.last_ms || self.last_ms == 0 {
            self.last_ms = now_ms;
            self.last_value = value;
        }
    }

    pub fn per_sec(&self) -> u64 {
        self.samples.iter().sum::<u64>() / RATE_SAMPLES as u64
    }
}

/// Redis's running average of the TTLs the expiry cycle samples (`activeExpireCycle`): a new
/// pass's mean weighs 2%, the estimate so far 98% (the first pass's mean starts it).
pub(crate) fn running_avg_ttl(previous: u64, pass_sum: u64, pass_samples: u64) -> u64 {
    if pass_samples == 0 {
        return previous;
    }
    let avg = pass_sum / pass_samples;
    let base = if previous == 0 { avg } else { previous };
    (base / 50) * 49 + avg / 50
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_mean_of_sixteen_samples() {
        let mut rate = RateSampler::default();
        rate.sample(1_000, 0);
        assert_eq!(rate.per_sec(), 0, "one sample gives no rate");
        // 100 commands per 100 ms is 1000/s; after one sample the mean over 16 slots.
        rate.sample(1_100, 100);
        assert_eq!(rate.per_sec(), 1000 / 16);
        for i in 2..=16 {
            rate.sample(1_000 + i * 100, i * 100);
        }
        assert_eq!(rate.per_sec(), 1000);
        // Idle ticks push the old rate out; a counter reset (RESETSTAT) counts as 0.
        for i in 17..=32 {
            rate.sample(1_000 + i * 100, 0);
        }
        assert_eq!(rate.per_sec(), 0);
        // A clock that does not move adds no sample.
        rate.sample(4_200, 50);
        assert_eq!(rate.per_sec(), 0);
    }

    #[test]
    fn the_average_ttl_runs_as_redis() {
        assert_eq!(running_avg_ttl(0, 0, 0), 0);
        assert_eq!(running_avg_ttl(0, 10_000, 2), 4_900 + 100);
        assert_eq!(running_avg_ttl(5_000, 0, 0), 5_000, "no sample keeps it");
        assert_eq!(running_avg_ttl(5_000, 10_000, 1), 4_900 + 200);
    }

    #[test]
    fn reply_round_trip() {
        let stats = ShardStats {
            keys: 1,
            expires: 2,
            data_bytes: 3,
            keyspace_hits: 4,
            keyspace_misses: 5,
            commands_processed: 6,
            expired_keys: 7,
            used_memory: 9,
            evicted_keys: 10,
            ops_per_sec: 11,
            avg_ttl_ms: 12,
            dirty: 13,
            lazyfree_pending_objects: 14,
            lazyfreed_objects: 15,
            aof: AofStats {
                enabled: true,
                current_size: 8,
                last_rewrite_time_sec: -1,
                ..AofStats::default()
            },
        };
        assert_eq!(ShardStats::from_reply(&stats.to_reply()), Some(stats));
        assert_eq!(ShardStats::from_reply(&Reply::Integer(1)), None);
        assert_eq!(
            ShardStats::from_reply(&Reply::Array(vec![Reply::Integer(1)])),
            None
        );
    }
}
