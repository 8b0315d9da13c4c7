//! A sorted set's (score, member) order with positions: what Redis's skiplist gives ZRANK,
//! ZRANGE by rank, ZRANGEBYSCORE and ZCOUNT in O(log n). The `BTreeSet` it replaces could
//! only count or skip element by element, so ZRANK, ZCOUNT and every range walked the set
//! from one end: O(n) per command on a large sorted set.
//!
//! The elements sit in sorted chunks of at most [`CHUNK_MAX`] (two levels, as Python's
//! `sortedcontainers`), with a Fenwick tree over the chunks' lengths for positions. A chunk is
//! found by a binary search on the chunks' last elements, a position by a binary search of the
//! tree; inserting or removing moves at most one chunk's elements. A chunk that fills up
//! splits in two, except at the very end (or start) of the set, where a new chunk starts, so
//! a set filled in order keeps its chunks full: 32 bytes an element there, against the
//! `BTreeSet`'s ≈ 60 (its leaves split in the middle and stay about half full).

use super::compact::CompactBytes;
use super::value::Score;

/// One element: its score and its member (inline when short).
pub(crate) type Entry = (Score, CompactBytes);

/// Most elements in a chunk: 4 KiB of entries, so an insert moves at most that much.
const CHUNK_MAX: usize = 128;

#[derive(Debug, Clone, Default)]
pub(crate) struct ZOrder {
    /// Sorted, each non-empty, in order.
    chunks: Vec<Vec<Entry>>,
    /// Prefix sums of the chunks' lengths (1-based Fenwick layout).
    tree: Vec<u32>,
    len: usize,
}

impl PartialEq for ZOrder {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl ZOrder {
    /// The order of `entries`, which are in it already (ascending, none twice): full chunks,
    /// as inserting them one by one in order would leave them, without a search per entry.
    pub fn from_ordered(entries: Vec<Entry>) -> ZOrder {
        debug_assert!(entries.windows(2).all(|pair| pair[0] < pair[1]));
        let len = entries.len();
        let chunks = if len == 0 {
            Vec::new()
        } else if len <= CHUNK_MAX {
            vec![entries]
        } else {
            let mut rest = entries.into_iter();
            let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK_MAX));
            while rest.len() > 0 {
                chunks.push(rest.by_ref().take(CHUNK_MAX).collect());
            }
            chunks
        };
        let mut order = ZOrder {
            chunks,
            tree: Vec::new(),
            len,
        };
        order.rebuild();
        order
    }

    pub fn first(&self) -> Option<&Entry> {
        self.chunks.first().and_then(|chunk| chunk.first())
    }

    pub fn last(&self) -> Option<&Entry> {
        self.chunks.last().and_then(|chunk| chunk.last())
    }

    /// Every element in order (reversible).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Entry> + '_ {
        self.chunks.iter().flatten()
    }

    /// How many elements come before the first one for which `before` is false. `before`
    /// must hold for a prefix of the order and not after it (a monotone predicate).
    pub fn partition_point(&self, mut before: impl FnMut(&Entry) -> bool) -> usize {
        // The first chunk whose last element is not `before`: the boundary is inside it.
        let chunk = self
            .chunks
            .partition_point(|chunk| before(chunk.last().expect("chunks are non-empty")));
        match self.chunks.get(chunk) {
            Some(elements) => self.start_of(chunk) + elements.partition_point(before),
            None => self.len,
        }
    }

    /// The element's position (the number of elements below it), present or not.
    pub fn rank(&self, entry: &Entry) -> usize {
        self.partition_point(|e| e < entry)
    }

    /// The elements from position `from` onwards.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &Entry> + '_ {
        let (chunk, offset) = self.locate(from.min(self.len));
        let head = self.chunks.get(chunk).map_or(&[][..], |c| &c[offset..]);
        let tail = self.chunks.get(chunk + 1..).unwrap_or(&[]);
        head.iter().chain(tail.iter().flatten())
    }

    /// The elements before position `to`, from the last of them backwards.
    pub fn iter_back_from(&self, to: usize) -> impl Iterator<Item = &Entry> + '_ {
        let (chunk, offset) = self.locate(to.min(self.len));
        let head = self.chunks.get(chunk).map_or(&[][..], |c| &c[..offset]);
        let tail = &self.chunks[..chunk.min(self.chunks.len())];
        head.iter()
            .rev()
            .chain(tail.iter().rev().flat_map(|c| c.iter().rev()))
    }

    /// Adds `entry`, which must not be present (the caller removes a member's old entry
    /// first).
    pub fn insert(&mut self, entry: Entry) {
        if self.chunks.is_empty() {
            let mut chunk = Vec::with_capacity(4);
            chunk.push(entry);
            self.chunks.push(chunk);
            self.len = 1;
            self.rebuild();
            return;
        }
        let last_chunk = self.chunks.len() - 1;
        let index = self.chunk_for(&entry).min(last_chunk);
        let at = self.chunks[index].partition_point(|e| e < &entry);
        debug_assert!(
            self.chunks[index].get(at) != Some(&entry),
            "already present"
        );
        self.len += 1;
        if self.chunks[index].len() < CHUNK_MAX {
            self.chunks[index].insert(at, entry);
            self.add(index, 1);
            return;
        }
        // Full: at either end of the set a new chunk starts (in-order loads stay dense);
        // elsewhere the chunk splits in halves.
        if index == last_chunk && at == CHUNK_MAX {
            let mut chunk = Vec::with_capacity(4);
            chunk.push(entry);
            self.chunks.push(chunk);
        } else if index == 0 && at == 0 {
            let mut chunk = Vec::with_capacity(4);
            chunk.push(entry);
            self.chunks.insert(0, chunk);
        } else {
            let mut right = Vec::with_capacity(CHUNK_MAX);
            right.extend(self.chunks[index].drain(CHUNK_MAX / 2..));
            if at <= CHUNK_MAX / 2 {
                self.chunks[index].insert(at, entry);
            } else {
                right.insert(at - CHUNK_MAX / 2, entry);
            }
            self.chunks.insert(index + 1, right);
        }
        self.rebuild();
    }

    /// Removes `entry`; whether it was there.
    pub fn remove(&mut self, entry: &Entry) -> bool {
        let index = self.chunk_for(entry);
        let Some(chunk) = self.chunks.get_mut(index) else {
            return false;
        };
        let Ok(at) = chunk.binary_search(entry) else {
            return false;
        };
        chunk.remove(at);
        self.len -= 1;
        let len = chunk.len();
        if len == 0 {
            self.chunks.remove(index);
            self.rebuild();
        } else if len < CHUNK_MAX / 4 && self.merge_with_neighbour(index) {
            self.rebuild();
        } else {
            self.add(index, -1);
            // A chunk that emptied out gives back what it held at its peak.
            let chunk = &mut self.chunks[index];
            if chunk.capacity() > 2 * chunk.len().max(4) {
                chunk.shrink_to(chunk.len() * 2);
            }
        }
        true
    }

    /// Joins a small chunk to a neighbour when both fit in half a chunk, so deletions cannot
    /// leave many near-empty chunks behind. Whether it did.
    fn merge_with_neighbour(&mut self, index: usize) -> bool {
        let fits = |other: Option<&Vec<Entry>>| {
            other.is_some_and(|o| o.len() + self.chunks[index].len() <= CHUNK_MAX / 2)
        };
        let left = if index > 0 && fits(self.chunks.get(index - 1)) {
            index - 1
        } else if fits(self.chunks.get(index + 1)) {
            index
        } else {
            return false;
        };
        let right = self.chunks.remove(left + 1);
        self.chunks[left].extend(right);
        true
    }

    /// The first chunk whose last element is not below `entry` (the chunks' count when every
    /// element is below it).
    fn chunk_for(&self, entry: &Entry) -> usize {
        (self.chunks).partition_point(|c| c.last().expect("chunks are non-empty") < entry)
    }

    /// Position `at` as (chunk, offset in it); `len` is (last chunk, its length) — or (0, 0)
    /// when empty.
    fn locate(&self, at: usize) -> (usize, usize) {
        if at >= self.len {
            return match self.chunks.len() {
                0 => (0, 0),
                n => (n - 1, self.chunks[n - 1].len()),
            };
        }
        // Fenwick descent: the largest prefix of chunks holding at most `at` elements.
        let (mut chunk, mut remaining) = (0, at);
        let mut step = self.tree.len().next_power_of_two();
        while step > 0 {
            let next = chunk + step;
            if next <= self.tree.len() && (self.tree[next - 1] as usize) <= remaining {
                chunk = next;
                remaining -= self.tree[next - 1] as usize;
            }
            step /= 2;
        }
        (chunk, remaining)
    }

    /// Elements in the chunks before `chunk`.
    fn start_of(&self, chunk: usize) -> usize {
        let (mut i, mut sum) = (chunk, 0);
        while i > 0 {
            sum += self.tree[i - 1] as usize;
            i &= i - 1;
        }
        sum
    }

    fn add(&mut self, chunk: usize, delta: i32) {
        let mut i = chunk + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] = self.tree[i - 1].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// The tree from the chunks' lengths, after chunks were added or removed: O(chunks), once
    /// per split or merge (at most once every `CHUNK_MAX / 4` inserts or removals).
    fn rebuild(&mut self) {
        self.tree.clear();
        self.tree.extend(self.chunks.iter().map(|c| c.len() as u32));
        for i in 1..=self.tree.len() {
            let parent = i + (i & i.wrapping_neg());
            if parent <= self.tree.len() {
                self.tree[parent - 1] += self.tree[i - 1];
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn check(&self) {
        assert_eq!(self.len, self.chunks.iter().map(Vec::len).sum::<usize>());
        assert!(self
            .chunks
            .iter()
            .all(|c| !c.is_empty() && c.len() <= CHUNK_MAX));
        assert!(self.iter().zip(self.iter().skip(1)).all(|(a, b)| a < b));
        for chunk in 0..=self.chunks.len() {
            let expected: usize = self.chunks[..chunk].iter().map(Vec::len).sum();
            assert_eq!(self.start_of(chunk), expected);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn entry(score: i32, member: u16) -> Entry {
        (
            Score(f64::from(score)),
            CompactBytes::new(format!("m{member}").as_bytes()),
        )
    }

    /// Against a `BTreeSet` model: after every step the same order, and the same answers to
    /// positions, ranks and walks from a position either way.
    fn run(ops: &[(bool, i32, u16)]) {
        let mut order = ZOrder::default();
        let mut model = BTreeSet::new();
        for &(insert, score, member) in ops {
            let e = entry(score, member);
            if insert {
                if model.insert(e.clone()) {
                    order.insert(e);
                }
            } else {
                assert_eq!(order.remove(&e), model.remove(&e));
            }
        }
        order.check();
        let all: Vec<&Entry> = model.iter().collect();
        assert_eq!(order.iter().collect::<Vec<_>>(), all);
        assert_eq!(
            order.iter().rev().collect::<Vec<_>>(),
            model.iter().rev().collect::<Vec<_>>()
        );
        assert_eq!(order.len, all.len());
        assert_eq!(order.first(), model.first());
        assert_eq!(order.last(), model.last());
        for at in [
            0,
            1,
            all.len() / 3,
            all.len() / 2,
            all.len().saturating_sub(1),
            all.len(),
            all.len() + 5,
        ] {
            let forward: Vec<_> = order.iter_from(at).collect();
            assert_eq!(forward, all.get(at..).unwrap_or(&[]).to_vec(), "from {at}");
            let back: Vec<_> = order.iter_back_from(at).collect();
            let mut expected = all[..at.min(all.len())].to_vec();
            expected.reverse();
            assert_eq!(back, expected, "back from {at}");
        }
        for probe in [-5, 0, 3, 7, 40] {
            let e = entry(probe, 7);
            assert_eq!(order.rank(&e), model.range(..&e).count());
            let scores = order.partition_point(|(s, _)| s.0 < f64::from(probe));
            assert_eq!(
                scores,
                model.iter().filter(|(s, _)| s.0 < f64::from(probe)).count()
            );
        }
    }

    #[test]
    fn in_order_loads_keep_chunks_full() {
        let mut order = ZOrder::default();
        for i in 0..1000 {
            order.insert(entry(i, 0));
        }
        order.check();
        assert_eq!(order.chunks.len(), 1000usize.div_ceil(CHUNK_MAX));
        let mut order = ZOrder::default();
        for i in (0..1000).rev() {
            order.insert(entry(i, 0));
        }
        order.check();
        assert_eq!(order.chunks.len(), 1000usize.div_ceil(CHUNK_MAX));
        assert_eq!(order.rank(&entry(500, 0)), 500);
        assert_eq!(order.iter_from(998).count(), 2);
    }

    #[test]
    fn removals_merge_emptied_chunks() {
        let mut order = ZOrder::default();
        for i in 0..2000 {
            order.insert(entry(i * 7 % 2000, 0));
        }
        for i in 0..2000 {
            if i % 50 != 0 {
                assert!(order.remove(&entry(i, 0)));
            }
        }
        order.check();
        assert_eq!(order.len, 40);
        assert!(
            order.chunks.len() <= 3,
            "{} chunks for 40 elements",
            order.chunks.len()
        );
    }

    proptest! {
        #[test]
        fn matches_a_btree_set(ops in proptest::collection::vec(
            (proptest::bool::weighted(0.7), -10i32..40, 0u16..60), 0..1500)) {
            run(&ops);
        }
    }
}
