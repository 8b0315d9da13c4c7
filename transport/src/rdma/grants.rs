//! A shard's receive budget when its connections share one receive queue (sans-I/O).
//!
//! With a shared receive queue (SRQ) no buffer belongs to a connection, so credits cannot be
//! "the buffers posted for you". Instead every grant a peer holds (a data message it may send)
//! is counted against the shard's budget: the buffers the SRQ keeps posted, less a slack for
//! pure acks (which need no grant). A connection asks to top its peer up to its window; it gets
//! what the budget has left, and waits in line for the rest, served first when grants come
//! back. A peer is never left with none: a connection whose peer holds no grant gets one even
//! over budget, so every connection makes progress (stop-and-wait at worst). That floor is
//! the only overcommit, at most one message per connection, and reliable connections absorb
//! it: a message that finds the SRQ empty is retried by the sender's hardware
//! (receiver-not-ready, retried forever), never lost.

use std::collections::VecDeque;

/// A connection, as the shard's connection table names it (slot, generation).
pub type ConnKey = (u32, u16);

#[derive(Debug, Clone)]
pub struct SharedGrants {
    budget: u32,
    /// Grants peers hold or have in flight.
    outstanding: u32,
    /// Connections that asked for more than the budget had, in arrival order.
    waiting: VecDeque<ConnKey>,
}

impl SharedGrants {
    pub fn new(budget: u32) -> SharedGrants {
        SharedGrants {
            budget: budget.max(1),
            outstanding: 0,
            waiting: VecDeque::new(),
        }
    }

    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn budget(&self) -> u32 {
        self.budget
    }

    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    pub fn available(&self) -> u32 {
        self.budget.saturating_sub(self.outstanding)
    }

    /// The grants a new connection's peer starts with (sent in the handshake): up to
    /// `window`, what the budget has, and never none.
    pub fn initial(&mut self, window: u32) -> u32 {
        let n = window.min(self.available()).max(1);
        self.outstanding += n;
        n
    }

    /// A data message arrived: it used one grant.
    pub fn consumed(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// Connection `key` wants to grant its peer `want` more (its peer holds `peer_holds`):
    /// how many it may grant now. If that is less than it wanted it is queued, and served by
    /// [`next_waiting`](Self::next_waiting) when grants come back.
    pub fn grant(&mut self, key: ConnKey, want: u32, peer_holds: u32) -> u32 {
        let mut n = want.min(self.available());
        if n == 0 && want > 0 && peer_holds == 0 {
            n = 1;
        }
        self.outstanding += n;
        if n < want && !self.waiting.contains(&key) {
            self.waiting.push_back(key);
        }
        n
    }

    /// Connection `key` closed: what its peer held returns to the budget.
    pub fn closed(&mut self, key: ConnKey, peer_held: u32) {
        self.outstanding = self.outstanding.saturating_sub(peer_held);
        self.waiting.retain(|k| *k != key);
    }

    /// The next connection to serve, while the budget has grants to give.
    pub fn next_waiting(&mut self) -> Option<ConnKey> {
        if self.available() == 0 {
            return None;
        }
        self.waiting.pop_front()
    }

    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_grants_come_from_the_budget_and_are_never_zero() {
        let mut g = SharedGrants::new(20);
        assert_eq!(g.initial(16), 16);
        assert_eq!(g.initial(16), 4);
        assert_eq!(g.initial(16), 1, "a new peer always gets one");
        assert_eq!(g.outstanding(), 21);
    }

    #[test]
    fn grants_wait_in_line_for_the_budget() {
        let mut g = SharedGrants::new(4);
        g.initial(4);
        // (1, 0)'s peer used one message and wants it back, but (2, 0) is starved.
        g.consumed();
        assert_eq!(g.grant((2, 0), 2, 1), 1);
        assert_eq!(g.grant((1, 0), 1, 3), 0, "budget spent: wait");
        assert_eq!(g.waiting(), 2);
        g.consumed();
        assert_eq!(g.next_waiting(), Some((2, 0)), "first come, first served");
        assert_eq!(g.next_waiting(), Some((1, 0)));
        assert_eq!(g.next_waiting(), None);
    }

    #[test]
    fn a_peer_without_grants_always_gets_one() {
        let mut g = SharedGrants::new(2);
        g.initial(2);
        assert_eq!(g.grant((7, 1), 5, 0), 1, "over budget, but never stuck");
        assert_eq!(g.grant((7, 1), 5, 1), 0);
    }

    #[test]
    fn a_closed_connection_returns_its_grants_and_leaves_the_line() {
        let mut g = SharedGrants::new(8);
        g.initial(8);
        g.grant((3, 0), 2, 1);
        g.closed((3, 0), 8);
        assert_eq!(g.available(), 8);
        assert_eq!(g.next_waiting(), None);
    }

    /// Many connections, random traffic: the outstanding grants exceed the budget by at most
    /// one per connection (the floor), and every connection keeps making progress.
    #[test]
    fn overcommit_is_bounded_by_one_per_connection_and_nobody_starves() {
        const CONNS: usize = 50;
        const WINDOW: u32 = 8;
        let mut g = SharedGrants::new(40);
        let mut holds: Vec<u32> = (0..CONNS).map(|_| g.initial(WINDOW)).collect();
        let mut sent = [0u32; CONNS];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200_000 {
            let c = (rand() % CONNS as u64) as usize;
            if holds[c] > 0 {
                // c's peer sends a message; we regrant what we can.
                holds[c] -= 1;
                sent[c] += 1;
                g.consumed();
                let want = WINDOW - holds[c];
                holds[c] += g.grant((c as u32, 0), want, holds[c]);
            }
            while let Some((k, _)) = g.next_waiting() {
                let k = k as usize;
                let want = WINDOW - holds[k];
                holds[k] += g.grant((k as u32, 0), want, holds[k]);
            }
            assert!(g.outstanding() <= g.budget() + CONNS as u32);
            assert_eq!(g.outstanding(), holds.iter().sum::<u32>());
            assert!(
                holds.iter().all(|&h| h > 0),
                "a peer was left without a grant"
            );
        }
        assert!(sent.iter().all(|&s| s > 1000), "starved: {sent:?}");
    }
}
