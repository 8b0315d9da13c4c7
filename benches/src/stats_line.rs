//! The per-shard statistics line that echo servers print on SIGTERM:
//! `stats shard=<i> accepted=<n> open=<n> budget_exhausted=<n> [placed=<n>]`, and the
//! accept-balance figure derived from it.

use std::sync::atomic::{AtomicU64, Ordering};

/// One shard's counters as printed at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShardLine {
    pub shard: usize,
    pub accepted: u64,
    pub open: u64,
    pub budget_exhausted: u64,
    /// Connections placed on (served by) this shard, when the server says: in handoff mode
    /// corewire's `accepted` counts the acceptor's own listener, not where connections went.
    pub placed: Option<u64>,
}

impl ShardLine {
    /// The line a server prints.
    pub fn line(&self) -> String {
        let mut line = format!(
            "stats shard={} accepted={} open={} budget_exhausted={}",
            self.shard, self.accepted, self.open, self.budget_exhausted
        );
        if let Some(placed) = self.placed {
            line.push_str(&format!(" placed={placed}"));
        }
        line
    }

    /// Connections this shard served: `placed` when reported, else `accepted`.
    pub fn served(&self) -> u64 {
        self.placed.unwrap_or(self.accepted)
    }

    /// Parses a stats line; `None` for any other line. Unknown `key=value` pairs are ignored so
    /// servers may print more.
    pub fn parse(line: &str) -> Option<ShardLine> {
        let rest = line.trim().strip_prefix("stats ")?;
        let mut stats = ShardLine::default();
        let mut saw_shard = false;
        for pair in rest.split_whitespace() {
            let (key, value) = pair.split_once('=')?;
            match key {
                "shard" => {
                    stats.shard = value.parse().ok()?;
                    saw_shard = true;
                }
                "accepted" => stats.accepted = value.parse().ok()?,
                "open" => stats.open = value.parse().ok()?,
                "budget_exhausted" => stats.budget_exhausted = value.parse().ok()?,
                "placed" => stats.placed = Some(value.parse().ok()?),
                _ => {}
            }
        }
        saw_shard.then_some(stats)
    }
}

/// Largest deviation of any shard's accepted count from the mean, in percent of the mean.
/// `None` with no shards or no accepts.
pub fn max_deviation_pct(accepted: &[u64]) -> Option<f64> {
    if accepted.is_empty() {
        return None;
    }
    let mean = accepted.iter().sum::<u64>() as f64 / accepted.len() as f64;
    if mean == 0.0 {
        return None;
    }
    accepted
        .iter()
        .map(|&a| (a as f64 - mean).abs() / mean * 100.0)
        .reduce(f64::max)
}

/// Live counters a peer server keeps per shard (or per listener).
#[derive(Debug, Default)]
pub struct ShardCounters {
    accepted: AtomicU64,
    open: AtomicU64,
}

impl ShardCounters {
    /// Counts a newly accepted connection.
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a closed connection.
    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Snapshot for printing. The peers have no budgets, so `budget_exhausted` is always 0.
    pub fn snapshot(&self, shard: usize) -> ShardLine {
        ShardLine {
            shard,
            accepted: self.accepted.load(Ordering::Relaxed),
            open: self.open.load(Ordering::Relaxed),
            budget_exhausted: 0,
            placed: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trips_and_other_lines_are_ignored() {
        let s = ShardLine {
            shard: 1,
            accepted: 10,
            open: 2,
            budget_exhausted: 3,
            placed: None,
        };
        assert_eq!(
            s.line(),
            "stats shard=1 accepted=10 open=2 budget_exhausted=3"
        );
        assert_eq!(ShardLine::parse(&s.line()), Some(s));
        assert_eq!(
            ShardLine::parse("stats shard=0 accepted=5 extra=9").map(|s| s.accepted),
            Some(5)
        );
        let handoff = ShardLine::parse(
            "stats shard=0 accepted=40 open=0 budget_exhausted=0 handoffs_in=0 placed=20",
        )
        .unwrap();
        assert_eq!((handoff.accepted, handoff.served()), (40, 20));
        assert_eq!(ShardLine::parse(&handoff.line()), Some(handoff));
        assert_eq!(s.served(), 10);
        assert_eq!(ShardLine::parse("listening on 127.0.0.1:1"), None);
        assert_eq!(ShardLine::parse("stats accepted=5"), None);
        assert_eq!(ShardLine::parse("stats shard=x"), None);
    }

    #[test]
    fn deviation_is_relative_to_the_mean() {
        assert_eq!(max_deviation_pct(&[50, 50]), Some(0.0));
        assert_eq!(max_deviation_pct(&[75, 25]), Some(50.0));
        assert_eq!(max_deviation_pct(&[100, 0, 0, 0]), Some(300.0));
        assert_eq!(max_deviation_pct(&[]), None);
        assert_eq!(max_deviation_pct(&[0, 0]), None);
    }

    #[test]
    fn counters_track_open_connections() {
        let c = ShardCounters::default();
        c.accepted();
        c.accepted();
        c.closed();
        assert_eq!(
            c.snapshot(3),
            ShardLine {
                shard: 3,
                accepted: 2,
                open: 1,
                budget_exhausted: 0,
                placed: None,
            }
        );
    }
}
