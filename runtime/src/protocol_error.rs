//! Bad peer input, counted every time and logged as a sample (as Redis and nginx do): a flood
//! of bad connections must not become a flood of log lines. Every place that closes a
//! connection for bad input (service dispatch, the KV store's RESP and binary connections,
//! RDMA, the echo examples) reports it through [`report_protocol_error`].

use std::cell::RefCell;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::shard::context;

/// Log lines allowed per window on one shard; the rest are only counted.
pub const LOG_LINES_PER_WINDOW: u32 = 10;
/// The sampling window.
pub const LOG_WINDOW: Duration = Duration::from_secs(1);

/// Count a connection closed for bad peer input in the shard's `protocol_errors` (always) and
/// log it at WARN (at most [`LOG_LINES_PER_WINDOW`] lines per [`LOG_WINDOW`] per shard; the
/// next line logged says how many were left out). `what` names the protocol ("rpc", "resp",
/// "rdma", ...). Works off a shard too (then nothing is counted).
pub fn report_protocol_error(
    what: &'static str,
    peer: Option<SocketAddr>,
    reason: &dyn fmt::Display,
) {
    report(what, peer, reason, "closing connection: bad input");
}

/// Like [`report_protocol_error`] (counted in `protocol_errors`, logged as a sample), for bad
/// input that fails one call or stream rather than the connection (a malformed gRPC message
/// or protobuf on an HTTP/2 stream).
pub fn report_bad_call(what: &'static str, peer: Option<SocketAddr>, reason: &dyn fmt::Display) {
    report(what, peer, reason, "failing the call: bad input");
}

fn report(
    what: &'static str,
    peer: Option<SocketAddr>,
    reason: &dyn fmt::Display,
    action: &'static str,
) {
    if let Some(ctx) = context::try_current() {
        ctx.remote.stats.protocol_errors.incr();
    }
    let sample = SAMPLER
        .try_with(|s| s.borrow_mut().admit(Instant::now()))
        .unwrap_or(Sample::Log { suppressed: 0 });
    if let Sample::Log { suppressed } = sample {
        if suppressed > 0 {
            tracing::warn!(protocol = what, ?peer, %reason, suppressed, "{action} (earlier lines suppressed)");
        } else {
            tracing::warn!(protocol = what, ?peer, %reason, "{action}");
        }
    }
}

crate::shard_local! {
    /// One sampler per shard: no locks, and a flood on one shard does not silence others. Off
    /// a shard (no runtime) there is none and every line is logged.
    static SAMPLER: RefCell<LogSampler> = RefCell::new(LogSampler::new(LOG_LINES_PER_WINDOW, LOG_WINDOW));
}

/// What to do with one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sample {
    /// Log it; `suppressed` events were left out since the last line logged.
    Log {
        /// Events not logged since the last line.
        suppressed: u64,
    },
    /// Count it only.
    Skip,
}

/// The sampling policy, a plain state machine (time is an argument): at most `per_window`
/// events logged per `window`.
#[derive(Debug, Clone)]
pub struct LogSampler {
    per_window: u32,
    window: Duration,
    window_start: Option<Instant>,
    logged: u32,
    suppressed: u64,
}

impl LogSampler {
    /// At most `per_window` events logged per `window`.
    pub fn new(per_window: u32, window: Duration) -> LogSampler {
        LogSampler {
            per_window,
            window,
            window_start: None,
            logged: 0,
            suppressed: 0,
        }
    }

    /// Whether to log the event that happened at `now`.
    pub fn admit(&mut self, now: Instant) -> Sample {
        let expired = self
            .window_start
            .is_none_or(|start| now.saturating_duration_since(start) >= self.window);
        if expired {
            self.window_start = Some(now);
            self.logged = 0;
        }
        if self.logged < self.per_window {
            self.logged += 1;
            Sample::Log {
                suppressed: std::mem::take(&mut self.suppressed),
            }
        } else {
            self.suppressed += 1;
            Sample::Skip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_a_sample_and_reports_what_it_left_out() {
        let t0 = Instant::now();
        let mut s = LogSampler::new(3, Duration::from_secs(1));
        let first: Vec<Sample> = (0..1000).map(|_| s.admit(t0)).collect();
        assert_eq!(
            first
                .iter()
                .filter(|x| matches!(x, Sample::Log { .. }))
                .count(),
            3
        );
        assert_eq!(first[3], Sample::Skip);
        // Still the same window.
        assert_eq!(s.admit(t0 + Duration::from_millis(999)), Sample::Skip);
        // Next window: the first line carries the count of everything left out.
        assert_eq!(
            s.admit(t0 + Duration::from_secs(1)),
            Sample::Log { suppressed: 998 }
        );
        assert_eq!(
            s.admit(t0 + Duration::from_secs(1)),
            Sample::Log { suppressed: 0 }
        );
    }

    #[test]
    fn a_quiet_shard_logs_every_event() {
        let t0 = Instant::now();
        let mut s = LogSampler::new(1, Duration::from_secs(1));
        for i in 0..10 {
            assert_eq!(
                s.admit(t0 + Duration::from_secs(2 * i)),
                Sample::Log { suppressed: 0 }
            );
        }
    }
}
