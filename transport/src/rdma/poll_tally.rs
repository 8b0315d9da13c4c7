//! How many receive completions each connection got in one pass of the CQ poller (one
//! `Poller::poll`: a batch in polling mode, a whole drain after an event), so the shard can
//! report the most one connection consumed per pass (`RdmaStats::max_conn_recvs_per_poll`).
//! The poller hands received bytes to the connection's buffer; the fairness budget then
//! bounds how many frames its reader hands up per round (`RdmaStats::max_round_frames`).
//! brpc bounds the first figure (32 CQEs per wake-up); the pair shows both bounds at once.

use super::grants::ConnKey;

#[derive(Debug, Default)]
pub(crate) struct PollTally {
    /// (connection, receives this pass); a pass sees few connections, so a linear scan
    /// beats hashing.
    seen: Vec<(ConnKey, u32)>,
}

impl PollTally {
    /// Start a new pass.
    pub fn clear(&mut self) {
        self.seen.clear();
    }

    /// One more receive completion for `conn` in this pass.
    pub fn add(&mut self, conn: ConnKey) {
        match self.seen.iter_mut().find(|(k, _)| *k == conn) {
            Some((_, n)) => *n += 1,
            None => self.seen.push((conn, 1)),
        }
    }

    /// The most receives one connection got in this pass (0 when none).
    pub fn max(&self) -> u32 {
        self.seen.iter().map(|&(_, n)| n).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_busiest_connection_of_the_pass() {
        let mut t = PollTally::default();
        assert_eq!(t.max(), 0);
        for key in [(1, 0), (2, 0), (1, 0), (1, 0), (1, 1)] {
            t.add(key);
        }
        assert_eq!(t.max(), 3, "slot 1 generation 0 had three");
        t.clear();
        t.add((2, 0));
        assert_eq!(t.max(), 1, "a new pass starts from zero");
    }
}
