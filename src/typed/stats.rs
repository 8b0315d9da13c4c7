//! Per-method metrics of a typed service on one shard: calls finished, errors by gRPC code and
//! a latency histogram, kept in atomics the Prometheus exporter reads from its own shard
//! (`corewire::runtime::metrics`). Every transport's calls are counted alike: they all go
//! through the generated code's [`unary`](super::unary) and
//! [`server_streaming`](super::server_streaming).

use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corewire_runtime::metrics::{
    escape_label, register_source, Families, MetricType, MetricsSource,
};
use corewire_runtime::{PollEnd, ShardId};
use corewire_transport::grpc::Code;

use crate::service::MethodInfo;

/// Upper bounds of the latency buckets, in microseconds (`+Inf` follows).
const BUCKETS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

struct Counters {
    name: &'static str,
    /// Calls finished, by gRPC code.
    codes: [AtomicU64; 17],
    /// Calls by latency bucket (not cumulative; the last is `+Inf`).
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    nanos: AtomicU64,
}

impl Counters {
    /// `n` calls that took `elapsed` each.
    fn time(&self, elapsed: Duration, n: u64) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_US.partition_point(|&b| b < us);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        add(&self.buckets[bucket], n);
        add(&self.nanos, ns.saturating_mul(n));
    }
}

struct Shared {
    shard: Option<ShardId>,
    methods: Box<[Counters]>,
}

/// The counters of one service instance (one shard), one per method in the order of its
/// `METHODS`. Generated servers make one when they are built on a shard; it is exported while
/// it lives. `!Send`: only its shard writes the counters, so a count is a load and a store
/// (no locked instruction), and the exporter reads them from any thread.
pub struct MethodStats {
    shared: Arc<Shared>,
    /// Calls that finished in the poll that started them, timed when that poll ends.
    same_poll: Rc<SamePoll>,
    _one_writer: PhantomData<Rc<()>>,
}

/// The calls of one poll that finished in it, by method: their latency is the time from the
/// poll's start to its end, which the shard reads anyway ([`corewire_runtime::at_poll_end`]),
/// so such a call (most are) costs no clock read. Their replies leave no earlier than that
/// end, when the connection's writer runs.
struct SamePoll {
    shared: Arc<Shared>,
    /// The poll they finished in (registered for its end), if any.
    poll: Cell<Option<Instant>>,
    counts: Box<[Cell<u64>]>,
}

impl PollEnd for SamePoll {
    fn poll_ended(&self, started: Instant, ended: Instant) {
        if self.poll.take() != Some(started) {
            return;
        }
        let elapsed = ended.saturating_duration_since(started);
        for (c, n) in self.shared.methods.iter().zip(self.counts.iter()) {
            let n = n.take();
            if n > 0 {
                c.time(elapsed, n);
            }
        }
    }
}

impl MethodStats {
    /// Counters for `methods`, exported from the current shard (off a shard: kept, not
    /// exported).
    pub fn new(methods: &'static [MethodInfo]) -> MethodStats {
        let shared = Arc::new(Shared {
            shard: corewire_runtime::try_shard_id(),
            methods: methods
                .iter()
                .map(|m| Counters {
                    name: m.name,
                    codes: Default::default(),
                    buckets: Default::default(),
                    nanos: AtomicU64::new(0),
                })
                .collect(),
        });
        let source: Arc<dyn MetricsSource> = shared.clone();
        register_source(Arc::downgrade(&source));
        MethodStats {
            same_poll: Rc::new(SamePoll {
                shared: shared.clone(),
                poll: Cell::new(None),
                counts: methods.iter().map(|_| Cell::new(0)).collect(),
            }),
            shared,
            _one_writer: PhantomData,
        }
    }

    /// The name of method `index`.
    #[inline]
    pub fn name(&self, index: usize) -> &'static str {
        self.shared.methods[index].name
    }

    /// A call of method `index` starts now; it is counted when the returned guard finishes
    /// it, or as cancelled (or deadline exceeded, once its deadline passed) if the guard is
    /// dropped first (the caller went away and the handler was dropped), or as internal if
    /// a panic in its handler drops it. Its latency counts
    /// from the start of the shard's poll that received the request (the time the shard
    /// already read: no clock read here), so a request that waited behind others of the same
    /// batch counts that wait too; a call that finishes in that same poll is timed to the
    /// poll's end, which the shard reads anyway (no clock read either; its reply leaves no
    /// earlier), any other when it finishes.
    pub fn start(&self, index: usize, deadline: Option<Instant>) -> CallRecord<'_> {
        CallRecord {
            stats: self,
            index,
            started: corewire_runtime::poll_started_at().unwrap_or_else(Instant::now),
            deadline,
            done: false,
        }
    }

    fn record(&self, index: usize, code: Code, elapsed: Duration) {
        let c = &self.shared.methods[index];
        add(&c.codes[usize::from(code.value())], 1);
        c.time(elapsed, 1);
    }

    /// A call that started at `started` ended now with `code`: counted at once, timed when
    /// the poll ends if it started in this poll (no clock read), else now.
    fn finish(&self, index: usize, code: Code, started: Instant) {
        if corewire_runtime::poll_started_at() != Some(started) {
            self.record(index, code, started.elapsed());
            return;
        }
        self.finish_in_poll(index, code, started);
    }

    /// A call of method `index` is answered at once, within this poll (a synchronous
    /// method): the guard counts it as [`start`](MethodStats::start) and
    /// [`CallRecord::finish`] would, with one look at the poll's start instead of two.
    #[inline]
    pub(crate) fn start_at_once(&self, index: usize) -> AtOnce<'_> {
        AtOnce {
            stats: self,
            index,
            // Where polls are not timed (off a shard, the stall detector off): the clock.
            started: corewire_runtime::poll_started_at().ok_or_else(Instant::now),
        }
    }

    /// A call that started in the poll that began at `poll` ended in it with `code`.
    #[inline]
    fn finish_in_poll(&self, index: usize, code: Code, poll: Instant) {
        let started = poll;
        let same = &self.same_poll;
        if same.poll.get() != Some(started) {
            if !corewire_runtime::at_poll_end(same.clone()) {
                self.record(index, code, started.elapsed());
                return;
            }
            same.poll.set(Some(started));
        }
        add(
            &self.shared.methods[index].codes[usize::from(code.value())],
            1,
        );
        let n = &same.counts[index];
        n.set(n.get() + 1);
    }

    /// Calls of method `index` finished with `code` so far.
    pub fn count(&self, index: usize, code: Code) -> u64 {
        self.shared.methods[index].codes[usize::from(code.value())].load(Ordering::Relaxed)
    }
}

/// `n` more on a counter only this shard writes (see [`MethodStats`]).
fn add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// A call answered at once being counted (see [`MethodStats::start_at_once`]): finished with
/// its code, or counted as `Internal` if a panic in its handler drops it.
pub(crate) struct AtOnce<'a> {
    stats: &'a MethodStats,
    index: usize,
    /// `Ok`: the start of the poll it runs in; `Err`: a clock read, polls not being timed.
    started: Result<Instant, Instant>,
}

impl AtOnce<'_> {
    /// The call ended with `code`.
    #[inline]
    pub(crate) fn finish(self, code: Code) {
        let this = std::mem::ManuallyDrop::new(self);
        this.count(code);
    }

    #[inline]
    fn count(&self, code: Code) {
        match self.started {
            Ok(poll) => self.stats.finish_in_poll(self.index, code, poll),
            Err(clock) => self.stats.record(self.index, code, clock.elapsed()),
        }
    }
}

impl Drop for AtOnce<'_> {
    /// Only a panic in the handler drops an unfinished call (it runs to its end in the
    /// poll that started it): the server fails the call as `Internal`.
    fn drop(&mut self) {
        self.count(Code::Internal);
    }
}

/// One call being timed (see [`MethodStats::start`]).
pub struct CallRecord<'a> {
    stats: &'a MethodStats,
    index: usize,
    started: Instant,
    deadline: Option<Instant>,
    done: bool,
}

impl CallRecord<'_> {
    /// The call ended with `code`.
    pub fn finish(mut self, code: Code) {
        self.done = true;
        self.stats.finish(self.index, code, self.started);
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let now = Instant::now();
        let code = match self.deadline {
            // Dropped by the unwinding of a panic in its handler: the server fails the call
            // as Internal.
            _ if std::thread::panicking() => Code::Internal,
            Some(d) if d <= now => Code::DeadlineExceeded,
            _ => Code::Cancelled,
        };
        self.stats
            .record(self.index, code, now.duration_since(self.started));
    }
}

impl MetricsSource for Shared {
    fn collect(&self, out: &mut Families) {
        let shard = self
            .shard
            .map_or_else(|| "none".to_owned(), |s| s.to_string());
        for c in self.methods.iter() {
            let labels = format!("method=\"{}\",shard=\"{shard}\"", escape_label(c.name));
            let codes: Vec<u64> = c.codes.iter().map(|n| n.load(Ordering::Relaxed)).collect();
            let total: u64 = codes.iter().sum();
            out.sample(
                "corewire_rpc_requests_total",
                "Calls of a typed method that finished (any outcome), by method and shard.",
                MetricType::Counter,
                "",
                &labels,
                total,
            );
            for (code, &n) in Code::ALL.iter().zip(&codes) {
                if *code == Code::Ok || n == 0 {
                    continue;
                }
                out.sample(
                    "corewire_rpc_errors_total",
                    "Calls of a typed method that failed, by method, shard and gRPC code.",
                    MetricType::Counter,
                    "",
                    &format!("{labels},code=\"{}\"", code.name()),
                    n,
                );
            }
            let help = "Time from a call's start (its request decoded) to its reply, by method \
                        and shard.";
            let mut cumulative = 0;
            for (i, bucket) in c.buckets.iter().enumerate() {
                cumulative += bucket.load(Ordering::Relaxed);
                let le = match BUCKETS_US.get(i) {
                    Some(us) => format!("{}", *us as f64 / 1e6),
                    None => "+Inf".to_owned(),
                };
                out.sample(
                    "corewire_rpc_latency_seconds",
                    help,
                    MetricType::Histogram,
                    "_bucket",
                    &format!("{labels},le=\"{le}\""),
                    cumulative,
                );
            }
            out.sample(
                "corewire_rpc_latency_seconds",
                help,
                MetricType::Histogram,
                "_sum",
                &labels,
                c.nanos.load(Ordering::Relaxed) as f64 / 1e9,
            );
            out.sample(
                "corewire_rpc_latency_seconds",
                help,
                MetricType::Histogram,
                "_count",
                &labels,
                cumulative,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::MethodKind;

    static METHODS: [MethodInfo; 2] = [
        MethodInfo::new("/t.S/A", MethodKind::Unary),
        MethodInfo::new("/t.S/B", MethodKind::ServerStreaming),
    ];

    #[test]
    fn calls_are_counted_by_code_and_latency() {
        let stats = MethodStats::new(&METHODS);
        stats.start(0, None).finish(Code::Ok);
        stats.start(0, None).finish(Code::NotFound);
        drop(stats.start(1, None));
        drop(stats.start(1, Some(Instant::now())));
        assert_eq!(stats.count(0, Code::Ok), 1);
        assert_eq!(stats.count(0, Code::NotFound), 1);
        assert_eq!(stats.count(1, Code::Cancelled), 1);
        assert_eq!(stats.count(1, Code::DeadlineExceeded), 1);
        let mut f = Families::default();
        stats.shared.collect(&mut f);
        let text = f.render();
        assert!(text.contains("corewire_rpc_requests_total{method=\"/t.S/A\",shard=\"none\"} 2\n"));
        assert!(text.contains(
            "corewire_rpc_errors_total{method=\"/t.S/A\",shard=\"none\",code=\"NOT_FOUND\"} 1\n"
        ));
        assert!(text.contains(
            "corewire_rpc_latency_seconds_bucket{method=\"/t.S/B\",shard=\"none\",le=\"+Inf\"} 2\n"
        ));
        assert!(text.contains("# TYPE corewire_rpc_latency_seconds histogram\n"));
        assert!(!text.contains("code=\"OK\""));
    }

    /// On a shard, calls that finish in the poll that started them are counted at once and
    /// timed when the poll ends (no clock read of their own); one that spans polls is timed
    /// when it finishes.
    #[test]
    fn calls_finished_in_their_poll_are_timed_at_its_end() {
        let rt = corewire_runtime::Runtime::builder()
            .shards(1)
            .pin(false)
            .build()
            .expect("runtime");
        let (in_poll, after, spanning) = rt
            .run_on(0, || async {
                let stats = Rc::new(MethodStats::new(&METHODS));
                let s = stats.clone();
                let in_poll = corewire_runtime::spawn_local(async move {
                    assert!(corewire_runtime::poll_started_at().is_some(), "timed polls");
                    for _ in 0..3 {
                        s.start(0, None).finish(Code::Ok);
                    }
                    let c = &s.shared.methods[0];
                    (
                        s.count(0, Code::Ok),
                        c.buckets
                            .iter()
                            .map(|b| b.load(Ordering::Relaxed))
                            .sum::<u64>(),
                    )
                })
                .await
                .unwrap();
                let c = &stats.shared.methods[0];
                let after: u64 = c.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum();
                let s = stats.clone();
                corewire_runtime::spawn_local(async move {
                    let record = s.start(1, None);
                    corewire_runtime::yield_now().await;
                    record.finish(Code::Ok);
                })
                .await
                .unwrap();
                let c = &stats.shared.methods[1];
                let spanning: u64 = c.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum();
                (in_poll, after, spanning)
            })
            .unwrap();
        assert_eq!(in_poll, (3, 0), "counted at once, timed later");
        assert_eq!(after, 3, "timed when the poll ended");
        assert_eq!(spanning, 1);
    }
}
