//! The sender's table of large messages the peer may read, sans-I/O: each entry keeps its
//! memory registered (and alive) until the peer's "done", or until the connection ends and
//! the table is dropped. Bounded: the writer waits for room, which bounds both our pinned
//! memory and what the peer is asked to read at once.

use std::collections::HashMap;

/// Ids are 24 bits: the reader's RDMA READ carries one in its work-request id.
pub const ID_MASK: u32 = 0xff_ffff;

#[derive(Debug)]
pub struct Outgoing<T> {
    entries: HashMap<u32, T>,
    next_id: u32,
    max: usize,
}

impl<T> Outgoing<T> {
    pub fn new(max: usize) -> Outgoing<T> {
        Outgoing {
            entries: HashMap::new(),
            next_id: 0,
            max: max.max(1),
        }
    }

    pub fn has_room(&self) -> bool {
        self.entries.len() < self.max
    }

    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keep `held` until [`release`](Self::release) of the id returned (after
    /// [`has_room`](Self::has_room)).
    pub fn insert(&mut self, held: T) -> u32 {
        // Ids are unique among the entries: at most `max` (far fewer than 2^24) are live.
        while self.entries.contains_key(&self.next_id) {
            self.next_id = (self.next_id + 1) & ID_MASK;
        }
        let id = self.next_id;
        self.next_id = (self.next_id + 1) & ID_MASK;
        self.entries.insert(id, held);
        id
    }

    /// The peer is done with `id`: what was held for it (`None` for an id we never gave, or
    /// gave back already: a confused peer, ignored).
    pub fn release(&mut self, id: u32) -> Option<T> {
        self.entries.remove(&id)
    }

    /// The connection ended: everything held.
    pub fn drain(&mut self) -> Vec<T> {
        self.entries.drain().map(|(_, held)| held).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_held_until_released_and_bounded() {
        let mut t = Outgoing::new(2);
        let a = t.insert("a");
        assert!(t.has_room());
        let b = t.insert("b");
        assert_ne!(a, b);
        assert!(!t.has_room());
        assert_eq!(t.release(a), Some("a"));
        assert_eq!(t.release(a), None, "released once");
        assert!(t.has_room());
        let c = t.insert("c");
        assert_ne!(c, b);
        let mut left = t.drain();
        left.sort_unstable();
        assert_eq!(left, ["b", "c"]);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn ids_skip_live_entries_when_they_wrap() {
        let mut t = Outgoing::new(4);
        t.next_id = ID_MASK;
        let last = t.insert(1);
        assert_eq!(last, ID_MASK);
        let first = t.insert(2);
        assert_eq!(first, 0);
        t.next_id = ID_MASK;
        assert_eq!(t.insert(3), 1, "the last id and 0 are live");
    }
}
