//! A growable byte FIFO backed by one contiguous buffer: sockets read into its spare tail, and
//! protocol code consumes complete messages from its head.

/// Contiguous FIFO of bytes.
#[derive(Debug, Default)]
pub struct ByteQueue {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl ByteQueue {
    /// An empty queue with `capacity` bytes allocated.
    pub fn with_capacity(capacity: usize) -> ByteQueue {
        ByteQueue {
            data: vec![0; capacity],
            start: 0,
            end: 0,
        }
    }

    /// Buffered bytes not yet consumed.
    pub fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Number of buffered bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Writable space of at least `min` bytes after the buffered data.
    ///
    /// Compacts before growing: once a message is consumed its space is reused, so steady-state
    /// traffic never reallocates.
    pub fn spare(&mut self, min: usize) -> &mut [u8] {
        if self.data.len() - self.end < min {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.data.len() - self.end < min {
                self.data.resize(self.end + min, 0);
            }
        }
        &mut self.data[self.end..]
    }

    /// Marks `n` bytes of the spare space as filled.
    pub fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.data.len());
    }

    /// Appends `bytes`.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.spare(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        self.commit(bytes.len());
    }

    /// Drops `n` bytes from the head.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_survives_compaction_and_growth() {
        let mut q = ByteQueue::with_capacity(8);
        q.extend(b"abcdef");
        q.consume(4);
        assert_eq!(q.filled(), b"ef");
        // Needs 7 bytes: compaction frees 4, growth covers the rest.
        let spare = q.spare(7);
        assert!(spare.len() >= 7);
        spare[..3].copy_from_slice(b"ghi");
        q.commit(3);
        assert_eq!(q.filled(), b"efghi");
        assert_eq!(q.len(), 5);
        q.consume(10);
        assert!(q.is_empty());
    }
}
