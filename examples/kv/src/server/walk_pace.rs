//! How a snapshot walk (BGSAVE, a full sync) shares its shard with the requests it serves.
//!
//! The walk runs on the shard itself, in holds: while a hold encodes keys, everything else on
//! the shard waits. A hold lasts at most [`HOLD_MAX`]; past its floor it ends as soon as
//! anything waits for the shard ([`corewire::runtime::work_waiting`]: a request's bytes, a
//! reply queued to send, a ready task, another shard's message), which it looks for after
//! every batch of keys (a couple of microseconds). A request that arrives during a hold
//! then waits about one batch, not the rest of a 100 µs step.
//!
//! The floor keeps the walk going under load: half the time the shard spent elsewhere since
//! the previous hold, at least [`HOLD_MIN`] and at most [`HOLD_MAX`]. An idle shard's walk
//! runs in [`HOLD_MAX`] holds; one serving a request now and then yields at once for each;
//! a saturated one still gives the walk about a third of its time.
//!
//! A hold that ended for waiting work is followed by a second turn of the loop when work
//! still waits after the first (on io_uring the replies the first turn produced are
//! submitted only at the end of the loop's pass, after the tasks it runs): the replies leave
//! before the next hold. At most one such turn per hold, so the walk still moves.

use std::time::{Duration, Instant};

use corewire::runtime::{work_waiting, yield_now};

/// The longest a hold keeps its shard.
pub(crate) const HOLD_MAX: Duration = Duration::from_micros(100);
/// The shortest floor: below it a hold does not look for waiting work.
const HOLD_MIN: Duration = Duration::from_micros(10);
/// Histogram buckets: one per microsecond, the last for everything longer.
const BUCKETS: usize = 256;

/// A walk's pacing across its holds (one per step; a step is a slice of the walk).
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// When the previous hold ended.
    last_end: Option<Instant>,
    /// The previous hold ended because work waited.
    ended_for_work: bool,
    pub(crate) stats: HoldStats,
}

/// One hold in progress.
#[derive(Debug)]
pub(crate) struct Hold {
    started: Instant,
    floor: Duration,
    /// The last look that found nothing waiting (or the hold's start).
    looked: Instant,
    /// How long the work found waiting may have waited behind this hold, at most.
    waited: Option<Duration>,
}

impl Pace {
    /// Begins a hold: the caller encodes a batch, then asks [`Hold::go_on`].
    pub(crate) fn begin(&self) -> Hold {
        let started = Instant::now();
        let elsewhere = self
            .last_end
            .map_or(Duration::ZERO, |end| started.saturating_duration_since(end));
        Hold {
            started,
            floor: floor_after(elsewhere),
            looked: started,
            waited: None,
        }
    }

    /// Ends `hold` (whatever ended it) and counts it.
    pub(crate) fn end(&mut self, mut hold: Hold) {
        let now = Instant::now();
        if hold.waited.is_none() && work_waiting() {
            hold.waited = Some(now.saturating_duration_since(hold.looked));
        }
        self.stats
            .held
            .record(now.saturating_duration_since(hold.started));
        if let Some(waited) = hold.waited {
            self.stats.waited.record(waited);
        }
        self.ended_for_work = hold.waited.is_some();
        self.last_end = Some(now);
    }

    /// Between two holds: the rest of the shard runs (see the module's doc).
    pub(crate) async fn pause(&mut self) {
        yield_now().await;
        if self.ended_for_work && work_waiting() {
            yield_now().await;
        }
    }
}

/// A hold's floor when the shard spent `elsewhere` on other work since the previous hold.
fn floor_after(elsewhere: Duration) -> Duration {
    (elsewhere / 2).clamp(HOLD_MIN, HOLD_MAX)
}

impl Hold {
    /// After a batch: whether the hold goes on (false past [`HOLD_MAX`], or past its floor
    /// with work waiting).
    pub(crate) fn go_on(&mut self) -> bool {
        let now = Instant::now();
        let held = now.saturating_duration_since(self.started);
        if held >= HOLD_MAX {
            return false;
        }
        if held < self.floor {
            return true;
        }
        if work_waiting() {
            self.waited = Some(now.saturating_duration_since(self.looked));
            return false;
        }
        self.looked = now;
        true
    }
}

/// A walk's holds: how long each kept the shard, and how long the work found waiting at
/// its end may have waited behind it (since the last look that found nothing).
#[derive(Debug, Default, Clone)]
pub(crate) struct HoldStats {
    pub(crate) held: Histogram,
    pub(crate) waited: Histogram,
}

/// A walk's holds in a few figures (INFO persistence's `rdb_last_save_walk`), in
/// microseconds: how long the holds kept the shard, and how long work found waiting at a
/// hold's end may have waited behind it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkFigures {
    pub holds: u64,
    pub hold_p99_us: u64,
    pub hold_max_us: u64,
    pub waits: u64,
    pub wait_p50_us: u64,
    pub wait_p99_us: u64,
    pub wait_max_us: u64,
}

impl HoldStats {
    pub(crate) fn figures(&self) -> WalkFigures {
        WalkFigures {
            holds: self.held.count,
            hold_p99_us: self.held.quantile_us(0.99),
            hold_max_us: self.held.max_us(),
            waits: self.waited.count,
            wait_p50_us: self.waited.quantile_us(0.5),
            wait_p99_us: self.waited.quantile_us(0.99),
            wait_max_us: self.waited.max_us(),
        }
    }

    pub(crate) fn merge(&mut self, other: &HoldStats) {
        self.held.merge(&other.held);
        self.waited.merge(&other.waited);
    }
}

/// Durations to the microsecond (up to [`BUCKETS`] µs; the maximum is exact).
#[derive(Debug, Clone)]
pub(crate) struct Histogram {
    counts: Box<[u32; BUCKETS]>,
    pub(crate) count: u64,
    pub(crate) total: Duration,
    pub(crate) max: Duration,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            count: 0,
            total: Duration::ZERO,
            max: Duration::ZERO,
        }
    }
}

impl Histogram {
    pub(crate) fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as usize).min(BUCKETS - 1);
        self.counts[us] = self.counts[us].saturating_add(1);
        self.count += 1;
        self.total += d;
        self.max = self.max.max(d);
    }

    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine = mine.saturating_add(*theirs);
        }
        self.count += other.count;
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    /// The longest, in microseconds rounded up.
    pub(crate) fn max_us(&self) -> u64 {
        self.max.as_nanos().div_ceil(1000) as u64
    }

    /// The `q` quantile (0..=1) in microseconds, rounded up to its bucket's end (and no
    /// more than [`Self::max_us`]); past the last bucket, the maximum.
    pub(crate) fn quantile_us(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let want = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count);
        let mut seen = 0u64;
        for (us, &n) in self.counts.iter().enumerate() {
            seen += u64::from(n);
            if seen >= want {
                return if us == BUCKETS - 1 {
                    self.max_us()
                } else {
                    (us as u64 + 1).min(self.max_us())
                };
            }
        }
        self.max_us()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_round_up_to_the_microsecond_and_merge() {
        let mut a = Histogram::default();
        for us in 0..99 {
            a.record(Duration::from_nanos(us * 1000 + 300));
        }
        let mut b = Histogram::default();
        b.record(Duration::from_millis(3));
        a.merge(&b);
        assert_eq!(a.count, 100);
        assert_eq!(a.quantile_us(0.5), 50);
        assert_eq!(a.quantile_us(0.99), 99);
        // The slowest is past the buckets: the maximum stands for it.
        assert_eq!(a.quantile_us(1.0), 3000);
        assert_eq!(a.max, Duration::from_millis(3));
        assert_eq!(Histogram::default().quantile_us(0.99), 0);
    }

    #[test]
    fn the_floor_is_half_the_time_spent_elsewhere_within_bounds() {
        assert_eq!(
            Pace::default().begin().floor,
            HOLD_MIN,
            "a step's first hold"
        );
        assert_eq!(floor_after(Duration::ZERO), HOLD_MIN);
        assert_eq!(floor_after(HOLD_MAX / 2), HOLD_MAX / 4);
        assert_eq!(floor_after(Duration::from_secs(1)), HOLD_MAX);
    }
}
