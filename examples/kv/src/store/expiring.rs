use super::compact::CompactBytes;

/// The keys that carry a TTL, in a dense vector so active expiry can walk them without
/// touching keys that never expire. Each entry with a TTL records its slot here; removal is
/// `swap_remove`, so the caller must update the slot of the key moved into the hole.
#[derive(Debug, Default)]
pub(crate) struct ExpiringIndex {
    keys: Vec<CompactBytes>,
    /// Where the next sweep starts, so successive bounded sweeps cover every key in turn.
    pub cursor: usize,
}

impl ExpiringIndex {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn key(&self, slot: usize) -> Option<&CompactBytes> {
        self.keys.get(slot)
    }

    /// Adds a copy of a key and returns its slot.
    pub fn push(&mut self, key: CompactBytes) -> usize {
        self.keys.push(key);
        self.keys.len() - 1
    }

    /// Removes `slot`. Returns the key that now occupies it, if another key moved there.
    pub fn swap_remove(&mut self, slot: usize) -> Option<&CompactBytes> {
        if slot >= self.keys.len() {
            return None;
        }
        self.keys.swap_remove(slot);
        self.keys.get(slot)
    }

    pub fn clear(&mut self) {
        self.keys.clear();
        self.cursor = 0;
    }
}
