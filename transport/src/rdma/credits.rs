//! Credit-based flow control for one RDMA connection, sans-I/O (brpc's sliding window, eRPC's
//! session credits). Each side posts `window + RESERVED_FOR_ACKS` receive buffers. A data
//! message needs a credit; credits come back in the immediate data of the peer's messages as
//! it reposts buffers. When a side owes many credits and has nothing to send, it sends a pure
//! acknowledgement (no payload, no credit needed): such acks are only sent once at least half
//! a window is owed, so at most a few are ever in flight, and the reserved buffers absorb them.

/// Receive buffers beyond the window, for pure acknowledgements (brpc reserves 3 as well).
pub const RESERVED_FOR_ACKS: u32 = 3;

#[derive(Debug, Clone)]
pub struct Credits {
    /// Data messages we may still send.
    available: u32,
    /// Receive buffers we reposted but have not yet told the peer about.
    owed: u32,
    /// Owed credits that justify a pure ack.
    ack_threshold: u32,
}

impl Credits {
    /// `peer_window`: how many data messages the peer accepts before it returns credits.
    pub fn new(peer_window: u32, own_window: u32) -> Credits {
        Credits {
            available: peer_window,
            owed: 0,
            ack_threshold: (own_window / 2).max(1),
        }
    }

    pub fn available(&self) -> u32 {
        self.available
    }

    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn owed(&self) -> u32 {
        self.owed
    }

    /// Take a credit for one data message.
    pub fn take(&mut self) -> bool {
        if self.available == 0 {
            return false;
        }
        self.available -= 1;
        true
    }

    /// The peer returned `n` credits (the immediate data of one of its messages).
    pub fn returned(&mut self, n: u32) {
        self.available = self.available.saturating_add(n);
    }

    /// We reposted `n` receive buffers.
    pub fn reposted(&mut self, n: u32) {
        self.owed = self.owed.saturating_add(n);
    }

    /// The credits to put in the immediate data of the message being sent now.
    pub fn take_owed(&mut self) -> u32 {
        std::mem::take(&mut self.owed)
    }

    /// Whether to send a pure ack now (nothing else is going out to carry the credits).
    pub fn ack_due(&self) -> bool {
        self.owed >= self.ack_threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_stops_at_the_window() {
        let mut c = Credits::new(4, 4);
        assert!((0..4).all(|_| c.take()));
        assert!(!c.take());
        c.returned(2);
        assert!(c.take() && c.take() && !c.take());
    }

    #[test]
    fn owed_credits_travel_once() {
        let mut c = Credits::new(8, 8);
        c.reposted(3);
        assert!(!c.ack_due());
        c.reposted(1);
        assert!(c.ack_due());
        assert_eq!(c.take_owed(), 4);
        assert_eq!(c.take_owed(), 0);
        assert!(!c.ack_due());
    }
}
