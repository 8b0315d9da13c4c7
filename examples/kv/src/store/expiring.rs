use foldhash::fast::RandomState;
use indexmap::IndexMap;

use super::compact::CompactBytes;
use super::entry::Entry;

/// The keys that carry a TTL and when they expire: Redis's `expires` dict, kept apart from
/// the entries so a key without a TTL pays nothing for it (an entry only has a flag). Dense,
/// so active expiry can walk it by position without touching keys that never expire;
/// removal is `swap_remove`, so the key moved into the hole is the next one at that position.
#[derive(Debug, Default)]
pub(crate) struct ExpiringIndex {
    at: IndexMap<CompactBytes, u64, RandomState>,
    /// Where the next sweep starts, so successive bounded sweeps cover every key in turn.
    pub cursor: usize,
}

impl ExpiringIndex {
    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// The key at `slot` (for the sweep's walk).
    pub fn key(&self, slot: usize) -> Option<&CompactBytes> {
        self.at.get_index(slot).map(|(key, _)| key)
    }

    /// When `entry`, stored under `key`, expires (Unix ms); only entries flagged look here.
    pub fn of(&self, key: &[u8], entry: &Entry) -> Option<u64> {
        if entry.has_ttl {
            self.at.get(key).copied()
        } else {
            None
        }
    }

    /// Redis semantics: a key expiring at `t` is still visible at `t` and gone at `t + 1`.
    pub fn expired(&self, key: &[u8], entry: &Entry, now_ms: u64) -> bool {
        self.of(key, entry).is_some_and(|at| now_ms > at)
    }

    /// Sets `key`'s expiry (the caller flags the entry).
    pub fn set(&mut self, key: &[u8], at_ms: u64) {
        match self.at.get_mut(key) {
            Some(at) => *at = at_ms,
            None => {
                self.at.insert(CompactBytes::new(key), at_ms);
            }
        }
    }

    /// Drops `key`'s expiry; returns it.
    pub fn remove(&mut self, key: &[u8]) -> Option<u64> {
        self.at.swap_remove(key)
    }

    pub fn clear(&mut self) {
        self.at.clear();
        self.cursor = 0;
    }
}
