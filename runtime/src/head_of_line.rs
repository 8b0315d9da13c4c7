//! Head-of-line counts: for each request, how many messages its shard handed up (from any
//! connection, the request itself excluded) between the moment the request's bytes arrived
//! (the completion that brought them was reaped and woke its connection) and the moment its
//! reply was queued. It counts work, not time, so it does not depend on CPU scheduling noise:
//! with a fairness budget of B messages and H busy connections it stays near B × H; with an
//! unlimited budget it grows with the busy connections' backlog.
//!
//! A server records one [`HeadOfLine`] per listener (see
//! [`ListenerHandle::head_of_line`](crate::accept::ListenerHandle::head_of_line)); the stamps
//! come from [`crate::coop::message_clock`] and [`crate::RoundBudget::arrived_at`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Exact below this; above it, 8 buckets per power of two (within 12.5%).
const LINEAR: u64 = 16;
const SUB_BITS: u32 = 3;
const BUCKETS: usize = LINEAR as usize + (64 - 4) * (1 << SUB_BITS);

/// A histogram of head-of-line counts, shared by a listener's connections on every shard.
pub struct HeadOfLine {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for HeadOfLine {
    fn default() -> Self {
        HeadOfLine {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

impl HeadOfLine {
    /// An empty histogram.
    pub fn new() -> HeadOfLine {
        HeadOfLine::default()
    }

    /// Count one request that waited behind `messages` others.
    pub fn record(&self, messages: u64) {
        self.buckets[bucket(messages)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(messages, Ordering::Relaxed);
        self.max.fetch_max(messages, Ordering::Relaxed);
    }

    /// Record a request whose bytes arrived at message clock `arrived_at` and whose reply is
    /// being queued now (the request itself, already counted by the clock, excluded).
    pub fn record_since(&self, arrived_at: u64) {
        let now = crate::coop::message_clock();
        self.record(now.saturating_sub(arrived_at).saturating_sub(1));
    }

    /// The counts recorded so far.
    pub fn snapshot(&self) -> HeadOfLineSnapshot {
        HeadOfLineSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
        }
    }
}

/// A point-in-time copy of a [`HeadOfLine`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeadOfLineSnapshot {
    buckets: Vec<u64>,
    /// Requests recorded.
    pub count: u64,
    /// Their head-of-line counts summed.
    pub sum: u64,
    /// The largest head-of-line count recorded.
    pub max: u64,
}

impl HeadOfLineSnapshot {
    /// The count at quantile `q` (0..=1): exact below 16, else the top of its bucket (at most
    /// 12.5% over), never above [`Self::max`]. 0 when nothing was recorded.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_top(i).min(self.max);
            }
        }
        self.max
    }

    /// The mean head-of-line count (0 with no requests).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= 4
    let sub = (v >> (exp - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    LINEAR as usize + (exp as usize - 4) * (1 << SUB_BITS) + sub as usize
}

/// The largest value that falls in bucket `i`.
fn bucket_top(i: usize) -> u64 {
    if i < LINEAR as usize {
        return i as u64;
    }
    let j = i - LINEAR as usize;
    let exp = (j >> SUB_BITS) as u32 + 4;
    let sub = (j & ((1 << SUB_BITS) - 1)) as u64;
    let width = 1u64 << (exp - SUB_BITS);
    ((1 << SUB_BITS) + sub) * width + (width - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        for v in [
            0,
            1,
            15,
            16,
            17,
            31,
            32,
            100,
            1000,
            123_456,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let b = bucket(v);
            assert!(b < BUCKETS, "{v} -> {b}");
            assert!(
                bucket_top(b) >= v,
                "{v} above its bucket's top {}",
                bucket_top(b)
            );
            if b > 0 {
                assert!(bucket_top(b - 1) < v, "{v} fits the bucket below");
            }
        }
    }

    #[test]
    fn quantiles_are_exact_below_16_and_within_an_eighth_above() {
        let h = HeadOfLine::new();
        for v in 0..10 {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!((s.count, s.max, s.sum), (10, 9, 45));
        assert_eq!(s.quantile(0.5), 4);
        assert_eq!(s.quantile(1.0), 9);

        let h = HeadOfLine::new();
        h.record(1000);
        let q = h.snapshot().quantile(0.99);
        assert_eq!(q, 1000, "clamped to the max seen");
        h.record(3000);
        let q = h.snapshot().quantile(0.5);
        assert!((1000..=1125).contains(&q), "{q}");
    }

    #[test]
    fn empty_is_zero() {
        let s = HeadOfLine::new().snapshot();
        assert_eq!((s.quantile(0.99), s.mean()), (0, 0.0));
    }
}
