//! Flow policy of one RDMA connection, sans-I/O: when a data message may be posted (a credit
//! and a send slot), what its immediate data carries (the grants we owe the peer), when a pure
//! acknowledgement is due, and when received messages are granted back to the peer or held
//! back because our reader is behind. the connection (`conn/`) does the posting and completion dispatch and
//! asks this state machine what to do; the rules are tested here without a device.
//!
//! Grants are receive buffers the peer may fill. A data message uses one; a pure ack (no
//! payload, sent only when enough grants are owed and nothing else will carry them) uses none
//! and lands in one of the [`RESERVED_FOR_ACKS`] extra buffers, which never become grants: so
//! the peer's credits never exceed the buffers we keep for it.

use super::credits::Credits;
pub use super::credits::RESERVED_FOR_ACKS;

/// What a receive completion carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incoming {
    /// Payload bytes: used one of our grants.
    Data,
    /// A pure acknowledgement: only returned credits.
    Ack,
}

#[derive(Debug, Clone)]
pub struct Flow {
    credits: Credits,
    /// Sends posted and not completed (data and acks).
    sends_outstanding: u32,
    /// The send queue's depth.
    max_sends: u32,
    /// Data messages received whose grant is held back (the reader is behind, or, with a
    /// shared receive queue, the shard's budget is spent).
    withheld: u32,
    /// Grants the peer holds or has in flight.
    peer_holds: u32,
}

impl Flow {
    /// `peer_window`: data messages the peer accepts before returning credits (0 until it
    /// is known); `granted`: the grants we gave the peer in our handshake; `max_sends`: the
    /// send queue's depth.
    pub fn new(peer_window: u32, granted: u32, max_sends: u32) -> Flow {
        Flow {
            credits: Credits::new(peer_window, granted),
            sends_outstanding: 0,
            max_sends,
            withheld: 0,
            peer_holds: granted,
        }
    }

    /// The peer's window, once known (a client learns it when the server accepts). Credits
    /// already returned by the peer stay.
    pub fn set_peer_window(&mut self, peer_window: u32) {
        self.credits.returned(peer_window);
    }

    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn credits(&self) -> u32 {
        self.credits.available()
    }

    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn owed(&self) -> u32 {
        self.credits.owed()
    }

    pub fn sends_outstanding(&self) -> u32 {
        self.sends_outstanding
    }

    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn withheld(&self) -> u32 {
        self.withheld
    }

    /// Grants the peer holds or has in flight (it may send that many data messages).
    pub fn peer_holds(&self) -> u32 {
        self.peer_holds
    }

    /// A data message may be posted now: a credit, and a send slot beyond the one kept for a
    /// credit ack (so grants can always flow back, even with the send queue full of data).
    pub fn can_send_data(&self) -> bool {
        self.credits.available() > 0 && self.sends_outstanding + 1 < self.max_sends
    }

    /// Posting a data message (after [`can_send_data`](Self::can_send_data)): uses a credit
    /// and a slot; returns the grants its immediate data carries.
    pub fn post_data(&mut self) -> u32 {
        debug_assert!(self.can_send_data());
        self.credits.take();
        self.sends_outstanding += 1;
        self.credits.take_owed()
    }

    /// Posting a pure ack (after [`ack_due`](Self::ack_due)): returns the grants it carries.
    pub fn post_ack(&mut self) -> u32 {
        self.sends_outstanding += 1;
        self.credits.take_owed()
    }

    /// The post just made failed: undo it (the grants are owed again, the credit is back).
    pub fn post_failed(&mut self, carried: u32, was_data: bool) {
        self.sends_outstanding = self.sends_outstanding.saturating_sub(1);
        self.credits.reposted(carried);
        if was_data {
            self.credits.returned(1);
        }
    }

    /// A send (data or ack) completed, successfully or flushed.
    pub fn send_completed(&mut self) {
        self.sends_outstanding = self.sends_outstanding.saturating_sub(1);
    }

    /// Whether to post a pure ack now: enough grants owed, no data waiting to carry them,
    /// and a send slot free.
    pub fn ack_due(&self, data_waiting: bool) -> bool {
        self.credits.ack_due() && !data_waiting && self.sends_outstanding < self.max_sends
    }

    /// A message arrived carrying `returned` credits. Data used one of our grants: it is
    /// withheld until [`regrant`](Self::regrant) gives it back.
    pub fn received(&mut self, kind: Incoming, returned: u32) {
        self.credits.returned(returned);
        if kind == Incoming::Data {
            self.withheld += 1;
            self.peer_holds = self.peer_holds.saturating_sub(1);
        }
    }

    /// Give `n` withheld grants back to the peer (their buffers are posted again); they go
    /// out in the immediate data of the next send or ack.
    pub fn regrant(&mut self, n: u32) {
        let n = n.min(self.withheld);
        self.grant(n);
    }

    /// Give the peer `n` grants, the withheld ones first. With a shared receive queue grants
    /// are not tied to buffers: a connection tops its peer up to its window as the shard's
    /// budget allows.
    pub fn grant(&mut self, n: u32) {
        self.withheld -= n.min(self.withheld);
        self.peer_holds += n;
        self.credits.reposted(n);
    }

    /// With a shared receive queue: how many grants to ask the shard's budget for, to top
    /// the peer up to `window` (none while the reader is behind).
    pub fn wanted(&self, window: u32, reader_behind: bool) -> u32 {
        if reader_behind {
            0
        } else {
            window.saturating_sub(self.peer_holds)
        }
    }

    /// Whether a received data message's grant is held back: the reader is behind (more than
    /// `max_buffered` bytes wait for it) and is not in the middle of waiting for a frame
    /// (holding then would stop the very bytes it waits for; frame limits bound that case).
    pub fn hold_back(buffered: usize, max_buffered: usize, reader_waiting: bool) -> bool {
        !reader_waiting && buffered > max_buffered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_message_needs_a_credit_and_leaves_a_slot_for_an_ack() {
        let mut f = Flow::new(2, 8, 3);
        assert!(f.can_send_data());
        f.post_data();
        assert!(f.can_send_data());
        f.post_data();
        assert!(!f.can_send_data(), "out of credits");
        f.received(Incoming::Ack, 5);
        assert!(!f.can_send_data(), "the last slot is kept for an ack");
        f.send_completed();
        assert!(f.can_send_data());
    }

    #[test]
    fn grants_travel_once_in_the_next_send() {
        let mut f = Flow::new(8, 8, 16);
        f.received(Incoming::Data, 0);
        f.received(Incoming::Data, 0);
        assert_eq!(f.withheld(), 2);
        f.regrant(2);
        assert_eq!(f.post_data(), 2);
        assert_eq!(f.post_data(), 0);
    }

    #[test]
    fn acks_are_due_only_when_nothing_else_carries_the_grants() {
        let mut f = Flow::new(8, 8, 16);
        for _ in 0..4 {
            f.received(Incoming::Data, 0);
        }
        f.regrant(3);
        assert!(!f.ack_due(false), "below half a window");
        f.regrant(1);
        assert!(f.ack_due(false));
        assert!(!f.ack_due(true), "queued data will carry them");
        assert_eq!(f.post_ack(), 4);
        assert!(!f.ack_due(false));
    }

    #[test]
    fn an_ack_returns_credits_but_earns_the_peer_none() {
        let mut f = Flow::new(8, 8, 16);
        f.received(Incoming::Ack, 3);
        assert_eq!(f.withheld(), 0);
        f.regrant(5);
        assert_eq!(f.owed(), 0, "nothing was withheld, so nothing is granted");
        assert_eq!(f.credits(), 11);
    }

    #[test]
    fn a_failed_post_is_undone() {
        let mut f = Flow::new(1, 8, 16);
        f.received(Incoming::Data, 0);
        f.regrant(1);
        let carried = f.post_data();
        assert_eq!((carried, f.credits()), (1, 0));
        f.post_failed(carried, true);
        assert_eq!((f.owed(), f.credits(), f.sends_outstanding()), (1, 1, 0));
    }

    #[test]
    fn the_client_learns_the_window_without_losing_early_credits() {
        let mut f = Flow::new(0, 8, 16);
        assert!(!f.can_send_data());
        f.received(Incoming::Ack, 2);
        f.set_peer_window(8);
        assert_eq!(f.credits(), 10);
    }

    #[test]
    fn a_shared_queue_tops_the_peer_up_to_its_window() {
        let mut f = Flow::new(8, 2, 16);
        assert_eq!(f.wanted(8, false), 6);
        assert_eq!(f.wanted(8, true), 0, "no grants while the reader is behind");
        f.received(Incoming::Data, 0);
        f.received(Incoming::Data, 0);
        assert_eq!((f.peer_holds(), f.withheld()), (0, 2));
        f.grant(5);
        assert_eq!((f.peer_holds(), f.withheld(), f.owed()), (5, 0, 5));
        assert_eq!(f.wanted(8, false), 3);
    }

    #[test]
    fn hold_back_only_when_behind_and_not_waiting() {
        assert!(!Flow::hold_back(10, 100, false));
        assert!(Flow::hold_back(101, 100, false));
        assert!(!Flow::hold_back(1 << 30, 100, true));
    }

    /// Two peers over a lossless, in-order wire, with every step in random order: messages
    /// take buffers when they *arrive*, the receiver processes completions later, its reader
    /// falls behind (grants held back) and catches up, sends complete late. The receiver's
    /// posted buffers never run out (no overrun), every message arrives (no deadlock), and a
    /// stream of pure acks never inflates the peer's credits beyond the buffers kept for it.
    #[test]
    fn simulated_peers_never_overrun_inflate_or_deadlock() {
        use std::collections::VecDeque;
        const W: u32 = 8;
        const MAX_SENDS: u32 = W + RESERVED_FOR_ACKS + 4;
        #[derive(Clone, Copy)]
        struct Msg {
            ack: bool,
            carried: u32,
        }
        struct Side {
            flow: Flow,
            /// Buffers posted and empty.
            posted: u32,
            /// Arrived, completion not processed yet.
            arrived: VecDeque<Msg>,
            /// Processed data messages the reader has not consumed yet (holding their buffer
            /// while withheld).
            unread: u32,
            held_buffers: u32,
            to_send: u32,
            received: u32,
            /// Our sends not yet completed.
            in_flight: u32,
        }
        let mut wires: [VecDeque<Msg>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut sides = [0, 1].map(|i| Side {
            flow: Flow::new(W, W, MAX_SENDS),
            posted: W + RESERVED_FOR_ACKS,
            arrived: VecDeque::new(),
            unread: 0,
            held_buffers: 0,
            to_send: if i == 0 { 3000 } else { 1000 },
            received: 0,
            in_flight: 0,
        });
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5_000_000 {
            let i = (rand() % 2) as usize;
            let j = 1 - i;
            match rand() % 6 {
                // i posts data, or an ack if one is due.
                0 => {
                    let s = &mut sides[i];
                    if s.to_send > 0 && s.flow.can_send_data() {
                        s.to_send -= 1;
                        s.in_flight += 1;
                        let carried = s.flow.post_data();
                        wires[i].push_back(Msg {
                            ack: false,
                            carried,
                        });
                    } else if s.flow.ack_due(s.to_send > 0 && s.flow.can_send_data()) {
                        s.in_flight += 1;
                        let carried = s.flow.post_ack();
                        wires[i].push_back(Msg { ack: true, carried });
                    }
                }
                // A message on i's wire arrives at j: it takes a posted buffer now, and the
                // sender's send completes.
                1 => {
                    if let Some(m) = wires[i].pop_front() {
                        assert!(sides[j].posted > 0, "receiver overrun");
                        sides[j].posted -= 1;
                        sides[j].arrived.push_back(m);
                        sides[i].in_flight -= 1;
                        sides[i].flow.send_completed();
                    }
                }
                // j processes one completion.
                2 | 3 => {
                    let s = &mut sides[j];
                    if let Some(m) = s.arrived.pop_front() {
                        if m.ack {
                            s.flow.received(Incoming::Ack, m.carried);
                            s.posted += 1; // reposted at once, earns no grant
                        } else {
                            s.flow.received(Incoming::Data, m.carried);
                            s.received += 1;
                            s.unread += 1;
                            if Flow::hold_back(s.unread as usize, 4, false) {
                                s.held_buffers += 1;
                            } else {
                                s.posted += 1;
                                s.flow.regrant(1);
                            }
                        }
                    }
                }
                // j's reader consumes what is unread and releases held buffers.
                4 => {
                    let s = &mut sides[j];
                    s.unread = 0;
                    s.posted += s.held_buffers;
                    s.flow.regrant(s.held_buffers);
                    s.held_buffers = 0;
                }
                _ => {}
            }
            for s in &sides {
                assert!(
                    s.flow.credits() <= W,
                    "credits inflated past the peer's window: {}",
                    s.flow.credits()
                );
            }
            if sides.iter().all(|s| s.to_send == 0 && s.arrived.is_empty())
                && wires.iter().all(VecDeque::is_empty)
            {
                break;
            }
        }
        assert_eq!(sides[1].received, 3000, "deadlock: data stuck");
        assert_eq!(sides[0].received, 1000, "deadlock: data stuck");
    }
}
