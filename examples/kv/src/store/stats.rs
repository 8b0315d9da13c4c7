use crate::aof::AofStats;
use crate::reply::Reply;

/// Integers of the store's own fields in [`ShardStats::to_reply`].
const STORE_FIELDS: usize = 9;

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
}

#[cfg(test)]
mod tests {
    use super::*;

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
