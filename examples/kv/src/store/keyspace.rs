//! Primitive keyspace operations that keep the map, the expiring index and the byte count
//! consistent. Commands are built from these.

use bytes::Bytes;

use super::compact::CompactBytes;
use super::entry::Entry;
use super::value::{Value, ValueType};
use super::{ExpiryView, Store};
use crate::change::{ChangeSink, WriteOp};
use crate::command::CommandError;
use crate::notify::Class;

/// What a write does to the key's TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TtlUpdate {
    Clear,
    Keep,
    At(u64),
}

impl Store {
    /// Whether `key` exists and has not expired; an expired key is removed on the way
    /// (Redis's lazy expiry).
    pub(super) fn is_live<S: ChangeSink>(&mut self, key: &[u8], now: u64, sink: &mut S) -> bool {
        match self.map.get(key) {
            None => false,
            Some(_) if self.expiry_view == ExpiryView::Keep => true,
            Some(entry) if !self.expiring.expired(key, entry, now) => true,
            Some(_) => {
                if self.expiry_view == ExpiryView::Delete {
                    self.remove_expired(key, sink);
                }
                false
            }
        }
    }

    /// The value of a live key, of any type.
    pub(super) fn lookup<S: ChangeSink>(
        &mut self,
        key: &[u8],
        now: u64,
        sink: &mut S,
    ) -> Option<&Value> {
        // With no TTL anywhere nothing can have expired: one probe instead of two (the
        // second is needed because a reference cannot be returned from a branch that, in the
        // other branch, removes).
        if !self.expiring.is_empty()
            && self.expiry_view != ExpiryView::Keep
            && self.expiring.expired(key, self.map.get(key)?, now)
        {
            if self.expiry_view == ExpiryView::Delete {
                self.remove_expired(key, sink);
            }
            return None;
        }
        let (clock, lfu) = (self.memory.clock, self.config.memory.policy.is_lfu());
        let entry = self.map.get_mut(key)?;
        if !self.no_touch {
            touch(entry, clock, lfu);
        }
        Some(&entry.value)
    }

    /// The value of `key` as it lies: no expiry check, no access counted. Only for a key that
    /// [`Self::lookup`] found live earlier in the same command (the set algebra borrows all
    /// its inputs at once after looking each up).
    pub(super) fn value_of(&self, key: &[u8]) -> Option<&Value> {
        self.map.get(key).map(|entry| &entry.value)
    }

    /// The string value of a live key (a copy, for the reply); WRONGTYPE for another type.
    pub(super) fn read<S: ChangeSink>(
        &mut self,
        key: &[u8],
        now: u64,
        sink: &mut S,
    ) -> Result<Option<Bytes>, CommandError> {
        match self.lookup(key, now, sink) {
            None => Ok(None),
            Some(Value::Str(value)) => Ok(Some(value.to_bytes())),
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// [`Self::read`], counted as a keyspace hit (the key exists) or miss.
    pub(super) fn read_counted<S: ChangeSink>(
        &mut self,
        key: &[u8],
        now: u64,
        sink: &mut S,
    ) -> Result<Option<Bytes>, CommandError> {
        let value = self.read(key, now, sink);
        self.count_lookup(key, !matches!(value, Ok(None)));
        value
    }

    /// The live value at `key` if it has type `kind`, counted as a hit or miss; WRONGTYPE for
    /// another type.
    pub(super) fn view<S: ChangeSink>(
        &mut self,
        key: &[u8],
        kind: ValueType,
        now: u64,
        sink: &mut S,
    ) -> Result<Option<&Value>, CommandError> {
        let found = self.lookup(key, now, sink).is_some();
        self.count_lookup(key, found);
        if !found {
            // A replica keeps an expired key until its master deletes it: absent all the same.
            return Ok(None);
        }
        match self.map.get(key).map(|entry| &entry.value) {
            Some(value) if value.value_type() != kind => Err(CommandError::WrongType),
            other => Ok(other),
        }
    }

    /// Fails with WRONGTYPE when `key` is live and not of type `kind`.
    pub(super) fn check_type<S: ChangeSink>(
        &mut self,
        key: &[u8],
        kind: ValueType,
        now: u64,
        sink: &mut S,
    ) -> Result<(), CommandError> {
        match self.lookup(key, now, sink) {
            Some(value) if value.value_type() != kind => Err(CommandError::WrongType),
            _ => Ok(()),
        }
    }

    /// Runs `change` on the collection of type `kind` at `key`, which is created empty when
    /// absent if `create` (otherwise `Ok(None)`). Afterwards the byte count follows the
    /// change and an emptied collection is removed, as Redis never keeps an empty one.
    pub(super) fn update<S: ChangeSink, T>(
        &mut self,
        key: &[u8],
        kind: ValueType,
        create: bool,
        now: u64,
        sink: &mut S,
        change: impl FnOnce(&mut Value) -> T,
    ) -> Result<Option<T>, CommandError> {
        // One probe for the common case: the expiry check needs its own only when
        // some key has a TTL, and only a new key a second one.
        if !self.expiring.is_empty() {
            self.lookup(key, now, sink);
        }
        let entry = match self.map.get_mut(key) {
            Some(entry) if entry.value.value_type() != kind => return Err(CommandError::WrongType),
            Some(entry) => entry,
            None if create => {
                self.insert_new(CompactBytes::new(key), Value::empty(kind), None);
                match self.map.get_mut(key) {
                    Some(entry) => entry,
                    None => return Ok(None),
                }
            }
            None => return Ok(None),
        };
        touch(entry, self.memory.clock, self.config.memory.policy.is_lfu());
        let before = entry.value.payload_len();
        let out = change(&mut entry.value);
        let after = entry.value.payload_len();
        let emptied = entry.value.is_empty_collection();
        self.data_bytes = self.data_bytes + after - before;
        if emptied {
            self.remove(key);
            // Its `del` event follows the command's own (see `Store::notify_emptied`).
            if self.events.is_enabled() {
                self.emptied.push(Bytes::copy_from_slice(key));
            }
        }
        Ok(Some(out))
    }

    /// Runs `change` on the string at `key` where it lies (see [`CompactBytes::change`]):
    /// one probe when no key has a TTL, the key's TTL kept and the byte count kept in step.
    /// A missing key gets what `change` makes of an empty vector (`existed` false), stored
    /// as a new key. WRONGTYPE for a value of another type, unchanged. For in-place writes
    /// (SETBIT, PFADD), as Redis's `lookupKeyWrite` then a change of the object it found.
    pub(super) fn change_string<S: ChangeSink, T>(
        &mut self,
        key: &[u8],
        now: u64,
        sink: &mut S,
        change: impl FnOnce(&mut Vec<u8>, bool, &mut S) -> T,
    ) -> Result<T, CommandError> {
        // Lazy expiry needs its own probe only when some key has a TTL.
        if !self.expiring.is_empty() {
            self.lookup(key, now, sink);
        }
        let (clock, lfu) = (self.memory.clock, self.config.memory.policy.is_lfu());
        let Some(entry) = self.map.get_mut(key) else {
            let mut bytes = Vec::new();
            let out = change(&mut bytes, false, sink);
            let value = Value::Str(CompactBytes::appended(bytes));
            self.insert_new(CompactBytes::new(key), value, None);
            return Ok(out);
        };
        if !matches!(entry.value, Value::Str(_)) {
            return Err(CommandError::WrongType);
        }
        if !self.no_touch {
            touch(entry, clock, lfu);
        }
        let Value::Str(bytes) = &mut entry.value else {
            return Err(CommandError::WrongType);
        };
        let before = bytes.len();
        let out = bytes.change(|bytes| change(bytes, true, sink));
        self.data_bytes = self.data_bytes + bytes.len() - before;
        Ok(out)
    }

    /// Counts a read of `key` as a keyspace hit or miss (a miss is a `keymiss` event).
    pub(super) fn count_lookup(&mut self, key: &[u8], hit: bool) {
        if hit {
            self.counters.keyspace_hits += 1;
        } else {
            self.counters.keyspace_misses += 1;
            self.notify(Class::KeyMiss, "keymiss", key);
        }
    }

    pub(super) fn remove_expired<S: ChangeSink>(&mut self, key: &[u8], sink: &mut S) {
        if let Some((stored_key, _, _)) = self.remove(key) {
            self.counters.expired_keys += 1;
            self.notify(Class::Expired, "expired", &stored_key);
            record_del(sink, &stored_key);
        }
    }

    /// Removes a key whatever its TTL; returns the map's copy of the key, the entry and when
    /// it was to expire. The last key takes the removed one's position (see
    /// [`Store::snapshot_fix_removal`]).
    pub(super) fn remove(&mut self, key: &[u8]) -> Option<(CompactBytes, Entry, Option<u64>)> {
        let len_before = self.map.len();
        let (index, stored_key, entry) = self.map.swap_remove_full(key)?;
        self.snapshot_fix_removal(index, len_before, &stored_key);
        if let Some(slots) = &mut self.slot_index {
            slots.remove(&stored_key);
        }
        self.data_bytes -= stored_key.len() + entry.value.payload_len();
        let expire_at = if entry.has_ttl {
            self.expiring.remove(&stored_key)
        } else {
            None
        };
        Some((stored_key, entry, expire_at))
    }

    /// Stores `value` (copied into the store, never a slice of a request) under `key`.
    pub(super) fn upsert(&mut self, key: &[u8], value: impl Into<CompactBytes>, ttl: TtlUpdate) {
        self.upsert_value(key, Value::Str(value.into()), ttl);
    }

    /// Stores `value` under `key`, replacing whatever value of any type was there.
    pub(super) fn upsert_value(&mut self, key: &[u8], value: Value, ttl: TtlUpdate) {
        let Some(entry) = self.map.get_mut(key) else {
            let at = match ttl {
                TtlUpdate::At(at) => Some(at),
                TtlUpdate::Clear | TtlUpdate::Keep => None,
            };
            self.insert_new(CompactBytes::new(key), value, at);
            return;
        };
        replace_value(&mut self.data_bytes, entry, value);
        entry.access = self.memory.clock;
        match ttl {
            TtlUpdate::Keep => {}
            TtlUpdate::Clear => {
                if std::mem::take(&mut entry.has_ttl) {
                    self.expiring.remove(key);
                }
            }
            TtlUpdate::At(at) => self.set_expiry(key, at),
        }
    }

    /// Stores `value` under `key` whatever was there, for a write that does not read the old
    /// value (plain SET). One probe when the key is absent or stored without a TTL; a key with
    /// a TTL goes through lazy expiry first (which logs its DEL if it had expired), as Redis's
    /// `lookupKeyWrite` does.
    pub(super) fn overwrite<S: ChangeSink>(
        &mut self,
        key: &[u8],
        value: Value,
        ttl: TtlUpdate,
        now: u64,
        sink: &mut S,
    ) {
        match self.map.get_mut(key) {
            Some(entry) if !entry.has_ttl => {
                replace_value(&mut self.data_bytes, entry, value);
                entry.access = self.memory.clock;
                if let TtlUpdate::At(at) = ttl {
                    entry.has_ttl = true;
                    self.expiring.set(key, at);
                }
            }
            Some(_) => {
                self.is_live(key, now, sink);
                self.upsert_value(key, value, ttl);
            }
            None => {
                let at = match ttl {
                    TtlUpdate::At(at) => Some(at),
                    TtlUpdate::Clear | TtlUpdate::Keep => None,
                };
                self.insert_new(CompactBytes::new(key), value, at);
            }
        }
    }

    pub(super) fn insert_new(&mut self, key: CompactBytes, value: Value, expire_at: Option<u64>) {
        self.notify(Class::New, "new", &key);
        self.data_bytes += key.len() + value.payload_len();
        if let Some(slots) = &mut self.slot_index {
            slots.insert(&key);
        }
        let mut entry = Entry::new(value, self.memory.clock);
        if let Some(at_ms) = expire_at {
            self.expiring.set(&key, at_ms);
            entry.has_ttl = true;
        }
        self.map.insert_new(key, entry);
    }

    /// Sets the expiry of an existing key.
    pub(super) fn set_expiry(&mut self, key: &[u8], at_ms: u64) {
        if let Some(entry) = self.map.get_mut(key) {
            entry.has_ttl = true;
            self.expiring.set(key, at_ms);
        }
    }

    /// Drops the expiry of a key; returns whether it had one.
    pub(super) fn clear_expiry(&mut self, key: &[u8]) -> bool {
        let had = self
            .map
            .get_mut(key)
            .is_some_and(|entry| std::mem::take(&mut entry.has_ttl));
        if had {
            self.expiring.remove(key);
        }
        had
    }

    /// Checks that the index and the map agree; tests call this after every operation.
    #[cfg(test)]
    pub(super) fn assert_consistent(&self) {
        let mut with_ttl = 0;
        let mut bytes = 0;
        self.map.assert_consistent();
        for (key, entry) in self.map.iter() {
            bytes += key.len() + entry.value.payload_len();
            if entry.has_ttl {
                with_ttl += 1;
                assert!(self.expiring.of(key, entry).is_some(), "expiry of {key:?}");
            }
        }
        assert_eq!(with_ttl, self.expiring.len());
        assert_eq!(bytes, self.data_bytes);
    }
}

/// A key was used: its access time, or its access counter under an LFU policy (Redis's
/// `lookupKey` updates one or the other).
fn touch(entry: &mut Entry, clock: u32, lfu: bool) {
    if lfu {
        entry.freq = super::memory::lfu_increment(entry.freq);
    } else {
        entry.access = clock;
    }
}

/// Logs the removal of `key` (a copy of it: the log takes `Bytes`); free without a log.
pub(super) fn record_del<S: ChangeSink>(sink: &mut S, key: &[u8]) {
    if S::ENABLED {
        sink.record(WriteOp::Del(&[Bytes::copy_from_slice(key)]));
    }
}

/// Puts `value` in an existing `entry`, keeping the store's count of value bytes
/// (`data_bytes`) in step: every in-place replacement goes through here.
pub(super) fn replace_value(data_bytes: &mut usize, entry: &mut Entry, value: Value) {
    *data_bytes = *data_bytes + value.payload_len() - entry.value.payload_len();
    entry.value = value;
}
