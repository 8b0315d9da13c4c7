//! The per-shard tables behind INFO commandstats / errorstats / latencystats, LATENCY and
//! SLOWLOG, filled by the connections of the shard ([`crate::session::CallRecord`]) and by
//! its own work (the expiry cycle), and merged over the shards when a client asks: each
//! shard answers with its part as a [`Reply`], the merge functions here put them together.
//! All sans-I/O: times come from the caller.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use hdrhistogram::Histogram;

use crate::reply::Reply;
use crate::session::{CallRecord, SlowEntry};

/// Latencies are histogrammed in nanoseconds from 1 ns to 1 s, two significant figures
/// (Redis's `LATENCY_HISTOGRAM_*` settings).
const HISTOGRAM_LOW: u64 = 1;
const HISTOGRAM_HIGH: u64 = 1_000_000_000;
const HISTOGRAM_SIGFIG: u8 = 2;

fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(HISTOGRAM_LOW, HISTOGRAM_HIGH, HISTOGRAM_SIGFIG).ok()
}

/// One command's counters.
#[derive(Debug, Default, Clone)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    pub histogram: Option<Histogram<u64>>,
}

/// INFO commandstats and errorstats, for one shard's connections or merged.
#[derive(Debug, Default, Clone)]
pub struct CallStats {
    /// The commands' counters, in the order first met ([`CallStats::commands`]).
    commands: Vec<(&'static str, CommandStat)>,
    /// Where each command's counters are, by the command table's name (foldhash: SipHash
    /// cost more than a command itself).
    index: HashMap<&'static str, usize, foldhash::fast::RandomState>,
    /// The last commands counted, and where, most recent first: a pipeline repeats one
    /// command, a script a few, and the very same name (the table's) is compared by address,
    /// without hashing it.
    recent: [(usize, usize); RECENT],
    pub errors: HashMap<Bytes, u64>,
    pub total_errors: u64,
}

/// How many names [`CallStats::stat_mut`] finds by address before it hashes one.
const RECENT: usize = 4;

/// How many distinct error codes errorstats keeps (Redis's `ERRORSTATS_LIMIT`): past it,
/// new codes are counted in the total only.
const ERRORSTATS_LIMIT: usize = 128;

impl CallStats {
    /// Every command counted, with its counters (in no particular order).
    pub fn commands(&self) -> impl Iterator<Item = (&'static str, &CommandStat)> + '_ {
        self.commands.iter().map(|(name, stat)| (*name, stat))
    }

    /// The counters of the command named `name` (the table's name), if it was counted.
    pub fn command(&self, name: &str) -> Option<&CommandStat> {
        let &at = self.index.get(name)?;
        Some(&self.commands[at].1)
    }

    fn stat_mut(&mut self, name: &'static str) -> &mut CommandStat {
        let address = name.as_ptr() as usize;
        // An address names one table name; an empty slot holds 0, which no name has.
        let at = match self.recent.iter().position(|&(seen, _)| seen == address) {
            Some(slot) => {
                let entry = self.recent[slot];
                self.recent.copy_within(0..slot, 1);
                self.recent[0] = entry;
                entry.1
            }
            None => {
                let next = self.commands.len();
                let at = *self.index.entry(name).or_insert(next);
                if at == next {
                    self.commands.push((name, CommandStat::default()));
                }
                self.recent.copy_within(0..RECENT - 1, 1);
                self.recent[0] = (address, at);
                at
            }
        };
        &mut self.commands[at].1
    }

    /// Counts one answered command; `histogram`: also its latency (`latency-tracking`).
    pub fn record(&mut self, call: &CallRecord, histogram: bool) {
        if let Some(code) = call.error.as_ref().filter(|_| call.errorstat) {
            self.total_errors += 1;
            if self.errors.len() < ERRORSTATS_LIMIT || self.errors.contains_key(code) {
                *self.errors.entry(code.clone()).or_default() += 1;
            }
        }
        let Some(name) = call.name else {
            return;
        };
        let stat = self.stat_mut(name);
        if call.rejected {
            stat.rejected += 1;
            return;
        }
        stat.calls += 1;
        stat.usec += call.duration_us;
        if call.error.is_some() {
            stat.failed += 1;
        }
        if histogram {
            if stat.histogram.is_none() {
                stat.histogram = new_histogram();
            }
            if let Some(h) = &mut stat.histogram {
                h.saturating_record((call.duration_us * 1000).max(HISTOGRAM_LOW));
            }
        }
    }

    /// This shard's part: `[[name, calls, usec, rejected, failed, [value, count, ...]],
    /// ...], [code, count, ...], total_errors]`.
    pub fn to_reply(&self) -> Reply {
        let int = |n: u64| Reply::Integer(n as i64);
        let commands = self
            .commands()
            .map(|(name, stat)| {
                let histogram = stat.histogram.as_ref().map_or_else(Vec::new, |h| {
                    h.iter_recorded()
                        .flat_map(|v| [int(v.value_iterated_to()), int(v.count_at_value())])
                        .collect()
                });
                Reply::Array(vec![
                    Reply::Bulk(Bytes::from_static(name.as_bytes())),
                    int(stat.calls),
                    int(stat.usec),
                    int(stat.rejected),
                    int(stat.failed),
                    Reply::Array(histogram),
                ])
            })
            .collect();
        let errors = self
            .errors
            .iter()
            .flat_map(|(code, count)| [Reply::Bulk(code.clone()), int(*count)])
            .collect();
        Reply::Array(vec![
            Reply::Array(commands),
            Reply::Array(errors),
            int(self.total_errors),
        ])
    }

    /// Adds a shard's part.
    pub fn merge_reply(&mut self, reply: &Reply) {
        let Reply::Array(parts) = reply else {
            return;
        };
        let [Reply::Array(commands), Reply::Array(errors), Reply::Integer(total)] = &parts[..]
        else {
            return;
        };
        for command in commands {
            let Reply::Array(fields) = command else {
                continue;
            };
            let [Reply::Bulk(name), Reply::Integer(calls), Reply::Integer(usec), Reply::Integer(rejected), Reply::Integer(failed), Reply::Array(histogram)] =
                &fields[..]
            else {
                continue;
            };
            // Names come from the command table: find the static one.
            let Some(name) = static_name(name) else {
                continue;
            };
            let stat = self.stat_mut(name);
            stat.calls += *calls as u64;
            stat.usec += *usec as u64;
            stat.rejected += *rejected as u64;
            stat.failed += *failed as u64;
            if !histogram.is_empty() {
                if stat.histogram.is_none() {
                    stat.histogram = new_histogram();
                }
                if let Some(h) = &mut stat.histogram {
                    for pair in histogram.chunks(2) {
                        if let [Reply::Integer(value), Reply::Integer(count)] = pair {
                            let _ = h.record_n(*value as u64, *count as u64);
                        }
                    }
                }
            }
        }
        for pair in errors.chunks(2) {
            if let [Reply::Bulk(code), Reply::Integer(count)] = pair {
                *self.errors.entry(code.clone()).or_default() += *count as u64;
            }
        }
        self.total_errors += *total as u64;
    }
}

/// The command table's spelling of `name` (`client|id`).
fn static_name(name: &[u8]) -> Option<&'static str> {
    let name = std::str::from_utf8(name).ok()?;
    super::meta::find(name).map(|meta| meta.name)
}

/// LATENCY HISTOGRAM's entry: `calls` and the cumulative counts at power-of-two bucket
/// ends, in microseconds (Redis's `fillCommandCDF`).
pub fn histogram_reply(histogram: &Histogram<u64>) -> Reply {
    let mut buckets = Vec::new();
    let mut cumulative = 0;
    let mut previous = 0;
    for value in histogram.iter_log(1024, 2.0) {
        cumulative += value.count_since_last_iteration();
        if cumulative > previous {
            let micros = histogram.highest_equivalent(value.value_iterated_to()) / 1000;
            buckets.push(Reply::Integer(micros as i64));
            buckets.push(Reply::Integer(cumulative as i64));
        }
        previous = cumulative;
    }
    Reply::Map(vec![
        Reply::Bulk(Bytes::from_static(b"calls")),
        Reply::Integer(histogram.len() as i64),
        Reply::Bulk(Bytes::from_static(b"histogram_usec")),
        Reply::Map(buckets),
    ])
}

/// A SLOWLOG entry with its node-wide id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowRecord {
    pub id: u64,
    pub entry: SlowEntry,
}

impl SlowRecord {
    /// SLOWLOG GET's six fields.
    pub fn to_reply(&self) -> Reply {
        let e = &self.entry;
        Reply::Array(vec![
            Reply::Integer(self.id as i64),
            Reply::Integer(e.unix_s as i64),
            Reply::Integer(e.duration_us as i64),
            Reply::Array(e.args.iter().cloned().map(Reply::Bulk).collect()),
            Reply::Bulk(Bytes::from(e.client_addr.clone())),
            Reply::Bulk(e.client_name.clone()),
        ])
    }
}

/// One shard's slow log: its newest entries, at most `slowlog-max-len`.
#[derive(Debug, Default)]
pub struct SlowLog {
    entries: VecDeque<SlowRecord>,
}

impl SlowLog {
    pub fn push(&mut self, record: SlowRecord, max_len: usize) {
        self.entries.push_front(record);
        self.entries.truncate(max_len);
    }

    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// The newest `count` entries, newest first.
    pub fn newest(&self, count: usize) -> Reply {
        Reply::Array(
            self.entries
                .iter()
                .take(count)
                .map(SlowRecord::to_reply)
                .collect(),
        )
    }
}

/// SLOWLOG GET over the shards: every part's entries, newest (highest id) first, `count`
/// of them.
pub fn merge_slowlog(parts: Vec<Reply>, count: usize) -> Reply {
    let mut entries: Vec<Reply> = parts
        .into_iter()
        .flat_map(|part| match part {
            Reply::Array(items) => items,
            _ => Vec::new(),
        })
        .collect();
    let id = |entry: &Reply| match entry {
        Reply::Array(fields) => match fields.first() {
            Some(Reply::Integer(id)) => *id,
            _ => 0,
        },
        _ => 0,
    };
    entries.sort_by_key(|entry| std::cmp::Reverse(id(entry)));
    entries.truncate(count);
    Reply::Array(entries)
}

/// Samples kept per latency event (Redis's `LATENCY_TS_LEN`).
const LATENCY_SAMPLES: usize = 160;

/// One event's history: a sample per second at most (the worst of that second).
#[derive(Debug, Default, Clone)]
pub struct EventHistory {
    samples: VecDeque<(u64, u64)>,
    max_ms: u64,
}

/// LATENCY's events on one shard.
#[derive(Debug, Default)]
pub struct LatencyMonitor {
    events: HashMap<&'static str, EventHistory>,
}

impl LatencyMonitor {
    /// Records that `event` took `ms` at `unix_s`.
    pub fn add(&mut self, event: &'static str, ms: u64, unix_s: u64) {
        let history = self.events.entry(event).or_default();
        history.max_ms = history.max_ms.max(ms);
        match history.samples.back_mut() {
            Some((time, latency)) if *time == unix_s => *latency = (*latency).max(ms),
            _ => {
                history.samples.push_back((unix_s, ms));
                if history.samples.len() > LATENCY_SAMPLES {
                    history.samples.pop_front();
                }
            }
        }
    }

    /// Forgets `events` (all when empty); how many had data.
    pub fn reset(&mut self, events: &[Bytes]) -> usize {
        if events.is_empty() {
            let count = self.events.len();
            self.events.clear();
            return count;
        }
        let before = self.events.len();
        self.events.retain(|name, _| {
            !events
                .iter()
                .any(|e| e.eq_ignore_ascii_case(name.as_bytes()))
        });
        before - self.events.len()
    }

    /// This shard's part: `[[event, max, [time, latency, ...]], ...]`.
    pub fn to_reply(&self) -> Reply {
        Reply::Array(
            self.events
                .iter()
                .map(|(name, history)| {
                    Reply::Array(vec![
                        Reply::Bulk(Bytes::from_static(name.as_bytes())),
                        Reply::Integer(history.max_ms as i64),
                        Reply::Array(
                            history
                                .samples
                                .iter()
                                .flat_map(|(t, l)| {
                                    [Reply::Integer(*t as i64), Reply::Integer(*l as i64)]
                                })
                                .collect(),
                        ),
                    ])
                })
                .collect(),
        )
    }
}

/// The events of every shard's part, merged: per event, its worst and its samples by time
/// (the worst per second).
pub fn merge_latency(parts: &[Reply]) -> Vec<(String, EventHistory)> {
    let mut events: HashMap<String, EventHistory> = HashMap::new();
    for part in parts {
        let Reply::Array(entries) = part else {
            continue;
        };
        for entry in entries {
            let Reply::Array(fields) = entry else {
                continue;
            };
            let [Reply::Bulk(name), Reply::Integer(max), Reply::Array(samples)] = &fields[..]
            else {
                continue;
            };
            let history = events
                .entry(String::from_utf8_lossy(name).into_owned())
                .or_default();
            history.max_ms = history.max_ms.max(*max as u64);
            for pair in samples.chunks(2) {
                if let [Reply::Integer(time), Reply::Integer(latency)] = pair {
                    history.samples.push_back((*time as u64, *latency as u64));
                }
            }
        }
    }
    let mut merged: Vec<(String, EventHistory)> = events
        .into_iter()
        .map(|(name, mut history)| {
            let mut samples: Vec<(u64, u64)> = history.samples.drain(..).collect();
            samples.sort_unstable();
            let mut by_second: Vec<(u64, u64)> = Vec::with_capacity(samples.len());
            for (time, latency) in samples {
                match by_second.last_mut() {
                    Some((t, l)) if *t == time => *l = (*l).max(latency),
                    _ => by_second.push((time, latency)),
                }
            }
            let skip = by_second.len().saturating_sub(LATENCY_SAMPLES);
            history.samples = by_second.into_iter().skip(skip).collect();
            (name, history)
        })
        .collect();
    merged.sort_by(|a, b| a.0.cmp(&b.0));
    merged
}

impl EventHistory {
    pub fn samples(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.samples.iter().copied()
    }

    pub fn latest(&self) -> Option<(u64, u64)> {
        self.samples.back().copied()
    }

    pub fn max_ms(&self) -> u64 {
        self.max_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &'static str, us: u64, error: Option<&str>, rejected: bool) -> CallRecord {
        CallRecord {
            name: Some(name),
            duration_us: us,
            error: error.map(|e| Bytes::from(e.to_owned())),
            rejected,
            errorstat: true,
            slow: None,
        }
    }

    #[test]
    fn calls_merge_over_shards() {
        let mut a = CallStats::default();
        a.record(&call("set", 10, None, false), true);
        a.record(&call("set", 30, Some("ERR"), false), true);
        let mut b = CallStats::default();
        b.record(&call("set", 5, Some("ERR"), true), true);
        b.record(&call("get", 1, None, false), false);
        let mut merged = CallStats::default();
        merged.merge_reply(&a.to_reply());
        merged.merge_reply(&b.to_reply());
        let set = merged.command("set").unwrap();
        assert_eq!(
            (set.calls, set.usec, set.rejected, set.failed),
            (2, 40, 1, 1)
        );
        assert_eq!(set.histogram.as_ref().unwrap().len(), 2);
        assert!(merged.command("get").unwrap().histogram.is_none());
        assert_eq!(merged.errors[&Bytes::from("ERR")], 2);
        assert_eq!(merged.total_errors, 2);
        let Reply::Map(cdf) = histogram_reply(set.histogram.as_ref().unwrap()) else {
            panic!()
        };
        assert_eq!(cdf[1], Reply::Integer(2));
    }

    #[test]
    fn equal_names_at_other_addresses_share_counters() {
        // Recent names are compared by address: the same name elsewhere must still find
        // its counters through the map, not start new ones.
        let elsewhere: &'static str = Box::leak(String::from("get").into_boxed_str());
        let mut stats = CallStats::default();
        stats.record(&call("get", 1, None, false), false);
        stats.record(&call(elsewhere, 2, None, false), false);
        stats.record(&call("set", 4, None, false), false);
        stats.record(&call("get", 8, Some("ERR"), false), false);
        let get = stats.command(elsewhere).unwrap();
        assert_eq!((get.calls, get.usec, get.failed), (3, 11, 1));
        assert_eq!(stats.commands().count(), 2);
        assert_eq!(stats.command("set").unwrap().calls, 1);
    }

    #[test]
    fn slowlog_and_latency_merge() {
        let entry = |id: u64| SlowRecord {
            id,
            entry: SlowEntry {
                unix_s: id,
                duration_us: 1,
                args: vec![],
                client_addr: String::new(),
                client_name: Bytes::new(),
            },
        };
        let mut a = SlowLog::default();
        let mut b = SlowLog::default();
        for id in [1, 4, 5] {
            a.push(entry(id), 2);
        }
        b.push(entry(3), 2);
        assert_eq!(a.len(), 2);
        let merged = merge_slowlog(vec![a.newest(10), b.newest(10)], 2);
        let Reply::Array(items) = merged else {
            panic!()
        };
        assert_eq!(items.len(), 2);
        assert_eq!(items[0], entry(5).to_reply());
        let mut x = LatencyMonitor::default();
        x.add("command", 300, 10);
        x.add("command", 400, 10);
        let mut y = LatencyMonitor::default();
        y.add("command", 500, 11);
        let merged = merge_latency(&[x.to_reply(), y.to_reply()]);
        let (name, history) = &merged[0];
        assert_eq!(name, "command");
        assert_eq!(
            history.samples().collect::<Vec<_>>(),
            [(10, 400), (11, 500)]
        );
        assert_eq!(history.max_ms(), 500);
        assert_eq!(x.reset(&[Bytes::from("COMMAND")]), 1);
    }
}
