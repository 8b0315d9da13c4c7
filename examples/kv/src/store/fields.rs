//! A hash's fields (`Fields<CompactBytes>`) or a set's members (`Fields<()>`, [`Members`]) in
//! one of two representations, as Redis keeps a hash in a listpack until it passes
//! `hash-max-listpack-entries` (128) and in a dict after:
//!
//! - small: an `IndexMap`, so HGETALL, HKEYS, HSCAN list fields in insertion order (removal
//!   shifts), which is what Redis's listpack order is;
//! - large: a plain `hashbrown` table of (field, value) pairs. Redis's order is its dict's
//!   then, which no client can rely on, and an `IndexMap` costs a second cache line per lookup
//!   (its table holds indices into a separate vector of entries) and 16 more bytes per field:
//!   HSET on a large hash was a quarter of its CPU in `IndexMap::insert_full`, and
//!   SADD on a large set as much in `IndexSet::insert` (Redis 7.0 keeps a set of strings in a
//!   dict at any size, so no client relies on a set's order).
//!
//! Like Redis, a hash never goes back to small once large.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use indexmap::IndexMap;

use super::compact::CompactBytes;

/// Most fields a small hash holds (Redis's `hash-max-listpack-entries` default).
pub(crate) const SMALL_UP_TO: usize = 128;

#[derive(Debug, Clone)]
pub(crate) enum Fields<V = CompactBytes> {
    Small(IndexMap<CompactBytes, V, RandomState>),
    Large(Large<V>),
}

/// A set's members: fields without values.
pub(crate) type Members = Fields<()>;

#[derive(Debug, Clone)]
pub(crate) struct Large<V> {
    table: HashTable<(CompactBytes, V)>,
    hasher: RandomState,
}

impl<V> Default for Fields<V> {
    fn default() -> Self {
        Fields::Small(IndexMap::default())
    }
}

/// Equal fields and values, whatever the representation and order.
impl<V: PartialEq> PartialEq for Fields<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(field, value)| other.get(field) == Some(value))
    }
}

impl<V> Large<V> {
    fn hash(&self, field: &[u8]) -> u64 {
        self.hasher.hash_one(field)
    }

    fn find(&self, field: &[u8]) -> Option<&(CompactBytes, V)> {
        self.table.find(self.hash(field), |(f, _)| f[..] == *field)
    }
}

impl<V> Fields<V> {
    /// Empty, with room for `n` fields, in the form `n` inserts would leave it in (large
    /// past [`SMALL_UP_TO`]).
    pub fn with_capacity(n: usize) -> Self {
        if n <= SMALL_UP_TO {
            Fields::Small(IndexMap::with_capacity_and_hasher(
                n,
                RandomState::default(),
            ))
        } else {
            Fields::Large(Large {
                table: HashTable::with_capacity(n),
                hasher: RandomState::default(),
            })
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Fields::Small(map) => map.len(),
            Fields::Large(large) => large.table.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_small(&self) -> bool {
        matches!(self, Fields::Small(_))
    }

    pub fn get(&self, field: &[u8]) -> Option<&V> {
        match self {
            Fields::Small(map) => map.get(field),
            Fields::Large(large) => large.find(field).map(|(_, value)| value),
        }
    }

    pub fn contains_key(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` (the stored field is kept if present); returns the previous value.
    pub fn insert(&mut self, field: CompactBytes, value: V) -> Option<V> {
        match self {
            Fields::Small(map) => {
                let old = map.insert(field, value);
                if map.len() > SMALL_UP_TO {
                    self.grow();
                }
                old
            }
            Fields::Large(large) => {
                let hash = large.hash(&field);
                let hasher = &large.hasher;
                match large.table.entry(
                    hash,
                    |(f, _)| *f == field,
                    |(f, _)| hasher.hash_one(&f[..]),
                ) {
                    Entry::Occupied(mut slot) => {
                        Some(std::mem::replace(&mut slot.get_mut().1, value))
                    }
                    Entry::Vacant(slot) => {
                        slot.insert((field, value));
                        None
                    }
                }
            }
        }
    }

    /// The small map moved into a table sized for it.
    fn grow(&mut self) {
        let Fields::Small(map) = self else {
            return;
        };
        let mut large = Large {
            table: HashTable::with_capacity(map.len() * 2),
            hasher: RandomState::default(),
        };
        for pair in std::mem::take(map) {
            let hash = large.hash(&pair.0);
            let hasher = &large.hasher;
            large
                .table
                .insert_unique(hash, pair, |(f, _)| hasher.hash_one(&f[..]));
        }
        *self = Fields::Large(large);
    }

    /// Removes `field`; a small hash keeps the others' order.
    pub fn remove(&mut self, field: &[u8]) -> Option<(CompactBytes, V)> {
        match self {
            Fields::Small(map) => map.shift_remove_entry(field),
            Fields::Large(large) => {
                let hash = large.hash(field);
                let slot = large.table.find_entry(hash, |(f, _)| f[..] == *field);
                slot.ok().map(|slot| slot.remove().0)
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&CompactBytes, &V)> + '_ {
        let (small, large) = match self {
            Fields::Small(map) => (Some(map.iter()), None),
            Fields::Large(large) => (None, Some(large.table.iter().map(|(f, v)| (f, v)))),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }

    /// Positions HSCAN walks: a small hash's fields in order, a large one's buckets (stable
    /// while the table does not grow, as Redis's dict buckets are between rehashes).
    pub fn positions(&self) -> usize {
        match self {
            Fields::Small(map) => map.len(),
            Fields::Large(large) => large.table.num_buckets(),
        }
    }

    /// The field at `position` (below [`Self::positions`]), if one is there.
    pub fn at(&self, position: usize) -> Option<(&CompactBytes, &V)> {
        match self {
            Fields::Small(map) => map.get_index(position),
            Fields::Large(large) => large.table.get_bucket(position).map(|(f, v)| (f, v)),
        }
    }

    /// A field picked uniformly at random (HRANDFIELD); `None` when empty.
    pub fn random(&self) -> Option<(&CompactBytes, &V)> {
        if self.is_empty() {
            return None;
        }
        match self {
            Fields::Small(map) => map.get_index(fastrand::usize(..map.len())),
            // A table that grew is at least 3/8 full, so a random bucket takes a few tries;
            // removals can leave it sparse (it does not shrink): then the n-th field, walking.
            Fields::Large(large) if large.table.len() * 16 >= large.table.num_buckets() => loop {
                let bucket = fastrand::usize(..large.table.num_buckets());
                if let Some((f, v)) = large.table.get_bucket(bucket) {
                    return Some((f, v));
                }
            },
            Fields::Large(large) => {
                let n = fastrand::usize(..large.table.len());
                large.table.iter().nth(n).map(|(f, v)| (f, v))
            }
        }
    }

    /// Removes a field picked uniformly at random (SPOP); a small one's last field takes its
    /// place.
    pub fn remove_random(&mut self) -> Option<(CompactBytes, V)> {
        match self {
            Fields::Small(map) if map.is_empty() => None,
            Fields::Small(map) => map.swap_remove_index(fastrand::usize(..map.len())),
            Fields::Large(_) => {
                let field = self.random()?.0.clone();
                self.remove(&field)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(text: &str) -> CompactBytes {
        CompactBytes::new(text.as_bytes())
    }

    fn names(fields: &Fields) -> Vec<String> {
        (fields.iter())
            .map(|(f, _)| String::from_utf8(f.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn small_keeps_insertion_order_through_updates_and_removals() {
        let mut fields = Fields::default();
        for name in ["c", "a", "b", "d"] {
            assert_eq!(fields.insert(b(name), b("1")), None);
        }
        assert_eq!(fields.insert(b("a"), b("2")), Some(b("1")));
        assert_eq!(fields.remove(b"b"), Some((b("b"), b("1"))));
        assert_eq!(names(&fields), ["c", "a", "d"]);
        assert_eq!(fields.get(b"a"), Some(&b("2")));
        assert!(fields.is_small());
    }

    #[test]
    fn grows_past_the_threshold_and_keeps_every_field() {
        let mut fields = Fields::default();
        for i in 0..SMALL_UP_TO {
            fields.insert(b(&format!("f{i}")), b(&format!("v{i}")));
        }
        assert!(fields.is_small());
        // Updating a field at the threshold is not growing.
        fields.insert(b("f0"), b("again"));
        assert!(fields.is_small());
        fields.insert(b("last"), b("v"));
        assert!(!fields.is_small());
        assert_eq!(fields.len(), SMALL_UP_TO + 1);
        for i in 1..SMALL_UP_TO {
            assert_eq!(
                fields.get(format!("f{i}").as_bytes()),
                Some(&b(&format!("v{i}")))
            );
        }
        assert_eq!(fields.get(b"f0"), Some(&b("again")));
        assert_eq!(fields.insert(b("last"), b("w")), Some(b("v")));
        // Shrinking does not go back (as Redis's dict stays a dict).
        for i in 0..SMALL_UP_TO {
            assert!(fields.remove(format!("f{i}").as_bytes()).is_some());
        }
        assert!(fields.remove(b"f0").is_none());
        assert!(!fields.is_small());
        assert_eq!(names(&fields), ["last"]);
        assert_eq!(fields.random().map(|(f, _)| f.clone()), Some(b("last")));
    }

    #[test]
    fn positions_reach_every_field_once_on_both_sides_of_the_switch() {
        for count in [5, SMALL_UP_TO, SMALL_UP_TO + 1, 1000] {
            let mut fields = Fields::default();
            for i in 0..count {
                fields.insert(b(&format!("f{i}")), b("v"));
            }
            let mut seen: Vec<_> = (0..fields.positions())
                .filter_map(|p| fields.at(p))
                .map(|(f, _)| f.clone())
                .collect();
            seen.sort_by(|x, y| x[..].cmp(&y[..]));
            seen.dedup();
            assert_eq!(seen.len(), count, "{count}");
            assert!(fields.at(fields.positions()).is_none());
        }
    }

    #[test]
    fn equality_ignores_representation() {
        let (mut small, mut large) = (Fields::default(), Fields::default());
        for i in 0..200 {
            large.insert(b(&format!("f{i}")), b("v"));
        }
        for i in 0..200 {
            large.remove(format!("f{i}").as_bytes());
        }
        for name in ["x", "y"] {
            small.insert(b(name), b("1"));
            large.insert(b(name), b("1"));
        }
        assert!(!large.is_small() && small == large);
        large.insert(b("y"), b("2"));
        assert!(small != large);
    }

    #[test]
    fn members_pop_every_member_once_on_both_sides_of_the_switch() {
        for count in [3, SMALL_UP_TO + 50] {
            let mut members = Members::default();
            for i in 0..count {
                assert_eq!(members.insert(b(&format!("m{i}")), ()), None);
            }
            assert_eq!(members.insert(b("m0"), ()), Some(()));
            assert_eq!(members.is_small(), count <= SMALL_UP_TO);
            let mut popped: Vec<_> = std::iter::from_fn(|| members.remove_random())
                .map(|(m, ())| String::from_utf8(m.to_vec()).unwrap())
                .collect();
            assert!(members.is_empty() && members.remove_random().is_none());
            popped.sort();
            let mut expected: Vec<_> = (0..count).map(|i| format!("m{i}")).collect();
            expected.sort();
            assert_eq!(popped, expected, "{count}");
        }
    }

    #[test]
    fn random_picks_from_a_table_left_sparse_by_removals() {
        let mut members = Members::default();
        for i in 0..10_000 {
            members.insert(b(&format!("m{i}")), ());
        }
        for i in 1..10_000 {
            members.remove(format!("m{i}").as_bytes());
        }
        // One member in a table sized for 10,000: found by walking, not by luck.
        assert!(!members.is_small());
        assert_eq!(members.random().map(|(m, ())| m.clone()), Some(b("m0")));
    }
}
