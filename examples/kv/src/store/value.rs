//! What a key holds: a string or one of the collection types, each keeping a running count of
//! the bytes it stores (elements and fields, not allocator overhead) so the store's byte
//! count stays exact without walking a collection.

use super::compact::CompactBytes;
use super::fields::{Fields, Members};
pub(crate) use super::list_pack::List;
use super::types::stream::Stream;
use super::zorder::ZOrder;

/// The type names TYPE reports and WRONGTYPE is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    String,
    List,
    Hash,
    Set,
    ZSet,
    Stream,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::List => "list",
            ValueType::Hash => "hash",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Stream => "stream",
        }
    }
}

/// Collections are boxed so a value is as small as a string (24 bytes: see
/// `compact.rs`); every key pays for its value's size, most keys are strings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(CompactBytes),
    List(Box<List>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Str(_) => ValueType::String,
            Value::List(_) => ValueType::List,
            Value::Hash(_) => ValueType::Hash,
            Value::Set(_) => ValueType::Set,
            Value::ZSet(_) => ValueType::ZSet,
            Value::Stream(_) => ValueType::Stream,
        }
    }

    /// An empty collection of `kind` (a string for [`ValueType::String`]).
    pub fn empty(kind: ValueType) -> Value {
        match kind {
            ValueType::String => Value::Str(CompactBytes::default()),
            ValueType::List => Value::List(Box::default()),
            ValueType::Hash => Value::Hash(Box::default()),
            ValueType::Set => Value::Set(Box::default()),
            ValueType::ZSet => Value::ZSet(Box::default()),
            ValueType::Stream => Value::Stream(Box::default()),
        }
    }

    /// Bytes held: a string's length, a collection's elements (and fields) with each
    /// element's fixed cost in its collection (see [`element_cost`]).
    pub fn payload_len(&self) -> usize {
        match self {
            Value::Str(bytes) => bytes.len(),
            Value::List(list) => list.bytes + list.len() * element_cost::LIST,
            Value::Hash(hash) => hash.bytes + hash.map.len() * element_cost::HASH,
            Value::Set(set) => set.bytes + set.members.len() * element_cost::SET,
            Value::ZSet(zset) => zset.bytes + zset.scores.len() * element_cost::ZSET,
            Value::Stream(stream) => stream.payload_len(),
        }
    }

    /// Elements in a collection (Redis removes a collection when it becomes empty).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::List(list) => list.is_empty(),
            Value::Hash(hash) => hash.map.is_empty(),
            Value::Set(set) => set.members.is_empty(),
            Value::ZSet(zset) => zset.scores.is_empty(),
            // An empty stream stays (its IDs and groups are state).
            Value::Stream(_) => false,
        }
    }
}

/// What one element of a collection costs besides its bytes, estimated from the entry types:
/// its slot in the collection's table (entry and control byte), or in a list's chunk (a
/// length header), so memory figures grow with element counts as Redis's do.
pub(crate) mod element_cost {
    use std::mem::size_of;

    use super::super::compact::CompactBytes;

    pub const LIST: usize = 2;
    pub const SET: usize = size_of::<CompactBytes>() + 1;
    pub const HASH: usize = 2 * size_of::<CompactBytes>() + 1;
    /// The member's table entry with its score, and its place in the score order.
    pub const ZSET: usize = 2 * (size_of::<CompactBytes>() + size_of::<f64>()) + 1;
}

/// A hash (fields and values inline when short, see `compact.rs`): small ones in insertion
/// order, as Redis's listpack, large ones in a plain table (see `fields.rs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hash {
    pub map: Fields,
    bytes: usize,
}

impl Hash {
    /// Sets `field`; returns whether it is new.
    pub fn insert(&mut self, field: CompactBytes, value: CompactBytes) -> bool {
        let (field_len, value_len) = (field.len(), value.len());
        match self.map.insert(field, value) {
            // The stored field stays; only the value changed.
            Some(old) => {
                self.bytes = self.bytes + value_len - old.len();
                false
            }
            None => {
                self.bytes += field_len + value_len;
                true
            }
        }
    }

    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.map.remove(field) {
            Some((field, value)) => {
                self.bytes -= field.len() + value.len();
                true
            }
            None => false,
        }
    }
}

/// A set of members (inline when short, see `compact.rs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Set {
    pub members: Members,
    bytes: usize,
}

impl Set {
    pub fn insert(&mut self, member: CompactBytes) -> bool {
        let len = member.len();
        let added = self.members.insert(member, ()).is_none();
        if added {
            self.bytes += len;
        }
        added
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains_key(member)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The members, in the small form's insertion order or the large form's table order.
    pub fn iter(&self) -> impl Iterator<Item = &CompactBytes> + '_ {
        self.members.iter().map(|(m, ())| m)
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        let removed = self.members.remove(member).is_some();
        if removed {
            self.bytes -= member.len();
        }
        removed
    }

    /// Removes a member picked at random (SPOP).
    pub fn remove_random(&mut self) -> Option<CompactBytes> {
        let (member, ()) = self.members.remove_random()?;
        self.bytes -= member.len();
        Some(member)
    }
}

/// A score in total order; scores are never NaN (commands refuse NaN before storing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A sorted set: member → score, and (score, member) in Redis's order (score, then member
/// bytes). The member is in both, inline when short (see `compact.rs`): two 24-byte copies
/// cost less than one shared `Bytes` (32-byte handles, its allocation and a shared header).
/// The scores take a hash's two forms (`fields.rs`): past 128 members a plain table of
/// (member, score) pairs, 16 bytes a member less than an `IndexMap` (no index vector, no
/// stored hash), which is what brought a large sorted set under redis's bytes per member.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ZSet {
    pub scores: Fields<f64>,
    /// (score, member) in order, with positions (`zorder.rs`).
    pub order: ZOrder,
    bytes: usize,
}

impl ZSet {
    /// Sets `member`'s score; returns the previous score.
    pub fn insert(&mut self, member: CompactBytes, score: f64) -> Option<f64> {
        // -0.0 and 0.0 are one score in Redis.
        let score = if score == 0.0 { 0.0 } else { score };
        let old = self.scores.insert(member.clone(), score);
        match old {
            Some(old) if old == score => return Some(old),
            Some(old) => {
                self.order.remove(&(Score(old), member.clone()));
            }
            None => self.bytes += member.len() + 8,
        }
        self.order.insert((Score(score), member));
        old
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (member, score) = self.scores.remove(member)?;
        self.order.remove(&(Score(score), member.clone()));
        self.bytes -= member.len() + 8;
        Some(score)
    }

    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// The sorted set of `pairs`, given in its order (score, then member bytes; -0.0 and
    /// 0.0 as one score) with no member twice: the result of the set algebra, built without
    /// a search of the order per member.
    pub fn from_ordered<'a>(pairs: impl ExactSizeIterator<Item = (&'a [u8], f64)>) -> ZSet {
        let n = pairs.len();
        let mut scores = Fields::with_capacity(n);
        let mut entries = Vec::with_capacity(n);
        let mut bytes = 0;
        for (member, score) in pairs {
            // -0.0 and 0.0 are one score in Redis (as `insert` stores them).
            let score = if score == 0.0 { 0.0 } else { score };
            let member = CompactBytes::new(member);
            bytes += member.len() + 8;
            let old = scores.insert(member.clone(), score);
            debug_assert!(old.is_none(), "a member given twice");
            entries.push((Score(score), member));
        }
        ZSet {
            scores,
            order: ZOrder::from_ordered(entries),
            bytes,
        }
    }

    /// Rank (0-based, ascending) of `member` with `score`.
    pub fn rank(&self, member: &[u8], score: f64) -> usize {
        self.order.rank(&(Score(score), CompactBytes::new(member)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(i: usize) -> CompactBytes {
        CompactBytes::new(format!("member:{i}").as_bytes())
    }

    /// Past the small form's 128 members the scores move to the plain table; updates and
    /// removals keep the score table and the order in step, as in the small form.
    #[test]
    fn a_large_sorted_set_keeps_scores_and_order_in_step() {
        let mut zset = ZSet::default();
        for i in 0..300 {
            assert_eq!(zset.insert(m(i), i as f64), None);
        }
        assert!(!zset.scores.is_small());
        // Reverse the first hundred's order, drop every third member.
        for i in 0..100 {
            assert_eq!(zset.insert(m(i), -(i as f64)), Some(i as f64));
        }
        for i in (0..300).step_by(3) {
            assert!(zset.remove(m(i).as_ref()).is_some());
        }
        assert_eq!(zset.remove(m(0).as_ref()), None);
        let expected: Vec<(f64, CompactBytes)> = {
            let mut all: Vec<_> = (0..300)
                .filter(|i| i % 3 != 0)
                .map(|i| (if i < 100 { -(i as f64) } else { i as f64 }, m(i)))
                .collect();
            all.sort_by(|a, b| a.0.total_cmp(&b.0));
            all
        };
        let order: Vec<_> = zset.order.iter().map(|(s, m)| (s.0, m.clone())).collect();
        assert_eq!(order, expected);
        assert_eq!(zset.len(), expected.len());
        for (score, member) in &expected {
            assert_eq!(zset.scores.get(member), Some(score));
        }
        // ZSCAN's positions reach every member once.
        let scanned = (0..zset.scores.positions())
            .filter_map(|p| zset.scores.at(p))
            .count();
        assert_eq!(scanned, expected.len());
        // Below 200: the 66 negated members kept and the 67 kept of 100..200.
        assert_eq!(zset.rank(m(200).as_ref(), 200.0), 133);
    }

    /// Built at once from ordered pairs (the set algebra's result), a sorted set is the one
    /// the same members inserted one by one give: scores, order, ranks, size, and -0.0 as
    /// 0.0; and it takes further inserts and removals as that one does.
    #[test]
    fn a_sorted_set_built_from_ordered_pairs_is_the_inserted_one() {
        for n in [0, 1, 128, 129, 300] {
            let mut pairs: Vec<(CompactBytes, f64)> = (0..n)
                .map(|i| (m(i), if i == 0 { -0.0 } else { (i % 7) as f64 }))
                .collect();
            pairs.sort_by(|a, b| {
                (a.1.partial_cmp(&b.1).expect("no NaN")).then_with(|| a.0[..].cmp(&b.0[..]))
            });
            let mut built = ZSet::from_ordered(pairs.iter().map(|(m, s)| (&m[..], *s)));
            let mut inserted = ZSet::default();
            for (member, score) in pairs.iter().rev() {
                inserted.insert(member.clone(), *score);
            }
            assert_eq!(built, inserted, "{n} members");
            assert_eq!(built.bytes, inserted.bytes);
            assert_eq!(built.scores.is_small(), inserted.scores.is_small());
            built.order.check();
            if n > 0 {
                assert_eq!(built.scores.get(m(0).as_ref()), Some(&0.0));
                assert!(built
                    .order
                    .first()
                    .is_some_and(|e| e.0 .0.is_sign_positive()));
            }
            for i in (0..n).step_by(5) {
                assert_eq!(
                    built.rank(m(i).as_ref(), (i % 7) as f64),
                    inserted.rank(m(i).as_ref(), (i % 7) as f64)
                );
            }
            for i in (0..n).step_by(3) {
                assert_eq!(built.remove(m(i).as_ref()), inserted.remove(m(i).as_ref()));
            }
            built.insert(m(1000), 3.5);
            inserted.insert(m(1000), 3.5);
            assert_eq!(built, inserted);
            built.order.check();
        }
    }
}
