//! Latency recording with an HDR histogram (nanosecond values, 3 significant digits) and the
//! summary the reports print (microseconds).

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest value recorded without saturating: one minute.
const MAX_NS: u64 = 60_000_000_000;

/// Latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        // Bounds are constants known to be valid for hdrhistogram (low >= 1, high >= 2 * low,
        // sigfig <= 5), so this cannot fail.
        let hist = Histogram::new_with_bounds(1, MAX_NS, 3)
            .unwrap_or_else(|_| Histogram::new(3).expect("3 significant digits is valid"));
        LatencyHistogram { hist }
    }

    /// Records one latency; values over a minute are clamped.
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }

    /// Adds all of `other`'s samples.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Both histograms were built with the same bounds, so every value fits.
        let _ = self.hist.add(&other.hist);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Percentiles, mean and max in microseconds (zeros when empty).
    pub fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| round2(ns as f64 / 1000.0);
        LatencySummary {
            p50_us: us(self.hist.value_at_quantile(0.50)),
            p90_us: us(self.hist.value_at_quantile(0.90)),
            p99_us: us(self.hist.value_at_quantile(0.99)),
            p999_us: us(self.hist.value_at_quantile(0.999)),
            avg_us: round2(self.hist.mean() / 1000.0),
            max_us: us(self.hist.max()),
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub avg_us: f64,
    pub max_us: f64,
}

/// Rounds to 2 decimals: reports stay readable and nothing real is below 10 ns resolution.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_in_microseconds() {
        let mut h = LatencyHistogram::new();
        for i in 1..=1000u64 {
            h.record(i * 1000);
        }
        let mut other = LatencyHistogram::new();
        other.record(2_000_000);
        h.merge(&other);
        let s = h.summary();
        assert_eq!(h.count(), 1001);
        // 3 significant digits: within 0.1% of the exact order statistics.
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.002;
        assert!(close(s.p50_us, 501.0), "{s:?}");
        assert!(close(s.p99_us, 991.0), "{s:?}");
        assert!(close(s.max_us, 2000.0), "{s:?}");
        assert_eq!(LatencyHistogram::new().summary(), LatencySummary::default());
    }
}
