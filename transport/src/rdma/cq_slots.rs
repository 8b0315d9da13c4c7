//! How many completions a shard's queue pairs can have outstanding at once, against what the
//! shared completion queue holds (sans-I/O). Every posted work request produces at most one
//! completion, so a queue pair may use its CQ only for as many entries as it can post: its
//! send queue plus its receive queue. A connection whose queues would not fit is refused,
//! never allowed to overrun the CQ (an overrun breaks every queue pair of the shard).
//!
//! A destroyed queue pair's flushed completions may still sit in the CQ until the poller
//! reaps them, so its entries come back only after the next poll that found the CQ empty.

use std::fmt;

#[derive(Debug, Clone)]
pub struct CqSlots {
    capacity: u32,
    in_use: u32,
    /// Released by destroyed queue pairs; free once the CQ has been drained.
    draining: u32,
}

/// A queue pair's queues do not fit in what is left of the CQ.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CqFull {
    /// Entries the connection needs.
    pub wanted: u32,
    /// Entries reserved by open connections.
    pub in_use: u32,
    /// The queue's entries.
    pub capacity: u32,
}

impl fmt::Display for CqFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "completion queue full: a connection needs {} entries, {} of {} are reserved by \
             open connections (raise RdmaConfig::cq_max_entries; the device's limit is its max_cqe)",
            self.wanted, self.in_use, self.capacity
        )
    }
}

impl std::error::Error for CqFull {}

impl CqSlots {
    pub fn new(capacity: u32) -> CqSlots {
        CqSlots {
            capacity,
            in_use: 0,
            draining: 0,
        }
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The CQ was resized.
    pub fn set_capacity(&mut self, capacity: u32) {
        self.capacity = self.capacity.max(capacity);
    }

    /// Entries reserved, including those of destroyed queue pairs not yet drained.
    pub fn in_use(&self) -> u32 {
        self.in_use + self.draining
    }

    /// Reserve `n` entries for a new queue pair.
    pub fn reserve(&mut self, n: u32) -> Result<(), CqFull> {
        if self.in_use() + n > self.capacity {
            return Err(CqFull {
                wanted: n,
                in_use: self.in_use(),
                capacity: self.capacity,
            });
        }
        self.in_use += n;
        Ok(())
    }

    /// A queue pair that never posted anything (creation failed): its entries are free now.
    pub fn cancel(&mut self, n: u32) {
        self.in_use = self.in_use.saturating_sub(n);
    }

    /// A queue pair was destroyed: its entries come back after the next drain.
    pub fn release(&mut self, n: u32) {
        let n = n.min(self.in_use);
        self.in_use -= n;
        self.draining += n;
    }

    /// The poller found the CQ empty: completions of destroyed queue pairs are all reaped.
    pub fn drained(&mut self) {
        self.draining = 0;
    }

    /// Whether released entries wait for a drain.
    pub fn has_draining(&self) -> bool {
        self.draining > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_does_not_fit() {
        let mut s = CqSlots::new(100);
        assert!(s.reserve(40).is_ok());
        assert!(s.reserve(40).is_ok());
        assert_eq!(
            s.reserve(40),
            Err(CqFull {
                wanted: 40,
                in_use: 80,
                capacity: 100
            })
        );
        assert!(s.reserve(20).is_ok());
        assert_eq!(s.in_use(), 100);
    }

    #[test]
    fn released_entries_come_back_only_after_a_drain() {
        let mut s = CqSlots::new(50);
        s.reserve(50).unwrap();
        s.release(50);
        assert!(s.has_draining());
        assert!(
            s.reserve(1).is_err(),
            "flushed completions may still be queued"
        );
        s.drained();
        assert!(s.reserve(50).is_ok());
    }

    #[test]
    fn cancelled_reservations_are_free_at_once() {
        let mut s = CqSlots::new(10);
        s.reserve(10).unwrap();
        s.cancel(10);
        assert_eq!(s.in_use(), 0);
        assert!(s.reserve(10).is_ok());
    }

    #[test]
    fn the_message_says_what_to_raise() {
        let e = CqFull {
            wanted: 42,
            in_use: 4080,
            capacity: 4096,
        };
        let text = e.to_string();
        assert!(
            text.contains("cq_max_entries") && text.contains("42"),
            "{text}"
        );
    }
}
