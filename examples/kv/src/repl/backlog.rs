//! The replication backlog: the newest `repl-backlog-size` bytes of the stream, numbered,
//! so a replica that lost its link can continue from where it was.

use std::collections::VecDeque;

use bytes::Bytes;

/// `repl-backlog-size`'s default, as Redis's: 1 MiB.
pub const DEFAULT_BACKLOG_SIZE: usize = 1 << 20;

/// A bounded ring of the stream's newest bytes.
#[derive(Debug, Clone)]
pub struct Backlog {
    data: VecDeque<u8>,
    size: usize,
    /// The 1-based number of `data[0]` (Redis's `repl_backlog->offset`).
    first: u64,
}

impl Backlog {
    /// An empty backlog whose next byte is number `master_repl_offset + 1`.
    pub fn new(size: usize, master_repl_offset: u64) -> Backlog {
        Backlog {
            data: VecDeque::new(),
            size: size.max(1),
            first: master_repl_offset + 1,
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes held (`repl_backlog_histlen`).
    pub fn histlen(&self) -> usize {
        self.data.len()
    }

    /// The number of the oldest byte held (`repl_backlog_first_byte_offset`).
    pub fn first_byte_offset(&self) -> u64 {
        self.first
    }

    /// The number the next byte appended gets (`master_repl_offset + 1`).
    pub fn next_offset(&self) -> u64 {
        self.first + self.data.len() as u64
    }

    /// Appends stream bytes, dropping the oldest beyond the size.
    pub fn append(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.size {
            let skipped = self.data.len() + bytes.len() - self.size;
            self.data.clear();
            self.data.extend(&bytes[bytes.len() - self.size..]);
            self.first += skipped as u64;
            return;
        }
        self.data.extend(bytes);
        self.trim();
    }

    /// `CONFIG SET repl-backlog-size`: a smaller size drops the oldest bytes.
    pub fn resize(&mut self, size: usize) {
        self.size = size.max(1);
        self.trim();
        self.data.shrink_to(self.size);
    }

    fn trim(&mut self) {
        let over = self.data.len().saturating_sub(self.size);
        if over > 0 {
            self.data.drain(..over);
            self.first += over as u64;
        }
    }

    /// Whether a replica can continue from byte number `offset`: it is held, or is the next
    /// one (a replica that is up to date).
    pub fn covers(&self, offset: u64) -> bool {
        offset >= self.first && offset <= self.next_offset()
    }

    /// The bytes from number `offset` on, or `None` if they are no longer (or not yet) held.
    pub fn since(&self, offset: u64) -> Option<Bytes> {
        if !self.covers(offset) {
            return None;
        }
        let skip = (offset - self.first) as usize;
        let (a, b) = self.data.as_slices();
        let mut out = Vec::with_capacity(self.data.len() - skip);
        if skip < a.len() {
            out.extend_from_slice(&a[skip..]);
            out.extend_from_slice(b);
        } else {
            out.extend_from_slice(&b[skip - a.len()..]);
        }
        Some(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_bytes_from_the_offset_it_starts_at() {
        let mut backlog = Backlog::new(16, 100);
        assert_eq!(backlog.first_byte_offset(), 101);
        assert_eq!(backlog.next_offset(), 101);
        assert_eq!(backlog.since(101).unwrap(), Bytes::new());
        backlog.append(b"hello");
        assert_eq!(backlog.histlen(), 5);
        assert_eq!(backlog.next_offset(), 106);
        assert_eq!(&backlog.since(103).unwrap()[..], b"llo");
        assert!(backlog.since(100).is_none());
        assert!(backlog.since(107).is_none());
    }

    #[test]
    fn keeps_only_the_newest_size_bytes() {
        let mut backlog = Backlog::new(8, 0);
        backlog.append(b"0123456");
        backlog.append(b"789ab");
        assert_eq!(backlog.histlen(), 8);
        assert_eq!(backlog.first_byte_offset(), 5);
        assert_eq!(&backlog.since(5).unwrap()[..], b"456789ab");
        assert!(!backlog.covers(4));
        // One append larger than the whole backlog.
        backlog.append(b"ABCDEFGHIJKL");
        assert_eq!(backlog.next_offset(), 25);
        assert_eq!(&backlog.since(17).unwrap()[..], b"EFGHIJKL");
        backlog.resize(3);
        assert_eq!(&backlog.since(22).unwrap()[..], b"JKL");
        assert_eq!(backlog.next_offset(), 25);
    }

    #[test]
    fn wraps_around_its_ring() {
        let mut backlog = Backlog::new(10, 0);
        let mut all = Vec::new();
        for i in 0..50u8 {
            let chunk = [i; 3];
            backlog.append(&chunk);
            all.extend_from_slice(&chunk);
            let first = backlog.first_byte_offset();
            let held = backlog.since(first).unwrap();
            assert_eq!(&held[..], &all[(first - 1) as usize..]);
        }
    }
}
