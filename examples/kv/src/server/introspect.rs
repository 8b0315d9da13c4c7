//! The shard's side of the introspection family (see [`crate::introspect`]): the tables its
//! connections' commands fill (INFO commandstats / errorstats / latencystats, LATENCY
//! HISTOGRAM, SLOWLOG, LATENCY events), its part of the queries over every shard, its
//! MONITOR connections, and DEBUG SLEEP / SET-ACTIVE-EXPIRE.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use nix::time::{clock_gettime, ClockId};

use super::forward::Work;
use super::notify::Note;
use super::shard::Shard;
use super::sink::SinkKey;
use crate::introspect::stats::{CallStats, LatencyMonitor, SlowLog, SlowRecord};
use crate::introspect::Request;
use crate::reply::Reply;
use crate::session::CallRecord;

/// The monotonic clock (`CLOCK_MONOTONIC`, what `Instant` reads), microseconds: durations
/// of commands, read once or twice per request. Read directly: `Instant::elapsed` adds a
/// checked subtraction and a 128-bit conversion to every read.
pub(crate) fn monotonic_us() -> u64 {
    micros(ClockId::CLOCK_MONOTONIC)
}

/// The Unix time in microseconds.
pub(crate) fn unix_us() -> u64 {
    micros(ClockId::CLOCK_REALTIME)
}

fn micros(clock: ClockId) -> u64 {
    // Neither clock can fail on Linux (a valid id, a valid pointer).
    clock_gettime(clock).map_or(0, |t| {
        (t.tv_sec() as u64)
            .wrapping_mul(1_000_000)
            .wrapping_add(t.tv_nsec() as u64 / 1000)
    })
}

/// A shard's introspection state.
pub(crate) struct IntroShard {
    calls: RefCell<CallStats>,
    slowlog: RefCell<SlowLog>,
    latency: RefCell<LatencyMonitor>,
    /// This shard's connections in MONITOR mode.
    monitors: RefCell<Vec<SinkKey>>,
    /// DEBUG SET-ACTIVE-EXPIRE.
    pub active_expire: Cell<bool>,
}

impl Default for IntroShard {
    fn default() -> Self {
        IntroShard {
            calls: RefCell::default(),
            slowlog: RefCell::default(),
            latency: RefCell::default(),
            monitors: RefCell::default(),
            active_expire: Cell::new(true),
        }
    }
}

impl Shard {
    /// What this shard's connections answered: into the statistics, SLOWLOG and LATENCY.
    /// The records are read in place (only a SLOWLOG entry is taken out of one).
    pub(crate) fn record_calls(&self, calls: &mut [CallRecord]) {
        let hot = &self.shared.session.live.hot;
        let tracking = hot.latency_tracking.load(Ordering::Relaxed);
        let threshold_ms = hot.latency_threshold_ms.load(Ordering::Relaxed);
        let max_len = hot.slowlog_max_len.load(Ordering::Relaxed) as usize;
        let mut stats = self.introspect.calls.borrow_mut();
        for call in calls {
            stats.record(call, tracking);
            if let Some(entry) = call.slow.take() {
                if max_len > 0 {
                    let id = self.shared.slowlog_ids.fetch_add(1, Ordering::Relaxed);
                    (self.introspect.slowlog.borrow_mut())
                        .push(SlowRecord { id, entry: *entry }, max_len);
                }
            }
            let ms = call.duration_us / 1000;
            if threshold_ms > 0 && ms >= threshold_ms && !call.rejected {
                let meta = call.name.and_then(crate::introspect::meta::find);
                // A blocking command's wait is not latency.
                if !meta.is_some_and(|m| m.has_flag("blocking")) {
                    let event = if meta.is_some_and(|m| m.has_flag("fast")) {
                        "fast-command"
                    } else {
                        "command"
                    };
                    self.latency_event(event, ms);
                }
            }
        }
    }

    /// [`Self::record_calls`] of one call (a script's command: no vector per call).
    pub(crate) fn record_call(&self, mut call: CallRecord) {
        self.record_calls(std::slice::from_mut(&mut call));
    }

    /// Records a latency event of `ms` (when at least `latency-monitor-threshold`).
    pub(crate) fn latency_event(&self, event: &'static str, ms: u64) {
        let threshold = (self.shared.session.live.hot.latency_threshold_ms).load(Ordering::Relaxed);
        if threshold > 0 && ms >= threshold {
            (self.introspect.latency.borrow_mut()).add(event, ms, unix_us() / 1_000_000);
        }
    }

    /// This shard's part of an introspection request sent to every shard.
    pub(crate) fn run_introspect(&self, request: Request) -> Reply {
        let int = |n: u64| Reply::Integer(n as i64);
        match request {
            Request::SlowlogGet(count) => {
                let max_len = self
                    .shared
                    .session
                    .live
                    .hot
                    .slowlog_max_len
                    .load(Ordering::Relaxed);
                let mut slowlog = self.introspect.slowlog.borrow_mut();
                slowlog.trim(max_len as usize);
                slowlog.newest(count)
            }
            Request::SlowlogLen => {
                let max_len = self
                    .shared
                    .session
                    .live
                    .hot
                    .slowlog_max_len
                    .load(Ordering::Relaxed);
                let mut slowlog = self.introspect.slowlog.borrow_mut();
                slowlog.trim(max_len as usize);
                Reply::Array(vec![int(slowlog.len() as u64), int(max_len)])
            }
            Request::SlowlogReset => {
                self.introspect.slowlog.borrow_mut().reset();
                Reply::ok()
            }
            Request::LatencyLatest | Request::LatencyDoctor | Request::LatencyGraph(_) => {
                self.introspect.latency.borrow().to_reply()
            }
            Request::LatencyHistory(event) => {
                let Reply::Array(events) = self.introspect.latency.borrow().to_reply() else {
                    return Reply::Array(Vec::new());
                };
                Reply::Array(
                    events
                        .into_iter()
                        .filter(|entry| {
                            matches!(entry, Reply::Array(fields)
                                if matches!(fields.first(), Some(Reply::Bulk(name))
                                    if name.eq_ignore_ascii_case(&event)))
                        })
                        .collect(),
                )
            }
            Request::LatencyReset(events) => {
                let mut latency = self.introspect.latency.borrow_mut();
                let Reply::Array(before) = latency.to_reply() else {
                    return Reply::Array(Vec::new());
                };
                latency.reset(&events);
                let Reply::Array(after) = latency.to_reply() else {
                    return Reply::Array(Vec::new());
                };
                let name = |entry: &Reply| match entry {
                    Reply::Array(fields) => match fields.first() {
                        Some(Reply::Bulk(name)) => Some(name.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                let left: Vec<Bytes> = after.iter().filter_map(name).collect();
                Reply::Array(
                    before
                        .iter()
                        .filter_map(name)
                        .filter(|name| !left.contains(name))
                        .map(Reply::Bulk)
                        .collect(),
                )
            }
            Request::LatencyHistogram(_) => self.introspect.calls.borrow().to_reply(),
            Request::MemoryStats | Request::MemoryDoctor => {
                let (stats, table) =
                    self.with_store(|store| (store.stats(), store.table_heap_bytes()));
                let clients: u64 = (self.sinks().iter())
                    .map(|(_, sink)| sink.memory() as u64)
                    .sum();
                Reply::Array(vec![
                    int(stats.keys),
                    int(stats.expires),
                    int(stats.data_bytes),
                    int(stats.used_memory),
                    int(table),
                    int(clients),
                ])
            }
            Request::MemoryMallocStats => Reply::Bulk(Bytes::from_static(
                b"Stats not supported for the current allocator",
            )),
            Request::MemoryPurge => {
                // Redis asks jemalloc to purge its dirty pages; here each shard gives back
                // what its heap holds free, at once (see `heap`).
                crate::heap::collect(true);
                Reply::ok()
            }
            Request::DebugSleep(us) => {
                // Redis's DEBUG SLEEP stops the server: every shard sleeps at once.
                std::thread::sleep(Duration::from_micros(us));
                Reply::ok()
            }
            Request::DebugActiveExpire(on) => {
                self.introspect.active_expire.set(on);
                Reply::ok()
            }
            // A script's TIME: the clock now, as Redis 7.0 answers it inside a script.
            Request::Time => crate::introspect::time_reply(unix_us()),
            Request::LastSave => Reply::Integer(self.shared.rdb.info().last_save_time as i64),
            Request::Shutdown { abort: true, .. } => Reply::error("ERR No shutdown in progress."),
            Request::Shutdown { abort: false, .. } => {
                if self.shared.stop.request_if_owned() {
                    tracing::info!("SHUTDOWN: stopping (the AOF is flushed first)");
                    Reply::NullBulk
                } else {
                    Reply::error(
                        "ERR SHUTDOWN: this server is embedded in a process that did not ask \
                         to be told; stop it from there",
                    )
                }
            }
            other => Reply::error(format!(
                "ERR internal error: {} is answered by the connection",
                other.name()
            )),
        }
    }

    /// INFO's glue-level part: the call statistics.
    pub(crate) fn info_calls(&self) -> Reply {
        self.introspect.calls.borrow().to_reply()
    }

    /// CONFIG RESETSTAT's part here.
    pub(crate) fn reset_introspection(&self) {
        *self.introspect.calls.borrow_mut() = CallStats::default();
    }

    /// Connection `sink` entered (or left) MONITOR mode.
    pub(crate) fn set_monitor(&self, sink: SinkKey, on: bool) {
        let mut monitors = self.introspect.monitors.borrow_mut();
        let present = monitors.contains(&sink);
        let counter = &self.shared.session.live.hot.monitors;
        if on && !present {
            monitors.push(sink);
            counter.fetch_add(1, Ordering::Relaxed);
        } else if !on && present {
            monitors.retain(|s| *s != sink);
            counter.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// MONITOR lines from this shard's connections: to every shard's monitors.
    /// Inlined: with no MONITOR line (every request but a monitored one's) it is one branch.
    #[inline]
    pub(crate) fn feed_monitors(&self, lines: Vec<Bytes>) {
        if !lines.is_empty() {
            self.feed_monitor_lines(lines);
        }
    }

    fn feed_monitor_lines(&self, lines: Vec<Bytes>) {
        for target in (0..self.count).filter(|&target| target != self.id) {
            self.forward
                .push_work(target, Work::Note(Note::Monitor(lines.clone())));
        }
        self.deliver_monitor_lines(&lines);
    }

    /// Delivers MONITOR lines to this shard's monitors.
    pub(crate) fn deliver_monitor_lines(&self, lines: &[Bytes]) {
        let monitors = self.introspect.monitors.borrow().clone();
        if monitors.is_empty() {
            return;
        }
        let now = super::shard::now_ms();
        for sink in monitors {
            if let Some(sink) = self.sink(sink) {
                for line in lines {
                    sink.push(Reply::Simple(line.clone()), now);
                }
            }
        }
    }
}
