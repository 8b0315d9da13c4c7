//! A point-in-time image of the keyspace taken without stopping the shard: the AOF rewrite
//! emits every key as it was when the snapshot began, a bounded number per step, while
//! commands keep running.
//!
//! The keyspace keeps its entries in a dense, indexed order, which only `swap_remove` changes
//! (the last entry fills the hole). A snapshot walks it downwards with a cursor `c`; a key is
//! done (emitted, or created after the snapshot began, which the image must not contain) when
//! its index is `>= c` or it is in the snapshot's `ahead` set:
//!
//! - A step emits the key at `c - 1` (unless it is in `ahead`) and moves the cursor down.
//! - Before a write touches a key that is not done, the glue calls [`Store::snapshot_touch`]:
//!   the key is emitted as it still is and put in `ahead`. The image therefore holds every
//!   key's state from before the snapshot's first write to it.
//! - Deleting a key moves the last key into its place; if that carries a done key below the
//!   cursor, it goes in `ahead` ([`Store::snapshot_fix_removal`]).
//! - New keys are appended at the end, above the cursor; FLUSHALL ends the walk.
//!
//! The snapshot never moves entries, so a walk of the same order (SCAN downwards over the
//! indices) keeps Redis's guarantee while a rewrite runs. `ahead` holds only keys touched
//! ahead of the walk. Deleting a key that is not done needs no image of it: the deletion is in
//! the log that follows the image, and replaying it over an image without the key changes
//! nothing.

use foldhash::fast::RandomState;
use std::collections::HashSet;

use super::compact::CompactBytes;
use super::emit::emit_entry;
use super::entry::Entry;
use super::Store;
use crate::change::ChangeSink;

/// A snapshot in progress.
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// Keys at indices `>= cursor` are done.
    cursor: usize,
    /// Keys below the cursor that are done already.
    ahead: HashSet<CompactBytes, RandomState>,
}

/// What one [`Store::snapshot_step`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotProgress {
    /// Keys passed (emitted, or skipped as already expired or already emitted).
    pub keys: usize,
    /// Whether every key is now done; the snapshot is over.
    pub finished: bool,
}

impl Store {
    /// Starts a snapshot of the keyspace as it is now. Any snapshot in progress is dropped.
    pub fn snapshot_begin(&mut self) {
        self.snapshot = Some(Snapshot {
            cursor: self.map.len(),
            ahead: HashSet::default(),
        });
    }

    /// Drops the snapshot in progress, if any.
    pub fn snapshot_abort(&mut self) {
        self.snapshot = None;
    }

    pub fn snapshot_active(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Keys below the snapshot's cursor (an upper bound on the keys it has yet to emit).
    pub fn snapshot_remaining(&self) -> usize {
        self.snapshot.as_ref().map_or(0, |s| s.cursor)
    }

    /// Emits up to `max_keys` more keys into `sink` as write records that recreate them
    /// (keys already expired at `now` are passed without a record).
    pub fn snapshot_step<S: ChangeSink>(
        &mut self,
        now: u64,
        max_keys: usize,
        sink: &mut S,
    ) -> SnapshotProgress {
        self.snapshot_step_with(now, max_keys, |key, entry, expire_at| {
            emit_entry(key, entry, expire_at, sink)
        })
    }

    /// [`Self::snapshot_step`] with `visit` given each key to image (its entry and expiry):
    /// the AOF rewrite frames write records, an RDB save encodes the value.
    pub(crate) fn snapshot_step_with(
        &mut self,
        now: u64,
        max_keys: usize,
        mut visit: impl FnMut(&[u8], &Entry, Option<u64>),
    ) -> SnapshotProgress {
        let mut progress = SnapshotProgress::default();
        let Some(snapshot) = self.snapshot.as_mut() else {
            progress.finished = true;
            return progress;
        };
        while snapshot.cursor > 0 && progress.keys < max_keys {
            snapshot.cursor -= 1;
            if let Some((key, entry)) = self.map.get_index(snapshot.cursor) {
                let done = !snapshot.ahead.is_empty() && snapshot.ahead.remove(key);
                let expire_at = self.expiring.of(key, entry);
                if !done && expire_at.is_none_or(|at| now <= at) {
                    visit(key, entry, expire_at);
                }
            }
            progress.keys += 1;
        }
        if snapshot.cursor == 0 {
            self.snapshot = None;
            progress.finished = true;
        }
        progress
    }

    /// Call before a write that may depend on or change `key`: if the snapshot has not passed
    /// the key yet, its current state goes into the image now.
    pub fn snapshot_touch<S: ChangeSink>(&mut self, key: &[u8], now: u64, sink: &mut S) {
        self.snapshot_touch_with(key, now, |key, entry, expire_at| {
            emit_entry(key, entry, expire_at, sink)
        })
    }

    /// [`Self::snapshot_touch`] with `visit` given the key to image.
    pub(crate) fn snapshot_touch_with(
        &mut self,
        key: &[u8],
        now: u64,
        visit: impl FnOnce(&[u8], &Entry, Option<u64>),
    ) {
        let Some(snapshot) = self.snapshot.as_mut() else {
            return;
        };
        let Some((index, key, entry)) = self.map.get_full(key) else {
            return;
        };
        if index >= snapshot.cursor || snapshot.ahead.contains(key) {
            return;
        }
        let expire_at = self.expiring.of(key, entry);
        if expire_at.is_none_or(|at| now <= at) {
            visit(key, entry, expire_at);
        }
        snapshot.ahead.insert(key.clone());
    }

    /// Keeps the snapshot's meaning after `swap_remove` took `removed_key` out of index
    /// `removed` of a map that had `len_before` entries (the last entry moved into `removed`).
    pub(super) fn snapshot_fix_removal(
        &mut self,
        removed: usize,
        len_before: usize,
        removed_key: &[u8],
    ) {
        let Some(snapshot) = self.snapshot.as_mut() else {
            return;
        };
        if !snapshot.ahead.is_empty() {
            snapshot.ahead.remove(removed_key);
        }
        let last = len_before - 1;
        if removed < snapshot.cursor && removed != last && last >= snapshot.cursor {
            // A done key moved below the cursor.
            if let Some((moved, _)) = self.map.get_index(removed) {
                snapshot.ahead.insert(moved.clone());
            }
        }
        snapshot.cursor = snapshot.cursor.min(self.map.len());
    }

    /// FLUSHALL: nothing is left to emit (the log after the image holds the FLUSHALL).
    pub(super) fn snapshot_fix_clear(&mut self) {
        if let Some(snapshot) = self.snapshot.as_mut() {
            snapshot.cursor = 0;
            snapshot.ahead.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::{Bytes, BytesMut};
    use proptest::prelude::*;

    use crate::aof::for_each_image_key;
    use crate::change::NoLog;
    use crate::command::Command;
    use crate::resp::RequestParser;
    use crate::store::Store;

    #[derive(Debug, Clone)]
    enum Op {
        Run(Vec<String>),
        Step(usize),
        Sweep,
        Wait(u64),
    }

    fn key() -> impl Strategy<Value = String> {
        (0..12u8).prop_map(|k| format!("k{k}"))
    }

    fn command() -> impl Strategy<Value = Vec<String>> {
        let value = "[a-c]{0,3}";
        prop_oneof![
            4 => (key(), value).prop_map(|(k, v)| vec!["SET".into(), k, v]),
            2 => (key(), value, 1..50u64)
                .prop_map(|(k, v, ms)| vec!["SET".into(), k, v, "PX".into(), ms.to_string()]),
            1 => (key(), value).prop_map(|(k, v)| vec!["SET".into(), k, v, "KEEPTTL".into()]),
            1 => (key(), value).prop_map(|(k, v)| vec!["SET".into(), k, v, "NX".into()]),
            4 => (key(), value).prop_map(|(k, v)| vec!["APPEND".into(), k, v]),
            1 => key().prop_map(|k| vec!["INCR".into(), k]),
            1 => (key(), value).prop_map(|(k, v)| vec!["GETSET".into(), k, v]),
            2 => (key(), key(), value)
                .prop_map(|(a, b, v)| vec!["MSET".into(), a, v.clone(), b, v]),
            4 => (key(), key()).prop_map(|(a, b)| vec!["DEL".into(), a, b]),
            2 => (key(), 1..60i64).prop_map(|(k, ms)| vec!["PEXPIRE".into(), k, ms.to_string()]),
            1 => (key(), -5..5i64).prop_map(|(k, s)| vec!["EXPIRE".into(), k, s.to_string()]),
            1 => key().prop_map(|k| vec!["PERSIST".into(), k]),
            2 => key().prop_map(|k| vec!["GET".into(), k]),
            6 => collection_command(),
            // Rare: it ends the image.
            1 => Just(vec!["FLUSHALL".into()]),
        ]
    }

    /// Writes of every collection type, random ones (SPOP) included: the image plus the log
    /// must rebuild them exactly like strings.
    fn collection_command() -> impl Strategy<Value = Vec<String>> {
        let v = "[a-d]{0,2}";
        let words = |cmd: &'static str, parts: Vec<String>| {
            let mut args = vec![cmd.to_string()];
            args.extend(parts);
            args
        };
        prop_oneof![
            (key(), v, v).prop_map(move |(k, a, b)| words("RPUSH", vec![k, a, b])),
            (key(), v).prop_map(move |(k, a)| words("LPUSH", vec![k, a])),
            key().prop_map(move |k| words("LPOP", vec![k])),
            (key(), key())
                .prop_map(move |(a, b)| words("LMOVE", vec![a, b, "LEFT".into(), "RIGHT".into()])),
            (key(), v, v).prop_map(move |(k, f, x)| words("HSET", vec![k, f, x])),
            (key(), v).prop_map(move |(k, f)| words("HDEL", vec![k, f])),
            (key(), v).prop_map(move |(k, f)| words("HINCRBY", vec![k, f, "3".into()])),
            (key(), v, v).prop_map(move |(k, a, b)| words("SADD", vec![k, a, b])),
            (key(), v).prop_map(move |(k, a)| words("SREM", vec![k, a])),
            key().prop_map(move |k| words("SPOP", vec![k, "2".into()])),
            (key(), key(), key()).prop_map(move |(d, a, b)| words("SUNIONSTORE", vec![d, a, b])),
            (key(), -3..3i64, v)
                .prop_map(move |(k, s, m)| words("ZADD", vec![k, s.to_string(), m])),
            (key(), v).prop_map(move |(k, m)| words("ZINCRBY", vec![k, "1.5".into(), m])),
            key().prop_map(move |k| words("ZPOPMIN", vec![k])),
            (key(), key()).prop_map(move |(d, a)| words("ZUNIONSTORE", vec![d, "1".into(), a])),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => command().prop_map(Op::Run),
            3 => (0..3usize).prop_map(Op::Step),
            1 => Just(Op::Sweep),
            1 => (0..30u64).prop_map(Op::Wait),
        ]
    }

    fn parse(args: &[String]) -> Command {
        Command::parse(args.iter().map(|a| Bytes::from(a.clone())).collect()).unwrap()
    }

    /// Live keys at `now`: value and expiry.
    fn dump(store: &Store, now: u64) -> BTreeMap<Bytes, (crate::store::value::Value, Option<u64>)> {
        store
            .map
            .iter()
            .filter(|(key, entry)| !store.expiring.expired(key, entry, now))
            .map(|(key, entry)| {
                let at = store.expiring.of(key, entry);
                (key.to_bytes(), (entry.value.clone(), at))
            })
            .collect()
    }

    /// Applies a stream of unframed RESP write requests, as replay does.
    fn apply(store: &mut Store, mut stream: BytesMut) {
        let mut parser = RequestParser::default();
        while let Some(args) = parser.parse(&mut stream).unwrap() {
            let command = Command::parse(args).unwrap();
            assert!(!store.apply_replayed(command).is_error());
        }
        assert!(stream.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Image (taken while commands run) + the log of every write since the image began
        /// rebuild exactly the live keyspace.
        #[test]
        fn image_plus_log_rebuilds_the_store(
            before in prop::collection::vec(command(), 0..40),
            during in prop::collection::vec(op(), 0..60),
            after in prop::collection::vec(command(), 0..10),
        ) {
            let mut store = Store::default();
            let mut now = 1_000u64;
            for args in &before {
                store.execute(parse(args), now, &mut NoLog);
                now += 1;
            }
            store.snapshot_begin();
            let mut image = BytesMut::new();
            let mut log = BytesMut::new();
            let run = |store: &mut Store, image: &mut BytesMut, log: &mut BytesMut, args: &[String], now: u64| {
                let command = parse(args);
                if command.is_write() {
                    for_each_image_key(&command, |key| store.snapshot_touch(key, now, image));
                }
                store.execute(command, now, log);
                store.assert_consistent();
            };
            for op in &during {
                match op {
                    Op::Run(args) => run(&mut store, &mut image, &mut log, args, now),
                    Op::Step(n) => {
                        store.snapshot_step(now, *n, &mut image);
                    }
                    Op::Sweep => {
                        store.sweep(now, 3, &mut log);
                    }
                    Op::Wait(ms) => now += ms,
                }
            }
            while !store.snapshot_step(now, 2, &mut image).finished {}
            prop_assert!(!store.snapshot_active());
            for args in &after {
                run(&mut store, &mut image, &mut log, args, now);
            }

            let mut rebuilt = Store::default();
            apply(&mut rebuilt, image);
            apply(&mut rebuilt, log);
            prop_assert_eq!(dump(&rebuilt, now), dump(&store, now));
        }
    }

    /// A walk in index order (SCAN) stays valid during a rewrite: the snapshot moves nothing.
    #[test]
    fn the_snapshot_never_moves_an_entry() {
        let mut store = Store::default();
        for i in 0..50 {
            let (key, value) = (format!("k{i}"), format!("v{i}"));
            store.execute(parse(&["SET".into(), key, value]), 1, &mut NoLog);
        }
        let order = |store: &Store| store.map.keys().cloned().collect::<Vec<_>>();
        let before = order(&store);
        store.snapshot_begin();
        let mut image = BytesMut::new();
        store.snapshot_step(1, 10, &mut image);
        for i in (0..50).step_by(3) {
            let key = format!("k{i}");
            store.snapshot_touch(key.as_bytes(), 1, &mut image);
            store.execute(parse(&["APPEND".into(), key, "x".into()]), 1, &mut NoLog);
        }
        while !store.snapshot_step(1, 7, &mut image).finished {}
        assert_eq!(order(&store), before);
        // Each key was emitted exactly once.
        let text = String::from_utf8_lossy(&image).into_owned();
        for i in 0..50 {
            assert_eq!(text.matches(&format!("\r\nk{i}\r\n")).count(), 1, "k{i}");
        }
    }

    #[test]
    fn a_removal_that_moves_a_done_key_below_the_cursor_keeps_it_done() {
        let mut store = Store::default();
        for k in ["a", "b", "c", "d"] {
            store.execute(parse(&["SET".into(), k.into(), k.into()]), 1, &mut NoLog);
        }
        store.snapshot_begin();
        let mut image = BytesMut::new();
        // Passes "d" (index 3).
        assert_eq!(store.snapshot_step(1, 1, &mut image).keys, 1);
        // Deleting "a" moves "d" into index 0, below the cursor; it must not be emitted again.
        store.execute(parse(&["DEL".into(), "a".into()]), 1, &mut NoLog);
        let emitted_before = image.len();
        while !store.snapshot_step(1, 10, &mut image).finished {}
        let rest = String::from_utf8_lossy(&image[emitted_before..]).into_owned();
        assert!(!rest.contains("$1\r\nd\r\n"), "d emitted twice: {rest}");
        assert!(
            rest.contains("$1\r\nb\r\n") && rest.contains("$1\r\nc\r\n"),
            "{rest}"
        );
    }
}
