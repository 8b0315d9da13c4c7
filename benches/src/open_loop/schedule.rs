//! The fixed-rate send schedule and the latency accounting of one connection, without I/O.
//!
//! Request `i` of a connection is due at `start + phase + i × interval`. The connection sends
//! a due request only while it has fewer than `max_in_flight` outstanding; a request sent late
//! (the server was slow, or its window was full) keeps its due time, and its latency is
//! counted from that time. Replies arrive in order on one connection, so the outstanding due
//! times form a FIFO.

use std::collections::VecDeque;

use crate::latency::LatencyHistogram;

/// When one connection's requests are due.
#[derive(Debug, Clone)]
pub struct Schedule {
    first_ns: u64,
    /// Nanoseconds between requests; 0: closed loop (every request due at once, its due
    /// time being when it is sent).
    interval_ns: f64,
    next: u64,
}

impl Schedule {
    /// `rate` requests per second starting at `start_ns + phase_ns`; `rate` 0 or less is the
    /// closed loop.
    pub fn new(start_ns: u64, phase_ns: u64, rate: f64) -> Schedule {
        Schedule {
            first_ns: start_ns + phase_ns,
            interval_ns: if rate > 0.0 { 1e9 / rate } else { 0.0 },
            next: 0,
        }
    }

    /// Whether this is a closed loop.
    pub fn closed(&self) -> bool {
        self.interval_ns == 0.0
    }

    /// When the next request is due (in the closed loop: `now_ns`).
    pub fn next_due(&self, now_ns: u64) -> u64 {
        if self.closed() {
            return now_ns;
        }
        self.first_ns + (self.next as f64 * self.interval_ns) as u64
    }

    /// Takes the next request if it is due at `now_ns`, returning its due time.
    pub fn take_due(&mut self, now_ns: u64) -> Option<u64> {
        let due = self.next_due(now_ns);
        (due <= now_ns).then(|| {
            self.next += 1;
            due
        })
    }
}

/// Outstanding requests and the latencies of one connection's replies.
#[derive(Debug)]
pub struct Account {
    schedule: Schedule,
    max_in_flight: usize,
    in_flight: VecDeque<u64>,
    /// Requests due in `[window_start, window_end)` are the measured ones.
    window_start: u64,
    window_end: u64,
    pub latency: LatencyHistogram,
    /// Measured requests answered.
    pub answered: u64,
    /// Measured requests not answered by [`Account::finish`], charged up to then.
    pub unanswered: u64,
}

impl Account {
    pub fn new(schedule: Schedule, max_in_flight: usize, window: (u64, u64)) -> Account {
        let max_in_flight = max_in_flight.max(1);
        Account {
            schedule,
            max_in_flight,
            in_flight: VecDeque::with_capacity(max_in_flight),
            window_start: window.0,
            window_end: window.1,
            latency: LatencyHistogram::new(),
            answered: 0,
            unanswered: 0,
        }
    }

    /// How many requests to send at `now_ns` (each one's due time is queued): those due, up
    /// to the in-flight bound, and none due at or after the window's end.
    pub fn send_due(&mut self, now_ns: u64) -> usize {
        let mut n = 0;
        while self.in_flight.len() < self.max_in_flight {
            if self.schedule.next_due(now_ns) >= self.window_end {
                break;
            }
            match self.schedule.take_due(now_ns) {
                Some(due) => {
                    self.in_flight.push_back(due);
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// When the next request is due, if the window is open for it (`None`: the schedule
    /// is done, or the connection waits for replies first).
    pub fn next_due(&self, now_ns: u64) -> Option<u64> {
        let due = self.schedule.next_due(now_ns);
        (self.in_flight.len() < self.max_in_flight && due < self.window_end).then_some(due)
    }

    /// `n` replies arrived at `now_ns`. More replies than requests outstanding is a protocol
    /// error (returned as the surplus).
    pub fn replied(&mut self, n: u64, now_ns: u64) -> Result<(), u64> {
        for i in 0..n {
            let Some(due) = self.in_flight.pop_front() else {
                return Err(n - i);
            };
            if self.measured(due) {
                self.latency.record(now_ns.saturating_sub(due));
                self.answered += 1;
            }
        }
        Ok(())
    }

    /// Whether replies are still owed.
    pub fn waiting(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Ends the run at `now_ns`: measured requests still unanswered, or due but never sent,
    /// are charged `now_ns - due` (a lower bound of their latency), so a server that stops
    /// answering shows in the tail instead of vanishing from it.
    pub fn finish(&mut self, now_ns: u64) {
        let owed: Vec<u64> = self.in_flight.drain(..).collect();
        let mut unsent = Vec::new();
        if !self.schedule.closed() {
            while let Some(due) = self.schedule.take_due(now_ns.min(self.window_end - 1)) {
                unsent.push(due);
            }
        }
        for due in owed.into_iter().chain(unsent) {
            if self.measured(due) {
                self.latency.record(now_ns.saturating_sub(due));
                self.unanswered += 1;
            }
        }
    }

    fn measured(&self, due: u64) -> bool {
        (self.window_start..self.window_end).contains(&due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn requests_fall_due_at_the_rate_from_the_phase() {
        let mut s = Schedule::new(10 * MS, MS / 2, 1000.0);
        assert_eq!(s.take_due(10 * MS), None);
        assert_eq!(s.take_due(10 * MS + MS / 2), Some(10 * MS + MS / 2));
        assert_eq!(s.take_due(11 * MS), None);
        // Late: both overdue requests keep their own due times.
        assert_eq!(s.take_due(13 * MS), Some(11 * MS + MS / 2));
        assert_eq!(s.take_due(13 * MS), Some(12 * MS + MS / 2));
        assert_eq!(s.take_due(13 * MS), None);
        assert_eq!(s.next_due(13 * MS), 13 * MS + MS / 2);
    }

    #[test]
    fn a_stalled_reply_is_charged_from_the_intended_send_time() {
        // 1 request per ms, one in flight: request 0 is answered only at 10 ms, so requests
        // 1..9 could not be sent when due; each is charged from its due time, not from when
        // the connection finally sent it.
        let mut a = Account::new(Schedule::new(0, 0, 1000.0), 1, (0, 100 * MS));
        assert_eq!(a.send_due(0), 1);
        for t in 1..10 {
            assert_eq!(a.send_due(t * MS), 0, "the window is full");
        }
        a.replied(1, 10 * MS).unwrap();
        let mut latencies = vec![10 * MS];
        for due in 1..10 {
            assert_eq!(a.send_due(10 * MS), 1);
            a.replied(1, 10 * MS).unwrap();
            latencies.push((10 - due) * MS);
        }
        assert_eq!(a.answered, 10);
        let total: u64 = latencies.iter().sum();
        assert_eq!(total, 55 * MS);
        let s = a.latency.summary();
        assert!((s.max_us - 10_000.0).abs() < 10.0, "{s:?}");
        assert!((s.avg_us - 5_500.0).abs() < 10.0, "{s:?}");
        // A closed loop would have recorded ten 1 ms latencies... this one recorded the stall.
        assert!(s.p50_us >= 5_000.0, "{s:?}");
    }

    #[test]
    fn only_requests_due_inside_the_window_are_measured() {
        let mut a = Account::new(Schedule::new(0, 0, 1000.0), 8, (2 * MS, 4 * MS));
        // Due at 0, 1, 2, 3 ms; nothing at or after 4 ms is sent.
        assert_eq!(a.send_due(10 * MS), 4);
        assert_eq!(a.next_due(10 * MS), None);
        a.replied(4, 10 * MS).unwrap();
        assert_eq!(a.answered, 2);
        assert_eq!(a.latency.count(), 2);
        assert_eq!(a.replied(1, 10 * MS), Err(1), "a reply nobody asked for");
    }

    #[test]
    fn finishing_charges_owed_and_unsent_requests() {
        let mut a = Account::new(Schedule::new(0, 0, 1000.0), 2, (0, 10 * MS));
        assert_eq!(a.send_due(MS), 2);
        a.finish(20 * MS);
        // Two in flight (due 0 and 1 ms) and eight never sent (2..9 ms).
        assert_eq!(a.unanswered, 10);
        assert_eq!(a.answered, 0);
        assert!((a.latency.summary().max_us - 20_000.0).abs() < 20.0);
        assert!(!a.waiting());
    }

    #[test]
    fn the_closed_loop_keeps_its_window_full() {
        let mut a = Account::new(Schedule::new(0, 0, 0.0), 4, (0, 10 * MS));
        assert_eq!(a.send_due(MS), 4);
        assert_eq!(a.send_due(MS), 0);
        a.replied(3, 2 * MS).unwrap();
        assert_eq!(a.send_due(2 * MS), 3);
        assert!((a.latency.summary().p50_us - 1000.0).abs() < 1.0);
        a.finish(3 * MS);
        assert_eq!(a.unanswered, 4);
    }
}
