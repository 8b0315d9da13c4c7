//! The running server's configuration: every option's value (what CONFIG GET reports and
//! CONFIG REWRITE writes), shared by all connections, plus the few settings the data path
//! reads, as atomics. CONFIG SET validates all its pairs here first (Redis 7's all-or-nothing
//! rules and error texts), then stores them and returns what the shards must apply.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use super::load::Values;
use super::table::{self, Effect, LiveKey, OptionSpec, IMMUTABLE, OPTIONS};
use super::value::{is_multi_arg, OutputBufferLimits};
use super::Setting;
use crate::notify::EventFlags;
use crate::session::OutputLimit;
use crate::store::{EncodingLimits, EvictionPolicy};

/// Relaxed everywhere: each setting is read on its own; none orders other memory.
const RELAXED: Ordering = Ordering::Relaxed;

/// Settings read on the data path, kept current by CONFIG SET.
#[derive(Debug)]
pub struct Hot {
    /// `slowlog-log-slower-than`, microseconds (-1: off).
    pub slowlog_slower_than_us: AtomicI64,
    pub slowlog_max_len: AtomicU64,
    /// `min-replicas-to-write` (0: off), read by every write.
    pub min_replicas_to_write: AtomicU64,
    /// `latency-monitor-threshold`, ms (0: off).
    pub latency_threshold_ms: AtomicU64,
    pub latency_tracking: AtomicBool,
    pub tracking_max_keys: AtomicU64,
    /// `timeout`, seconds (0: never).
    pub timeout_s: AtomicU64,
    pub notify: AtomicU32,
    /// Connections in MONITOR mode, all shards together (commands are shown only while
    /// some are).
    pub monitors: AtomicU64,
    /// Clients with CLIENT TRACKING on, all shards together.
    pub tracking_clients: AtomicU64,
    /// Keys in the client tracking tables, all shards together (held under
    /// `tracking-table-max-keys`).
    pub tracking_keys: AtomicU64,
    /// `client-output-buffer-limit pubsub`.
    pubsub_hard: AtomicU64,
    pubsub_soft: AtomicU64,
    pubsub_soft_ms: AtomicU64,
}

/// The server's configuration at run time (one per server, in an `Arc`).
#[derive(Debug)]
pub struct LiveConfig {
    values: Mutex<Values>,
    pub hot: Hot,
    /// The file CONFIG REWRITE writes (`None`: the server was started without one).
    pub config_file: Option<PathBuf>,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig::new(Values::default(), None)
    }
}

fn number<T: std::str::FromStr + Default>(value: &str) -> T {
    value.parse().unwrap_or_default()
}

impl LiveConfig {
    pub fn new(values: Values, config_file: Option<PathBuf>) -> LiveConfig {
        let live = LiveConfig {
            values: Mutex::new(Values::default()),
            hot: Hot {
                slowlog_slower_than_us: AtomicI64::new(0),
                slowlog_max_len: AtomicU64::new(0),
                min_replicas_to_write: AtomicU64::new(0),
                latency_threshold_ms: AtomicU64::new(0),
                latency_tracking: AtomicBool::new(true),
                tracking_max_keys: AtomicU64::new(0),
                timeout_s: AtomicU64::new(0),
                notify: AtomicU32::new(0),
                monitors: AtomicU64::new(0),
                tracking_clients: AtomicU64::new(0),
                tracking_keys: AtomicU64::new(0),
                pubsub_hard: AtomicU64::new(0),
                pubsub_soft: AtomicU64::new(0),
                pubsub_soft_ms: AtomicU64::new(0),
            },
            config_file,
        };
        for (index, spec) in OPTIONS.iter().enumerate() {
            if let Effect::Live(key) = spec.effect {
                live.set_hot(key, values.get(index));
            }
        }
        *live.lock() = values;
        live
    }

    fn lock(&self) -> MutexGuard<'_, Values> {
        // Each update is one assignment: a panic while holding it leaves the table whole.
        self.values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current value of the option called `name`.
    pub fn get(&self, name: &str) -> Option<String> {
        self.lock().named(name).map(str::to_owned)
    }

    /// A copy of every value.
    pub fn values(&self) -> Values {
        self.lock().clone()
    }

    /// Records `value` for `name` (the glue's effective settings at start-up).
    pub fn set(&self, name: &str, value: impl Into<String>) {
        let value = value.into();
        if let Some((_, spec)) = table::find(name) {
            if let Effect::Live(key) = spec.effect {
                self.set_hot(key, &value);
            }
        }
        self.lock().set_named(name, value);
    }

    pub fn requirepass(&self) -> Option<Bytes> {
        self.get("requirepass")
            .filter(|pass| !pass.is_empty())
            .map(Bytes::from)
    }

    pub fn pubsub_output_limit(&self) -> OutputLimit {
        OutputLimit {
            hard: self.hot.pubsub_hard.load(RELAXED) as usize,
            soft: self.hot.pubsub_soft.load(RELAXED) as usize,
            soft_ms: self.hot.pubsub_soft_ms.load(RELAXED),
        }
    }

    pub fn set_pubsub_output_limit(&self, limit: OutputLimit) {
        self.hot.pubsub_hard.store(limit.hard as u64, RELAXED);
        self.hot.pubsub_soft.store(limit.soft as u64, RELAXED);
        self.hot.pubsub_soft_ms.store(limit.soft_ms, RELAXED);
    }

    pub fn notify_flags(&self) -> EventFlags {
        EventFlags::from_bits(self.hot.notify.load(RELAXED))
    }

    /// The thresholds OBJECT ENCODING is judged by, from the current values.
    pub fn encoding_limits(&self) -> EncodingLimits {
        let values = self.lock();
        let get = |name: &str| values.named(name).unwrap_or_default().to_owned();
        EncodingLimits {
            hash_entries: number(&get("hash-max-listpack-entries")),
            hash_value: number(&get("hash-max-listpack-value")),
            set_intset_entries: number(&get("set-max-intset-entries")),
            zset_entries: number(&get("zset-max-listpack-entries")),
            zset_value: number(&get("zset-max-listpack-value")),
            list_size: number(&get("list-max-listpack-size")),
            stream_node_entries: number(&get("stream-node-max-entries")),
            stream_node_bytes: number(&get("stream-node-max-bytes")),
            hll_sparse_max_bytes: number(&get("hll-sparse-max-bytes")),
        }
    }

    /// The percentiles INFO latencystats prints.
    pub fn latency_percentiles(&self) -> Vec<f64> {
        self.get("latency-tracking-info-percentiles")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// The settings the shards apply for the current values of every live option (sent to
    /// each shard at start-up).
    pub fn shard_settings(&self) -> Vec<Setting> {
        let values = self.values();
        let mut settings = Vec::new();
        for (index, spec) in OPTIONS.iter().enumerate() {
            if let Effect::Live(key) = spec.effect {
                if let Some(setting) = self.shard_setting(key, values.get(index)) {
                    if !settings.contains(&setting) {
                        settings.push(setting);
                    }
                }
            }
        }
        settings
    }

    fn set_hot(&self, key: LiveKey, value: &str) {
        let hot = &self.hot;
        match key {
            LiveKey::SlowlogSlowerThan => hot.slowlog_slower_than_us.store(number(value), RELAXED),
            LiveKey::SlowlogMaxLen => hot.slowlog_max_len.store(number(value), RELAXED),
            LiveKey::MinReplicasToWrite => hot.min_replicas_to_write.store(number(value), RELAXED),
            LiveKey::LatencyMonitorThreshold => {
                hot.latency_threshold_ms.store(number(value), RELAXED)
            }
            LiveKey::LatencyTracking => hot.latency_tracking.store(value == "yes", RELAXED),
            LiveKey::TrackingTableMaxKeys => hot.tracking_max_keys.store(number(value), RELAXED),
            LiveKey::Timeout => hot.timeout_s.store(number(value), RELAXED),
            LiveKey::NotifyKeyspaceEvents => {
                let flags = EventFlags::parse(value).unwrap_or_default();
                hot.notify.store(flags.bits(), RELAXED);
            }
            LiveKey::ClientOutputBufferLimit => {
                if let Some(limits) = OutputBufferLimits::parse(value) {
                    let (hard, soft, seconds) = limits.pubsub;
                    self.set_pubsub_output_limit(OutputLimit {
                        hard: hard as usize,
                        soft: soft as usize,
                        soft_ms: seconds.saturating_mul(1000),
                    });
                }
            }
            LiveKey::LogLevel => crate::server::logging::set_level(value),
            LiveKey::MaxMemory
            | LiveKey::MaxMemoryPolicy
            | LiveKey::MaxClients
            | LiveKey::MaxMemorySamples
            | LiveKey::LatencyPercentiles
            | LiveKey::Encoding
            | LiveKey::RequirePass
            | LiveKey::BusyReplyThreshold
            | LiveKey::ProtectedMode
            | LiveKey::Persistence
            | LiveKey::Tls => {}
        }
    }

    /// What the shards apply for `key` set to `value`.
    fn shard_setting(&self, key: LiveKey, value: &str) -> Option<Setting> {
        Some(match key {
            LiveKey::MaxMemory => Setting::MaxMemory(number(value)),
            LiveKey::MaxMemoryPolicy => {
                Setting::MaxMemoryPolicy(value.parse::<EvictionPolicy>().ok()?)
            }
            LiveKey::MaxClients => Setting::MaxClients(number(value)),
            LiveKey::MaxMemorySamples => Setting::MaxMemorySamples(number(value)),
            LiveKey::NotifyKeyspaceEvents => {
                Setting::Notify(EventFlags::parse(value).unwrap_or_default())
            }
            LiveKey::Encoding => Setting::Encoding(self.encoding_limits()),
            LiveKey::TrackingTableMaxKeys => Setting::TrackingMaxKeys(number(value)),
            LiveKey::ProtectedMode => Setting::ProtectedMode(value == "yes"),
            _ => return None,
        })
    }

    /// CONFIG SET: checks every pair with Redis 7's rules (every name known, none twice, none
    /// immutable, every value valid), then stores them all. Returns what the shards apply.
    pub fn config_set(&self, pairs: &[(Bytes, Bytes)]) -> Result<Vec<Setting>, String> {
        self.config_set_with(pairs, &|step| match step {
            Glue::Tls(_) => Ok(()),
            Glue::Listen { .. } => Err("can't set immutable config".into()),
        })
    }

    /// [`Self::config_set`], with `glue` applying what this table cannot alone before
    /// anything is stored: the `tls-*` changes (canonical name and value; its error refuses
    /// them all, as Redis's TLS reload) and a new `port` or `bind` (see [`GlueApply`]).
    pub fn config_set_with(
        &self,
        pairs: &[(Bytes, Bytes)],
        glue: &GlueApply<'_>,
    ) -> Result<Vec<Setting>, String> {
        let mut found: Vec<(usize, &'static OptionSpec, &Bytes)> = Vec::with_capacity(pairs.len());
        let mut unknown = None;
        let mut refusal = None;
        let values = self.values();
        for (name, value) in pairs {
            let text = String::from_utf8_lossy(name);
            let Some((index, spec)) = table::find(&text) else {
                unknown.get_or_insert(text.into_owned());
                continue;
            };
            if unknown.is_some() || refusal.is_some() {
                continue;
            }
            if found.iter().any(|(seen, _, _)| *seen == index) {
                refusal = Some(failed(&text, "duplicate parameter"));
                continue;
            }
            found.push((index, spec, value));
        }
        if let Some(name) = unknown {
            return Err(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
        }
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        let mut next = values.clone();
        let mut changed = Vec::new();
        let mut tls_changes = Vec::new();
        let mut port = None;
        let mut bind = None;
        for (index, spec, raw) in found {
            let raw = String::from_utf8_lossy(raw).into_owned();
            // Redis splits a multi-argument value on single spaces.
            let args: Vec<String> = if is_multi_arg(spec.kind) {
                raw.split(' ').map(str::to_owned).collect()
            } else {
                vec![raw]
            };
            let value = spec.parse(&args).map_err(|why| failed(spec.name, &why))?;
            let current = values.get(index);
            if spec.name == "port" && value != current {
                // Applied last, by the glue (listening there), as Redis applies it: a port
                // it cannot listen on fails the whole CONFIG SET.
                port = Some(value.clone());
            }
            if spec.name == "bind" && value != current {
                bind = Some(value.clone());
            }
            let moves = spec.name == "port" || spec.name == "bind";
            let fixed = spec.has(IMMUTABLE) || spec.effect == Effect::Start;
            if fixed && !moves && (spec.has(IMMUTABLE) || value != current) {
                return Err(failed(spec.name, "can't set immutable config"));
            }
            if spec.effect == Effect::Live(LiveKey::Tls) {
                tls_changes.push((spec.name.to_owned(), value.clone()));
            }
            next.set(index, value);
            if let Effect::Live(key) = spec.effect {
                changed.push(key);
            }
        }
        if let Some((first, _)) = tls_changes.first() {
            if let Err(why) = glue(Glue::Tls(&tls_changes)) {
                tracing::warn!(%why, "CONFIG SET of TLS parameters refused");
                return Err(failed(
                    first,
                    "Unable to update TLS configuration. Check server logs.",
                ));
            }
        }
        if port.is_some() || bind.is_some() {
            let step = Glue::Listen {
                bind: bind.as_deref(),
                port: port.as_deref().map(number),
            };
            let name = if bind.is_some() { "bind" } else { "port" };
            glue(step).map_err(|why| failed(name, &why))?;
        }
        *self.lock() = next.clone();
        let mut settings = Vec::new();
        for (index, spec) in OPTIONS.iter().enumerate() {
            let Effect::Live(key) = spec.effect else {
                continue;
            };
            if !changed.contains(&key) {
                continue;
            }
            self.set_hot(key, next.get(index));
            if let Some(setting) = self.shard_setting(key, next.get(index)) {
                if !settings.contains(&setting) {
                    settings.push(setting);
                }
            }
        }
        Ok(settings)
    }
}

/// What a CONFIG SET asks of the glue before it stores anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glue<'a> {
    /// Apply these `tls-*` changes (canonical name and value), or refuse them all.
    Tls(&'a [(String, String)]),
    /// Listen at these addresses (`bind`'s value) and this port instead, each `None` where
    /// it stays. The error is the reason CONFIG SET gives: Redis's "Unable to listen on this
    /// port. Check server logs." when the port is taken, "Failed to bind to specified
    /// addresses." for addresses, "can't set immutable config" where the server cannot move
    /// its listeners while running.
    Listen {
        bind: Option<&'a str>,
        port: Option<u16>,
    },
}

/// Applies a [`Glue`] step of a CONFIG SET, or refuses it (the reason).
pub type GlueApply<'a> = dyn Fn(Glue<'_>) -> Result<(), String> + 'a;

fn failed(name: &str, why: &str) -> String {
    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(live: &LiveConfig, pairs: &[(&str, &str)]) -> Result<Vec<Setting>, String> {
        let pairs: Vec<(Bytes, Bytes)> = pairs
            .iter()
            .map(|(n, v)| (Bytes::from(n.to_string()), Bytes::from(v.to_string())))
            .collect();
        live.config_set(&pairs)
    }

    #[test]
    fn config_set_is_all_or_nothing() {
        let live = LiveConfig::default();
        assert_eq!(
            set(&live, &[("maxmemory", "1mb"), ("hz", "20")]),
            Ok(vec![Setting::MaxMemory(1 << 20)])
        );
        assert_eq!(live.get("maxmemory").as_deref(), Some("1048576"));
        assert_eq!(
            set(&live, &[("maxmemory", "5"), ("maxmemory-clients", "200%")]),
            Err(
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - \
                 percentage argument must be less or equal to 100"
                    .into()
            )
        );
        assert_eq!(live.get("maxmemory").as_deref(), Some("1048576"));
        assert!(set(&live, &[("maxmemory", "1"), ("maxmemory", "2")])
            .unwrap_err()
            .contains("duplicate parameter"));
        assert_eq!(
            set(&live, &[("nosuch", "1"), ("hz", "x")]),
            Err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'".into())
        );
        assert!(set(&live, &[("daemonize", "no")])
            .unwrap_err()
            .contains("can't set immutable config"));
        // Fixed at start here: its current value is accepted, another one refused.
        assert_eq!(set(&live, &[("port", "6379")]), Ok(vec![]));
        assert!(set(&live, &[("port", "1")]).is_err());
        // A new port is the glue's to apply, last: its refusal fails the whole CONFIG SET
        // (nothing stored), with the glue's reason.
        let pairs: Vec<(Bytes, Bytes)> = [("maxmemory", "7"), ("port", "1"), ("hz", "20")]
            .iter()
            .map(|(n, v)| (Bytes::from(*n), Bytes::from(*v)))
            .collect();
        let maxmemory = live.get("maxmemory").unwrap();
        let taken = |step: Glue<'_>| match step {
            Glue::Listen { port: Some(1), .. } => {
                Err("Unable to listen on this port. Check server logs.".into())
            }
            _ => Ok(()),
        };
        assert_eq!(
            live.config_set_with(&pairs, &taken),
            Err(
                "ERR CONFIG SET failed (possibly related to argument 'port') - \
                 Unable to listen on this port. Check server logs."
                    .into()
            )
        );
        assert_eq!(live.get("maxmemory").as_deref(), Some(maxmemory.as_str()));
        assert_eq!(live.get("port").as_deref(), Some("6379"));
        // Modifiable in Redis, fixed at start here (the cluster bus and its TLS start once).
        for name in ["tls-cluster", "tls-replication"] {
            assert_eq!(set(&live, &[(name, "no")]), Ok(vec![]), "{name}");
            assert!(set(&live, &[(name, "yes")]).is_err(), "{name}");
        }
    }

    #[test]
    fn hot_settings_follow() {
        let live = LiveConfig::default();
        set(
            &live,
            &[
                ("slowlog-log-slower-than", "0"),
                ("notify-keyspace-events", "KEA"),
                ("save", "3600 1 300 100"),
                ("client-output-buffer-limit", "pubsub 1mb 0 0"),
            ],
        )
        .unwrap();
        assert_eq!(live.hot.slowlog_slower_than_us.load(RELAXED), 0);
        assert_eq!(live.notify_flags().to_string(), "AKE");
        assert_eq!(live.get("save").as_deref(), Some("3600 1 300 100"));
        assert_eq!(live.pubsub_output_limit().hard, 1 << 20);
        set(&live, &[("save", "")]).unwrap();
        assert_eq!(live.get("save").as_deref(), Some(""));
    }
}
