//! The keyspace's table (issue 13: CPU per request): the keys and their entries stored
//! together in one `hashbrown::HashTable`, so a lookup is one hash and one probe that compares
//! the stored key in place. The `IndexMap` it replaces kept the entries in a separate vector
//! and the table held indices, so each lookup also read a second cache line.
//!
//! It keeps `IndexMap`'s dense order, which SCAN, RANDOMKEY, eviction sampling and the AOF
//! snapshot walk by position (see `Store`'s docs): `order[i]` is the bucket of the `i`-th key,
//! and each slot knows its position. Removal is `swap_remove` (the last key takes the hole),
//! insertion appends, as before. Buckets move only when the table rehashes, which happens
//! only inside an insert that finds no room; [`KeyTable::insert_new`] makes room first and
//! then rebuilds `order`, O(n) per doubling like the rehash itself.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use super::compact::CompactBytes;
use super::entry::Entry;

#[derive(Debug)]
struct Slot {
    key: CompactBytes,
    entry: Entry,
    /// Where the key is in the dense order.
    position: u32,
}

#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    table: HashTable<Slot>,
    /// The bucket of each key, in dense order.
    order: Vec<u32>,
    hasher: RandomState,
}

impl KeyTable {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn clear(&mut self) {
        self.table.clear();
        self.order.clear();
    }

    fn find(&self, key: &[u8]) -> Option<&Slot> {
        self.table.find(self.hash(key), |slot| slot.key == *key)
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.find(key).map(|slot| &slot.entry)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let hash = self.hash(key);
        (self.table.find_mut(hash, |slot| slot.key == *key)).map(|slot| &mut slot.entry)
    }

    /// The key's position in the dense order, the stored key and its entry.
    pub fn get_full(&self, key: &[u8]) -> Option<(usize, &CompactBytes, &Entry)> {
        (self.find(key)).map(|slot| (slot.position as usize, &slot.key, &slot.entry))
    }

    /// The key at `position` in the dense order: no hashing, one bucket read.
    pub fn get_index(&self, position: usize) -> Option<(&CompactBytes, &Entry)> {
        let bucket = *self.order.get(position)?;
        (self.table.get_bucket(bucket as usize)).map(|slot| (&slot.key, &slot.entry))
    }

    /// Adds a key the caller knows is absent, at the end of the dense order.
    pub fn insert_new(&mut self, key: CompactBytes, entry: Entry) -> &mut Entry {
        debug_assert!(self.find(&key).is_none(), "insert_new of a present key");
        let hash = self.hash(&key);
        if self.table.len() == self.table.capacity() {
            // The insert would rehash and move buckets: do it here and re-read them.
            let hasher = &self.hasher;
            self.table.reserve(1, |slot| hasher.hash_one(&slot.key[..]));
            self.rebuild_order();
        }
        let position = u32::try_from(self.order.len()).expect("at most 2^32 keys per shard");
        let slot = Slot {
            key,
            entry,
            position,
        };
        let hasher = &self.hasher;
        let occupied =
            (self.table).insert_unique(hash, slot, |slot| hasher.hash_one(&slot.key[..]));
        self.order.push(bucket_u32(occupied.bucket_index()));
        &mut occupied.into_mut().entry
    }

    /// Removes `key`; the last key in the dense order moves into its position, which is
    /// returned with the stored key and the entry.
    pub fn swap_remove_full(&mut self, key: &[u8]) -> Option<(usize, CompactBytes, Entry)> {
        let hash = self.hash(key);
        let found = self.table.find_entry(hash, |slot| slot.key == *key).ok()?;
        let (slot, _) = found.remove();
        let position = slot.position as usize;
        self.order.swap_remove(position);
        if let Some(&moved) = self.order.get(position) {
            if let Some(moved) = self.table.get_bucket_mut(moved as usize) {
                moved.position = slot.position;
            }
        }
        Some((position, slot.key, slot.entry))
    }

    /// The keys and entries in dense order, as `IndexMap` iterated.
    pub fn iter(&self) -> impl Iterator<Item = (&CompactBytes, &Entry)> {
        (0..self.order.len()).filter_map(|position| self.get_index(position))
    }

    pub fn keys(&self) -> impl Iterator<Item = &CompactBytes> {
        self.iter().map(|(key, _)| key)
    }

    /// Bytes the table and the order take per key it can hold (for `used_memory`).
    pub fn bytes_per_key() -> usize {
        std::mem::size_of::<Slot>() + std::mem::size_of::<u32>() + 1
    }

    fn rebuild_order(&mut self) {
        for bucket in self.table.iter_buckets() {
            if let Some(slot) = self.table.get_bucket(bucket) {
                self.order[slot.position as usize] = bucket_u32(bucket);
            }
        }
    }

    /// Checks that the dense order and the slots agree (tests).
    #[cfg(test)]
    pub fn assert_consistent(&self) {
        assert_eq!(self.order.len(), self.table.len());
        for (position, &bucket) in self.order.iter().enumerate() {
            let slot = self
                .table
                .get_bucket(bucket as usize)
                .expect("order names a full bucket");
            assert_eq!(slot.position as usize, position);
            assert!(std::ptr::eq(self.find(&slot.key).unwrap(), slot));
        }
    }
}

fn bucket_u32(bucket: usize) -> u32 {
    u32::try_from(bucket).expect("at most 2^32 buckets per shard")
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
}
