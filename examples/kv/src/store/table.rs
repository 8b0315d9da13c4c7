//! The keyspace's table: the keys and their entries in one dense vector (`slots`, in the
//! order SCAN, RANDOMKEY, eviction sampling and the AOF snapshot walk by position, see
//! `Store`'s docs) and a hash index of `u32` positions into it (`positions.rs`). Removal is
//! `swap_remove` (the last key takes the hole), insertion appends.
//!
//! Why positions rather than the slots in the hash table's buckets (the layout before): a hash
//! table doubles, and holds between 7/16 and 7/8 of its buckets full. With 56-byte slots in
//! the buckets, one million keys sat in two million buckets (just past 7/8 of 2^20): 128 MB
//! of buckets, all of them touched, for 56 MB of slots, plus the old table freed at the
//! doubling. With 4-byte positions the buckets cost 4 bytes each, and the dense vector's
//! unused capacity is never written, so the operating system never backs it: measured with
//! `examples/kv/bench/memory.sh` (1 M keys of 16 B with 32 B values through
//! `redis-cli --pipe`), about 100 bytes of RSS per key against redis-server's 145, where the
//! in-bucket layout took 175.
//! The price is a second cache line per lookup (the position's, then the slot's); the index
//! keeps it to that one (see `positions.rs`).

use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use super::compact::CompactBytes;
use super::entry::Entry;
use super::positions::Positions;

#[derive(Debug)]
struct Slot {
    key: CompactBytes,
    entry: Entry,
}

#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    /// Positions in `slots`, hashed by their slot's key.
    index: Positions,
    /// The keys and entries, in dense order.
    slots: Vec<Slot>,
    hasher: RandomState,
}

/// Below this many slots of capacity a table is not shrunk (a small table's spare room
/// costs little, and shrinking it would only churn).
const SHRINK_MIN: usize = 1024;

impl KeyTable {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Empties the table and gives its memory back (FLUSHALL, FLUSHDB), as Redis frees its
    /// dict: a table kept at its largest size would hold tens of megabytes for nothing.
    pub fn clear(&mut self) {
        self.index = Positions::default();
        self.slots = Vec::new();
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        (self.index).find(self.hash(key), |at| slots[at].key == *key)
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.position(key).map(|at| &self.slots[at].entry)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let at = self.position(key)?;
        Some(&mut self.slots[at].entry)
    }

    /// The key's position in the dense order, the stored key and its entry.
    pub fn get_full(&self, key: &[u8]) -> Option<(usize, &CompactBytes, &Entry)> {
        let at = self.position(key)?;
        let slot = &self.slots[at];
        Some((at, &slot.key, &slot.entry))
    }

    /// The key at `position` in the dense order: no hashing.
    pub fn get_index(&self, position: usize) -> Option<(&CompactBytes, &Entry)> {
        self.slots
            .get(position)
            .map(|slot| (&slot.key, &slot.entry))
    }

    /// Adds a key the caller knows is absent, at the end of the dense order.
    pub fn insert_new(&mut self, key: CompactBytes, entry: Entry) -> &mut Entry {
        debug_assert!(self.position(&key).is_none(), "insert_new of a present key");
        let hash = self.hash(&key);
        let position = self.slots.len();
        assert!(
            position < u32::MAX as usize / 8 * 7,
            "too many keys in one shard"
        );
        let (slots, hasher) = (&self.slots, &self.hasher);
        (self.index).insert(hash, position, |at| hasher.hash_one(&slots[at].key[..]));
        self.slots.push(Slot { key, entry });
        &mut self.slots.last_mut().expect("just pushed").entry
    }

    /// Removes `key`; the last key in the dense order moves into its position, which is
    /// returned with the stored key and the entry.
    pub fn swap_remove_full(&mut self, key: &[u8]) -> Option<(usize, CompactBytes, Entry)> {
        let hash = self.hash(key);
        let slots = &self.slots;
        let position = (self.index).remove(hash, |at| slots[at].key == *key)?;
        let last = self.slots.len() - 1;
        if position != last {
            // The last slot takes the hole: its index entry follows it.
            let moved = self.hash(&self.slots[last].key);
            self.index.relocate(moved, last, position);
        }
        let slot = self.slots.swap_remove(position);
        self.shrink_if_sparse();
        Some((position, slot.key, slot.entry))
    }

    /// After many removals, gives back what a quarter-full table no longer needs (Redis
    /// shrinks its dicts below a tenth full in its cron); to twice the keys, so growing again
    /// does not follow at once.
    fn shrink_if_sparse(&mut self) {
        let capacity = self.slots.capacity();
        if capacity >= SHRINK_MIN && self.slots.len() * 4 < capacity {
            let keep = self.slots.len() * 2;
            self.slots.shrink_to(keep);
            let (slots, hasher) = (&self.slots, &self.hasher);
            (self.index).shrink_to(keep, |at| hasher.hash_one(&slots[at].key[..]));
        }
    }

    /// The keys and entries in dense order, as `IndexMap` iterated.
    pub fn iter(&self) -> impl Iterator<Item = (&CompactBytes, &Entry)> {
        self.slots.iter().map(|slot| (&slot.key, &slot.entry))
    }

    pub fn keys(&self) -> impl Iterator<Item = &CompactBytes> {
        self.iter().map(|(key, _)| key)
    }

    /// Bytes the slot and its share of the index take per key (for `used_memory`): the slot,
    /// and a bucket in an index between half and 7/8 full.
    pub fn bytes_per_key() -> usize {
        std::mem::size_of::<Slot>() + Positions::bytes_per_entry()
    }

    /// Heap bytes the table holds now, spare capacity included (MEMORY STATS).
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>() + self.index.heap_bytes()
    }

    /// Checks that the dense order and the index agree (tests).
    #[cfg(test)]
    pub fn assert_consistent(&self) {
        assert_eq!(self.index.len(), self.slots.len());
        for (position, slot) in self.slots.iter().enumerate() {
            assert_eq!(self.position(&slot.key), Some(position));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry::new(super::super::value::Value::Str(CompactBytes::new(b"v")), 0)
    }

    /// Inserts through several rehashes and removes from the middle, the ends and all
    /// positions, checking the order against a model vector after every step.
    #[test]
    fn keeps_indexmap_order_through_rehash_and_swap_remove() {
        let mut table = KeyTable::default();
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut rng = fastrand::Rng::with_seed(7);
        for round in 0..4000 {
            if model.is_empty() || rng.u8(..) < 170 {
                let key = format!("key:{round}").into_bytes();
                table.insert_new(CompactBytes::new(&key), entry());
                model.push(key);
            } else {
                let victim = model[rng.usize(..model.len())].clone();
                let at = model.iter().position(|k| *k == victim).unwrap();
                let (position, key, _) = table.swap_remove_full(&victim).unwrap();
                assert_eq!((position, &key[..]), (at, &victim[..]));
                model.swap_remove(at);
                assert!(table.get(&victim).is_none());
            }
            if round % 97 == 0 {
                table.assert_consistent();
            }
            for (position, key) in model.iter().enumerate().step_by(31) {
                assert_eq!(&table.get_index(position).unwrap().0[..], &key[..]);
                assert_eq!(table.get_full(key).unwrap().0, position);
            }
        }
        table.assert_consistent();
        assert!(table.get_index(model.len()).is_none());
        table.clear();
        assert!(table.is_empty() && table.get_index(0).is_none());
    }

    /// Removing most keys gives the memory back (and keeps every key findable at its
    /// position); clearing gives back all of it.
    #[test]
    fn shrinks_after_mass_removal_and_clear_frees() {
        let mut table = KeyTable::default();
        let key = |i: usize| format!("key:{i}").into_bytes();
        for i in 0..8192 {
            table.insert_new(CompactBytes::new(&key(i)), entry());
        }
        let full = table.heap_bytes();
        for i in 0..8000 {
            assert!(table.swap_remove_full(&key(i)).is_some());
        }
        table.assert_consistent();
        assert!(
            table.heap_bytes() * 4 < full,
            "{} of {full}",
            table.heap_bytes()
        );
        for i in 8000..8192 {
            assert!(table.get(&key(i)).is_some());
        }
        table.clear();
        assert_eq!(table.heap_bytes(), 0);
    }
}
