//! WATCH on one shard: which connections watch which of this shard's keys, and whether a
//! watched key changed since. Redis's design: a write marks every watcher of the keys it
//! changed (a failed SET NX or a DEL of a missing key changes nothing and marks nobody), a
//! key that was live with a TTL when watched and has expired by EXEC counts as changed
//! (Redis 7.0's `isWatchedKeyExpired`), and the reclaiming of a key that had already expired
//! when it was watched does not (it was logically gone already; Redis's `touchWatchedKey`).
//!
//! Writes are seen through [`Tap`], which wraps the store's change sink only while this shard
//! has watched keys, so a shard nobody watches pays nothing.

use std::collections::HashMap;

use bytes::Bytes;
use foldhash::fast::RandomState;

use crate::change::{ChangeSink, WriteOp};
use crate::command::key_positions;
use crate::server::sink::SinkKey;

/// A connection, by its shard and its sink there.
pub(crate) type Watcher = (usize, SinkKey);

#[derive(Default)]
pub(crate) struct WatchRegistry {
    by_key: HashMap<Bytes, Vec<Watcher>, RandomState>,
    /// The flush being run was handled by [`Self::touch_stored`].
    flush_seen: bool,
    watchers: HashMap<Watcher, Watched, RandomState>,
}

/// What WATCH found: the key is stored but already expired, or live with a TTL, or
/// anything else (absent, or no TTL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyAtWatch {
    Expired,
    Expiring(u64),
    Other,
}

#[derive(Default)]
struct Watched {
    keys: Vec<Bytes>,
    /// Keys already expired (not yet reclaimed) when watched: their reclaiming is no change.
    expired: Vec<Bytes>,
    /// A watched key was written.
    dirty: bool,
    /// When the keys that were live with a TTL at WATCH time expire.
    deadlines: Vec<u64>,
}

impl WatchRegistry {
    pub fn is_empty(&self) -> bool {
        self.watchers.is_empty()
    }

    /// Watched keys on this shard (all watchers together).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// `who` watches `key`, in state `state`.
    pub fn watch(&mut self, who: Watcher, key: Bytes, state: KeyAtWatch) {
        let watched = self.watchers.entry(who).or_default();
        if watched.keys.contains(&key) {
            return;
        }
        match state {
            KeyAtWatch::Expired => watched.expired.push(key.clone()),
            KeyAtWatch::Expiring(at) => watched.deadlines.push(at),
            KeyAtWatch::Other => {}
        }
        watched.keys.push(key.clone());
        self.by_key.entry(key).or_default().push(who);
    }

    /// `key` was written: its watchers' transactions will abort.
    pub fn touch(&mut self, key: &[u8]) {
        self.touch_with(key, false);
    }

    /// `key` was deleted: as [`Self::touch`], except for watchers that saw it expired.
    fn touch_deleted(&mut self, key: &[u8]) {
        self.touch_with(key, true);
    }

    fn touch_with(&mut self, key: &[u8], deleted: bool) {
        if let Some(watchers) = self.by_key.get(key) {
            for who in watchers {
                if let Some(watched) = self.watchers.get_mut(who) {
                    let was_expired = watched.expired.iter().position(|k| k == key);
                    match was_expired {
                        Some(i) if deleted => {
                            watched.expired.swap_remove(i);
                        }
                        Some(i) => {
                            watched.expired.swap_remove(i);
                            watched.dirty = true;
                        }
                        None => watched.dirty = true,
                    }
                }
            }
        }
    }

    /// FLUSHALL: every watched key changed.
    pub fn touch_all(&mut self) {
        for watched in self.watchers.values_mut() {
            watched.dirty = true;
        }
    }

    /// A flush is about to empty the store: the watched keys it holds (`stored`) change;
    /// watched keys that are not there do not (Redis's `touchAllWatchedKeysInDb`). The
    /// flush's own record must then not mark every watcher: see [`Tap`].
    pub fn touch_stored(&mut self, stored: impl Fn(&[u8]) -> bool) {
        let keys: Vec<Bytes> = (self.by_key.keys())
            .filter(|key| stored(key))
            .cloned()
            .collect();
        for key in keys {
            self.touch(&key);
        }
        self.flush_seen = true;
    }

    /// EXEC: whether `who`'s keys here are unchanged at `now`; its watches here end.
    pub fn finish(&mut self, who: Watcher, now: u64) -> bool {
        match self.remove(who) {
            Some(watched) => !watched.dirty && watched.deadlines.iter().all(|&at| now <= at),
            None => true,
        }
    }

    /// UNWATCH, or the connection closed.
    fn remove(&mut self, who: Watcher) -> Option<Watched> {
        let watched = self.watchers.remove(&who)?;
        for key in &watched.keys {
            if let Some(watchers) = self.by_key.get_mut(key) {
                watchers.retain(|w| *w != who);
                if watchers.is_empty() {
                    self.by_key.remove(key);
                }
            }
        }
        Some(watched)
    }

    pub fn unwatch(&mut self, who: Watcher) {
        self.remove(who);
    }

    /// Marks the watchers of every key `op` changes.
    fn touch_op(&mut self, op: &WriteOp<'_>) {
        match *op {
            WriteOp::Set { key, .. }
            | WriteOp::Append { key, .. }
            | WriteOp::PExpireAt { key, .. }
            | WriteOp::Persist { key } => self.touch(key),
            WriteOp::MSet(pairs) => pairs.iter().for_each(|(key, _)| self.touch(key)),
            WriteOp::Del(keys) => keys.iter().for_each(|key| self.touch_deleted(key)),
            // Marked by `touch_stored` just before, with what the store held.
            WriteOp::FlushAll if std::mem::take(&mut self.flush_seen) => {}
            WriteOp::FlushAll => self.touch_all(),
            WriteOp::Command { name, key, args } => {
                self.touch(key);
                // RENAME, LMOVE, SMOVE, ...STORE: the other keys, by the command table.
                let mut request = Vec::with_capacity(args.len() + 2);
                request.push(Bytes::copy_from_slice(name.as_bytes()));
                request.push(Bytes::copy_from_slice(key));
                request.extend(args.iter().cloned());
                for position in key_positions(&request).unwrap_or_default() {
                    if position > 1 {
                        self.touch(&request[position]);
                    }
                }
            }
        }
    }
}

/// The store's change sink seen by the watches: every change marks the watchers of its keys,
/// then goes on to `inner` (the AOF, or nowhere).
pub(crate) struct Tap<'a, S> {
    pub inner: &'a mut S,
    pub watches: &'a mut WatchRegistry,
}

impl<S: ChangeSink> ChangeSink for Tap<'_, S> {
    // The keys a change touched must be known even when `inner` logs nothing.
    const ENABLED: bool = true;

    fn record(&mut self, op: WriteOp<'_>) {
        self.watches.touch_op(&op);
        if S::ENABLED {
            self.inner.record(op);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{LoggedTtl, NoLog};
    use crate::command::Command;
    use crate::server::sink::test_keys;
    use crate::store::{Store, StoreConfig};

    fn watchers(n: usize) -> Vec<Watcher> {
        test_keys(n).into_iter().map(|key| (0, key)).collect()
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn a_write_marks_only_the_watchers_of_its_key() {
        let w = watchers(2);
        let mut reg = WatchRegistry::default();
        reg.watch(w[0], b("a"), KeyAtWatch::Other);
        reg.watch(w[1], b("b"), KeyAtWatch::Other);
        reg.touch_op(&WriteOp::Set {
            key: b"a",
            value: b"1",
            ttl: LoggedTtl::None,
        });
        assert!(!reg.finish(w[0], 0));
        assert!(reg.finish(w[1], 0));
        assert!(reg.is_empty());
        assert_eq!(reg.len(), 0);
    }

    #[test]
    fn unwatch_forgets_and_a_second_finish_is_clean() {
        let w = watchers(1);
        let mut reg = WatchRegistry::default();
        reg.watch(w[0], b("a"), KeyAtWatch::Other);
        reg.watch(w[0], b("a"), KeyAtWatch::Other);
        assert_eq!(reg.len(), 1);
        reg.unwatch(w[0]);
        reg.touch(b"a");
        assert!(reg.finish(w[0], 0));
    }

    #[test]
    fn an_expired_watched_key_counts_as_changed() {
        let w = watchers(1);
        let mut reg = WatchRegistry::default();
        reg.watch(w[0], b("a"), KeyAtWatch::Expiring(100));
        assert!(reg.finish(w[0], 100));
        reg.watch(w[0], b("a"), KeyAtWatch::Expiring(100));
        assert!(!reg.finish(w[0], 101));
    }

    #[test]
    fn reclaiming_a_key_expired_before_watch_is_no_change() {
        let w = watchers(2);
        let mut reg = WatchRegistry::default();
        reg.watch(w[0], b("gone"), KeyAtWatch::Expired);
        reg.watch(w[1], b("gone"), KeyAtWatch::Expired);
        reg.touch_op(&WriteOp::Del(&[b("gone")]));
        assert!(reg.finish(w[0], 0));
        // Once reclaimed, a later write is a change.
        reg.touch_op(&WriteOp::Del(&[b("gone")]));
        assert!(!reg.finish(w[1], 0));
    }

    #[test]
    fn flushall_and_multi_key_commands_mark_every_key() {
        let w = watchers(3);
        let mut reg = WatchRegistry::default();
        reg.watch(w[0], b("src"), KeyAtWatch::Other);
        reg.watch(w[1], b("dst"), KeyAtWatch::Other);
        reg.watch(w[2], b("other"), KeyAtWatch::Other);
        reg.touch_op(&WriteOp::Command {
            name: "lmove",
            key: b"src",
            args: &[b("dst"), b("left"), b("right")],
        });
        assert!(!reg.finish(w[0], 0));
        assert!(!reg.finish(w[1], 0));
        reg.watch(w[0], b("x"), KeyAtWatch::Other);
        reg.touch_op(&WriteOp::FlushAll);
        assert!(!reg.finish(w[0], 0));
        assert!(!reg.finish(w[2], 0));
    }

    /// Through the store: only effective writes mark (as Redis's `signalModifiedKey`).
    #[test]
    fn the_tap_sees_effective_writes_only() {
        let w = watchers(1);
        let mut store = Store::new(StoreConfig::default());
        let mut reg = WatchRegistry::default();
        let run = |store: &mut Store, reg: &mut WatchRegistry, line: &str| {
            let args = line.split(' ').map(b).collect();
            let mut tap = Tap {
                inner: &mut NoLog,
                watches: reg,
            };
            store.execute(Command::parse(args).unwrap(), 0, &mut tap);
        };
        run(&mut store, &mut reg, "SET k v");
        reg.watch(w[0], b("k"), KeyAtWatch::Other);
        run(&mut store, &mut reg, "SET k x NX");
        run(&mut store, &mut reg, "DEL missing");
        run(&mut store, &mut reg, "GET k");
        assert!(reg.finish(w[0], 0));
        reg.watch(w[0], b("k"), KeyAtWatch::Other);
        run(&mut store, &mut reg, "DEL k");
        assert!(!reg.finish(w[0], 0));
    }
}
