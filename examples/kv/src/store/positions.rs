//! The key table's hash index: positions into the dense vector of slots, found by the key's
//! hash, in one flat array of `u32` buckets probed linearly.
//!
//! Why not `hashbrown::HashTable<u32>` (the index before): its control bytes and its buckets
//! are two arrays, so a lookup in a table larger than the caches missed twice before it even
//! reached the slot (the control byte's group, then the position), and the slot was a third
//! miss. Here a bucket holds the position and, in the bits the position does not need, a tag
//! of the hash (what the control byte held): the probe reads one cache line (16 buckets), and
//! only a bucket whose tag matches sends the lookup to the slot. A bucket costs 4 bytes
//! instead of 5, at the same bucket counts (a power of two, at most 7/8 full), so the index
//! never takes more memory than before.
//!
//! A table of `2^b` buckets holds fewer than `2^b` keys, so positions fit in `b` bits and the
//! tag gets the other `32 - b` (7 or more up to 2^25 buckets; fewer above, where more tags
//! match by chance and the slot's key is compared more often, but lookups stay correct).
//! Removal leaves a tombstone (moving the entries after it back would need their hashes, a
//! slot read each); tombstones count as used until the next rebuild, as in `hashbrown`.

/// A bucket never used since the last rebuild: a probe stops here.
const EMPTY: u32 = u32::MAX;
/// A bucket whose entry was removed: a probe goes on past it, an insertion may reuse it.
/// Neither marker is ever an entry: an entry's position is below 7/8 of the buckets, and
/// these two have every position bit set but the last (with at least 16 buckets).
const TOMBSTONE: u32 = u32::MAX - 1;
/// The fewest buckets of a table that has any.
const MIN_BUCKETS: usize = 16;

#[derive(Debug, Default)]
pub(crate) struct Positions {
    /// A power of two of them, or none.
    buckets: Vec<u32>,
    /// Entries and tombstones.
    used: usize,
    /// Entries.
    len: usize,
}

/// Most buckets (entries and tombstones) used in a table of `buckets`.
fn max_used(buckets: usize) -> usize {
    buckets / 8 * 7
}

/// The bucket count for `len` entries: the smallest power of two (16 at least) that holds
/// them at most 7/8 full.
fn buckets_for(len: usize) -> usize {
    let mut buckets = MIN_BUCKETS;
    while max_used(buckets) < len {
        buckets *= 2;
    }
    buckets
}

impl Positions {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The bits of an entry that hold the position.
    fn position_mask(&self) -> u32 {
        let bits = self.buckets.len().trailing_zeros();
        ((1u64 << bits) - 1) as u32
    }

    /// The hash's tag, in the bits above the position (from the hash's high half: its low
    /// bits pick the home bucket).
    fn tag(&self, hash: u64) -> u32 {
        (hash >> 32) as u32 & !self.position_mask()
    }

    /// The bucket holding the position for which `eq` is true, among those whose tag matches
    /// `hash`'s.
    fn find_bucket(&self, hash: u64, mut eq: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.buckets.is_empty() {
            return None;
        }
        let (mask, position_mask) = (self.buckets.len() - 1, self.position_mask());
        let tag = (hash >> 32) as u32 & !position_mask;
        let mut at = hash as usize & mask;
        // At most 7/8 of the buckets are used: the probe meets an empty one.
        loop {
            let bucket = self.buckets[at];
            if bucket == EMPTY {
                return None;
            }
            if bucket & !position_mask == tag
                && bucket != TOMBSTONE
                && eq((bucket & position_mask) as usize)
            {
                return Some(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// The position with `hash` for which `eq` is true.
    pub fn find(&self, hash: u64, eq: impl FnMut(usize) -> bool) -> Option<usize> {
        let at = self.find_bucket(hash, eq)?;
        Some((self.buckets[at] & self.position_mask()) as usize)
    }

    /// Adds `position` (of a key known to be absent) under `hash`; `rehash` gives the hash
    /// of the key at any position already in, for a rebuild.
    pub fn insert(&mut self, hash: u64, position: usize, rehash: impl Fn(usize) -> u64) {
        if self.used + 1 > max_used(self.buckets.len()) {
            // Mostly tombstones: rebuilt at the same size; else twice as large.
            let buckets = if self.len < max_used(self.buckets.len()) / 2 {
                self.buckets.len().max(MIN_BUCKETS)
            } else {
                (self.buckets.len() * 2).max(MIN_BUCKETS)
            };
            self.rebuild(buckets, &rehash);
        }
        self.place(hash, position);
        self.len += 1;
    }

    /// Writes an entry into the first free bucket of its probe (no duplicate check).
    fn place(&mut self, hash: u64, position: usize) {
        let (mask, tag) = (self.buckets.len() - 1, self.tag(hash));
        let mut at = hash as usize & mask;
        while !matches!(self.buckets[at], EMPTY | TOMBSTONE) {
            at = (at + 1) & mask;
        }
        if self.buckets[at] == EMPTY {
            self.used += 1;
        }
        debug_assert!((position as u64) < self.buckets.len() as u64 / 8 * 7);
        self.buckets[at] = tag | position as u32;
    }

    /// Removes the position with `hash` for which `eq` is true; returns it.
    pub fn remove(&mut self, hash: u64, eq: impl FnMut(usize) -> bool) -> Option<usize> {
        let at = self.find_bucket(hash, eq)?;
        let position = (self.buckets[at] & self.position_mask()) as usize;
        self.buckets[at] = TOMBSTONE;
        self.len -= 1;
        Some(position)
    }

    /// The entry of `from` (found under `hash`) now says `to` (a slot moved).
    pub fn relocate(&mut self, hash: u64, from: usize, to: usize) {
        if let Some(at) = self.find_bucket(hash, |position| position == from) {
            let tag = self.buckets[at] & !self.position_mask();
            self.buckets[at] = tag | to as u32;
        }
    }

    /// Rebuilds for `len` entries (the current ones, whose hashes `rehash` gives by
    /// position) at the size that holds them, when that is smaller than now.
    pub fn shrink_to(&mut self, len: usize, rehash: impl Fn(usize) -> u64) {
        let buckets = buckets_for(len.max(self.len));
        if buckets < self.buckets.len() {
            self.rebuild(buckets, &rehash);
        }
    }

    /// Every entry again in a table of `buckets`, without tombstones. The entries are read
    /// back first: positions are `0..len` (the dense vector has no holes).
    fn rebuild(&mut self, buckets: usize, rehash: &impl Fn(usize) -> u64) {
        let len = self.len;
        self.buckets = vec![EMPTY; buckets];
        self.used = 0;
        for position in 0..len {
            self.place(rehash(position), position);
        }
    }

    /// Heap bytes (MEMORY STATS).
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<u32>()
    }

    /// Bytes per entry for `used_memory`: a bucket in a table between half and 7/8 full.
    pub const fn bytes_per_entry() -> usize {
        2 * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes chosen to collide: every entry's home is bucket 3 and they share tags, so the
    /// probes run through one long cluster with tombstones in it.
    #[test]
    fn colliding_hashes_probe_past_tombstones() {
        let mut index = Positions::default();
        let hash = |position: usize| 3 | ((position as u64 % 2) << 63);
        for position in 0..12 {
            index.insert(hash(position), position, hash);
        }
        assert_eq!(index.len(), 12);
        for position in 0..12 {
            assert_eq!(
                index.find(hash(position), |p| p == position),
                Some(position)
            );
        }
        assert_eq!(index.remove(hash(4), |p| p == 4), Some(4));
        assert_eq!(index.remove(hash(4), |p| p == 4), None);
        assert_eq!(index.find(hash(11), |p| p == 11), Some(11));
        index.relocate(hash(11), 11, 4);
        assert_eq!(index.find(hash(11), |p| p == 4), Some(4));
        assert_eq!(index.find(hash(11), |p| p == 11), None);
    }

    /// Inserting and removing in turn never leaves the table without an empty bucket (a
    /// probe would not end) and rebuilds at the same size rather than growing.
    #[test]
    fn tombstones_are_cleared_by_rebuilds_not_growth() {
        let mut index = Positions::default();
        let hash = |position: usize| (position as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // One key, removed and added again 1000 times: each time at position 0.
        let key_hash = hash(12345);
        for _ in 0..1000 {
            index.insert(key_hash, 0, |_| key_hash);
            assert_eq!(index.find(key_hash, |p| p == 0), Some(0));
            assert_eq!(index.remove(key_hash, |p| p == 0), Some(0));
            assert_eq!(index.find(hash(7), |_| true), None);
        }
        assert_eq!(index.buckets.len(), MIN_BUCKETS);
        assert_eq!(index.len(), 0);
    }

    #[test]
    fn sizes_match_hashbrown_bucket_counts() {
        assert_eq!(buckets_for(0), 16);
        assert_eq!(buckets_for(14), 16);
        assert_eq!(buckets_for(15), 32);
        assert_eq!(buckets_for(100_000), 131_072);
        assert_eq!(buckets_for(1_000_000), 2_097_152);
    }
}
