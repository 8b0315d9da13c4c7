//! Hash slots as Redis Cluster counts them (16384, CRC16 of the key or its `{tag}`), sets of
//! them as the bitmap the cluster bus carries, and the `start-end` ranges that CLUSTER NODES,
//! CLUSTER SLOTS and `nodes.conf` print.

pub use crate::routing::{key_slot, SLOT_COUNT};

/// Number of slots, as a `usize` for indexing.
pub const SLOTS: usize = SLOT_COUNT as usize;

/// Bytes of a [`SlotSet`] bitmap.
pub const BITMAP_BYTES: usize = SLOTS / 8;

/// A set of slots: bit `s % 8` of byte `s / 8` (Redis's `myslots` layout).
#[derive(Clone, PartialEq, Eq)]
pub struct SlotSet {
    bits: Box<[u8; BITMAP_BYTES]>,
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet {
            bits: Box::new([0; BITMAP_BYTES]),
        }
    }
}

impl std::fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(ranges(self.iter())).finish()
    }
}

impl SlotSet {
    /// The set a bus message carries; `None` unless `bytes` is exactly a bitmap.
    pub fn from_bytes(bytes: &[u8]) -> Option<SlotSet> {
        let bits: [u8; BITMAP_BYTES] = bytes.try_into().ok()?;
        Some(SlotSet {
            bits: Box::new(bits),
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bits[..]
    }

    pub fn contains(&self, slot: u16) -> bool {
        let slot = usize::from(slot);
        slot < SLOTS && self.bits[slot / 8] & (1 << (slot % 8)) != 0
    }

    pub fn insert(&mut self, slot: u16) {
        let slot = usize::from(slot);
        if slot < SLOTS {
            self.bits[slot / 8] |= 1 << (slot % 8);
        }
    }

    pub fn len(&self) -> usize {
        self.bits.iter().map(|b| b.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&b| b == 0)
    }

    /// The slots in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..SLOT_COUNT).filter(|&slot| self.contains(slot))
    }
}

impl FromIterator<u16> for SlotSet {
    fn from_iter<I: IntoIterator<Item = u16>>(iter: I) -> Self {
        let mut set = SlotSet::default();
        for slot in iter {
            set.insert(slot);
        }
        set
    }
}

/// Contiguous runs of increasing slots as inclusive `(start, end)` pairs.
pub fn ranges(slots: impl IntoIterator<Item = u16>) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for slot in slots {
        match out.last_mut() {
            Some((_, end)) if u32::from(*end) + 1 == u32::from(slot) => *end = slot,
            _ => out.push((slot, slot)),
        }
    }
    out
}

/// `5` or `0-5460`, as CLUSTER NODES prints a range.
pub fn format_range((start, end): (u16, u16)) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start}-{end}")
    }
}

/// A slot argument: an integer in `0..16384` (Redis's `getSlotOrReply`).
pub fn parse_slot(arg: &[u8]) -> Option<u16> {
    let slot = crate::number::parse_i64(arg)?;
    u16::try_from(slot).ok().filter(|&s| s < SLOT_COUNT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_group_contiguous_slots() {
        assert_eq!(ranges([0, 1, 2, 5, 7, 8]), vec![(0, 2), (5, 5), (7, 8)]);
        assert_eq!(ranges([]), vec![]);
        let all: SlotSet = (0..SLOT_COUNT).collect();
        assert_eq!(ranges(all.iter()), vec![(0, 16383)]);
        assert_eq!(all.len(), SLOTS);
        assert_eq!(format_range((0, 16383)), "0-16383");
        assert_eq!(format_range((7, 7)), "7");
    }

    #[test]
    fn bitmap_round_trips() {
        let set: SlotSet = [0, 9, 16383].into_iter().collect();
        let back = SlotSet::from_bytes(set.as_bytes()).unwrap();
        assert_eq!(back.iter().collect::<Vec<_>>(), vec![0, 9, 16383]);
        assert!(SlotSet::from_bytes(&[0; 3]).is_none());
        assert!(SlotSet::default().is_empty());
    }

    #[test]
    fn slot_arguments() {
        assert_eq!(parse_slot(b"0"), Some(0));
        assert_eq!(parse_slot(b"16383"), Some(16383));
        assert_eq!(parse_slot(b"16384"), None);
        assert_eq!(parse_slot(b"-1"), None);
        assert_eq!(parse_slot(b"x"), None);
    }
}
