//! The stall detector: reports a task poll, a poller call or a cross-shard message that held
//! its shard longer than a threshold (default 10 ms, Seastar's "reactor stalled" notice). A
//! held shard serves nobody else: every connection, timer and poller on it waits.
//!
//! Cost when on: one clock read per task poll, poller call and inbox message (the end of one
//! measurement is the start of the next). Reports are counted (`stalls`, `stall_longest_us`
//! in [`ShardStats`]), logged at most once a second per shard with the
//! number left unlogged, and passed to the [`on_stall`](crate::RuntimeBuilder::on_stall)
//! hook if one is set.

use std::cell::Cell;
use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ShardId, ShardStats};

/// What held the shard.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StallSource {
    /// One poll of a task, spawned at this location.
    Task {
        /// Where `spawn_local` (or `spawn_on`, `submit_to`, `run_on`) was called.
        spawned_at: &'static Location<'static>,
    },
    /// One call of the named poller.
    Poller {
        /// Its [`Poller::name`](crate::Poller::name).
        name: String,
    },
    /// One cross-shard message (a closure another shard sent).
    Message,
}

impl fmt::Display for StallSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StallSource::Task { spawned_at } => write!(f, "task spawned at {spawned_at}"),
            StallSource::Poller { name } => write!(f, "poller `{name}`"),
            StallSource::Message => f.write_str("cross-shard message"),
        }
    }
}

/// One stall: what held shard `shard`, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StallReport {
    /// The shard that was held.
    pub shard: ShardId,
    /// What held it.
    pub source: StallSource,
    /// For how long (at least the threshold).
    pub duration: Duration,
}

/// Called on the stalled shard's thread for every stall (not rate-limited).
pub type StallHook = Arc<dyn Fn(&StallReport) + Send + Sync>;

/// Log at most one stall line per shard per this period.
const LOG_EVERY: Duration = Duration::from_secs(1);

pub(crate) struct StallDetector {
    threshold: Duration,
    hook: Option<StallHook>,
    /// When a line was last logged, and how many stalls went unlogged since.
    last_log: Cell<Option<Instant>>,
    unlogged: Cell<u64>,
}

impl StallDetector {
    pub(crate) fn new(threshold: Duration, hook: Option<StallHook>) -> StallDetector {
        StallDetector {
            threshold,
            hook,
            last_log: Cell::new(None),
            unlogged: Cell::new(0),
        }
    }

    /// Something ran from `start` to `end`; report it if that is over the threshold.
    #[inline]
    pub(crate) fn check(
        &self,
        shard: ShardId,
        stats: &ShardStats,
        start: Instant,
        end: Instant,
        source: impl FnOnce() -> StallSource,
    ) {
        let held = end.saturating_duration_since(start);
        if held >= self.threshold {
            self.report(shard, stats, end, source(), held);
        }
    }

    #[cold]
    fn report(
        &self,
        shard: ShardId,
        stats: &ShardStats,
        now: Instant,
        source: StallSource,
        held: Duration,
    ) {
        stats.stalls.incr();
        stats.stall_longest_us.max(held.as_micros() as u64);
        let due = self
            .last_log
            .get()
            .is_none_or(|t| now.saturating_duration_since(t) >= LOG_EVERY);
        if due {
            let unlogged = self.unlogged.replace(0);
            self.last_log.set(Some(now));
            tracing::warn!(
                shard,
                held_ms = held.as_secs_f64() * 1e3,
                threshold_ms = self.threshold.as_secs_f64() * 1e3,
                unlogged_since_last = unlogged,
                "shard stalled by {source}"
            );
        } else {
            self.unlogged.set(self.unlogged.get() + 1);
        }
        if let Some(hook) = &self.hook {
            hook(&StallReport {
                shard,
                source,
                duration: held,
            });
        }
    }
}
