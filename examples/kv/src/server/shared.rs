//! Process-wide facts every shard reads: settings, start time, the client count.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::sink::SinkKey;
use crate::info::ServerInfo;
use crate::session::SessionConfig;

pub(crate) struct ServerShared {
    pub started: Instant,
    pub tcp_port: AtomicU16,
    /// The plaintext RESP listener (CONFIG SET port moves it).
    pub resp: super::resp_listener::RespListener,
    pub aof_enabled: bool,
    pub cluster_enabled: bool,
    /// Changed at run time by CONFIG SET maxclients.
    pub maxclients: AtomicUsize,
    pub connected_clients: AtomicUsize,
    /// Redis's `total_connections_received` and `rejected_connections` (over `maxclients`).
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Requests waiting in a blocking pop, all shards together (see `blocking.rs`); INFO
    /// adds those CLIENT PAUSE holds back (`ClientsShared::postponed`).
    pub blocked_clients: AtomicUsize,
    pub session: Arc<SessionConfig>,
    /// Redis's protected mode (see `protected.rs`); CONFIG SET protected-mode changes it.
    pub protected_mode: AtomicBool,
    /// The TLS port's and cluster bus's TLS, when configured.
    pub tls: Option<Arc<super::tls::KvTls>>,
    /// Closed (or killed) connections whose blocked waits on other shards are not cancelled
    /// there yet (see `blocking.rs`).
    pub cancelling: CancellingSinks,
    /// SHUTDOWN asks the process to stop here.
    pub stop: StopRequests,
    /// SLOWLOG entries' ids, increasing over the whole node.
    pub slowlog_ids: AtomicU64,
    /// Client tracking: the programs (scripts) running for a client, so their writes count
    /// as the client's own (NOLOOP).
    pub acting_for: super::tracking::ActingFor,
    /// The script cache, the function libraries and the scripts running now.
    pub scripting: super::script::ScriptingShared,
    /// SAVE/BGSAVE and the save points (see `rdb_save.rs`).
    pub rdb: super::rdb_save::RdbShared,
    /// The replica side of replication (see `replica`).
    pub replica: super::replica::ReplicaShared,
    /// Replication's state for every shard to read (see `repl_master.rs`).
    pub repl: super::repl_master::ReplShared,
}

/// Asks whoever owns the server (the binary's main thread) to stop it: a signal handler or
/// SHUTDOWN requests, the owner waits.
#[derive(Clone, Default)]
pub struct StopRequests(Arc<(Mutex<bool>, std::sync::Condvar)>, Arc<AtomicBool>);

impl StopRequests {
    /// Marks that an owner waits on these requests (SHUTDOWN is refused otherwise).
    pub fn own(&self) {
        self.1.store(true, Ordering::Relaxed);
    }

    /// Whether an owner waits on these requests.
    pub fn is_owned(&self) -> bool {
        self.1.load(Ordering::Relaxed)
    }

    /// Requests a stop if an owner waits for it; whether one does.
    pub fn request_if_owned(&self) -> bool {
        let owned = self.1.load(Ordering::Relaxed);
        if owned {
            self.request();
        }
        owned
    }

    pub fn request(&self) {
        let (requested, wake) = &*self.0;
        *requested.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
    }

    pub fn is_requested(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks until a stop is requested.
    pub fn wait(&self) {
        let (requested, wake) = &*self.0;
        let mut done = requested.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            done = wake.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Connections that closed with blocked waits, until every other shard has applied their
/// cancel. The cancels travel through the forwarding queues, so a push that another
/// connection sent after it saw the close (CLIENT KILL's reply) can reach the key's shard
/// first: that shard looks here before it serves a waiter of another shard, so no item is
/// popped for a client that is gone. One entry per such close, removed by the last shard
/// that applies its cancel: bounded by the cancels in flight.
#[derive(Default)]
pub(crate) struct CancellingSinks(Mutex<HashMap<(usize, SinkKey), usize>>);

impl CancellingSinks {
    /// Connection `sink` of `shard` closed; `others` shards are being told.
    pub fn begin(&self, shard: usize, sink: SinkKey, others: usize) {
        if others > 0 {
            self.lock().insert((shard, sink), others);
        }
    }

    /// Whether waiters of `sink` (of `shard`) belong to a connection that is gone.
    pub fn is_gone(&self, shard: usize, sink: SinkKey) -> bool {
        self.lock().contains_key(&(shard, sink))
    }

    /// One more shard applied the cancel of `sink`.
    pub fn applied(&self, shard: usize, sink: SinkKey) {
        let mut map = self.lock();
        if let Some(left) = map.get_mut(&(shard, sink)) {
            *left -= 1;
            if *left == 0 {
                map.remove(&(shard, sink));
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, SinkKey), usize>> {
        // A panic while holding it leaves the map consistent (single inserts and removes).
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ServerShared {
    pub fn info(&self) -> ServerInfo {
        let cpu = cpu_times_us();
        ServerInfo {
            process_id: std::process::id(),
            tcp_port: self.tcp_port.load(Ordering::Relaxed),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            connected_clients: self.connected_clients.load(Ordering::Relaxed) as u64,
            total_connections_received: self.total_connections.load(Ordering::Relaxed),
            rejected_connections: self.rejected_connections.load(Ordering::Relaxed),
            // Blocking pops and the requests CLIENT PAUSE holds back, as Redis counts both.
            blocked_clients: (self.blocked_clients.load(Ordering::Relaxed)
                + self.session.clients.postponed()) as u64,
            aof_enabled: self.aof_enabled,
            cluster_enabled: self.cluster_enabled,
            os: os_name(),
            multiplexing_api: corewire::runtime::current_backend()
                .map_or("unknown", |b| b.name())
                .to_string(),
            maxclients: self.maxclients.load(Ordering::Relaxed) as u64,
            maxmemory: self
                .parameter("maxmemory")
                .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
                .unwrap_or(0),
            maxmemory_policy: self.parameter("maxmemory-policy").map_or_else(
                || "noeviction".into(),
                |v| String::from_utf8_lossy(&v).into_owned(),
            ),
            used_cpu_sys_us: cpu.0,
            used_cpu_user_us: cpu.1,
            run_id: run_id().to_owned(),
            executable: std::env::current_exe()
                .map(|path| path.display().to_string())
                .unwrap_or_default(),
            config_file: (self.session.live.config_file)
                .as_ref()
                .map(|path| path.display().to_string())
                .unwrap_or_default(),
            used_memory_rss: rss_bytes(),
            heap: crate::info::HeapBytes::now(),
            tracking_clients: (self.session.live.hot.tracking_clients).load(Ordering::Relaxed),
            server_time_usec: super::introspect::unix_us(),
            latency_percentiles: self.session.live.latency_percentiles(),
            latency_tracking: (self.session.live.hot.latency_tracking).load(Ordering::Relaxed),
            paused: false,
            cached_scripts: self.scripting.cached_scripts() as u64,
            rdb: self.rdb.info(),
            master_link: self.replica.info(&self.session.live),
            replication: Some({
                // The live setting, as the write path holds writes to it (the hub's copy
                // follows at its next tick).
                let mut info = self.repl.info();
                info.min_replicas_to_write =
                    (self.session.live.hot.min_replicas_to_write).load(Ordering::Relaxed);
                // On shard links the node's offset is the sum of its links' (no single
                // stream passes through the master side to count it).
                if let Some(link) = (self.replica.info(&self.session.live))
                    .filter(|link| link.shard_offsets.is_some())
                {
                    info.identity.master_repl_offset = link.applied_offset;
                }
                info
            }),
        }
    }

    /// A CONFIG GET value: the glue records the effective settings there at start-up, and
    /// CONFIG SET keeps them current.
    fn parameter(&self, name: &str) -> Option<bytes::Bytes> {
        self.session.live.get(name).map(bytes::Bytes::from)
    }

    /// CONFIG RESETSTAT's part here: the connection counters INFO reports.
    pub fn reset_stats(&self) {
        self.total_connections.store(0, Ordering::Relaxed);
        self.rejected_connections.store(0, Ordering::Relaxed);
    }

    /// Counts a new RESP client, unless `maxclients` are already connected.
    pub fn admit_client(self: &Arc<Self>) -> Option<ClientSlot> {
        let before = self.connected_clients.fetch_add(1, Ordering::Relaxed);
        if before >= self.maxclients.load(Ordering::Relaxed) {
            self.connected_clients.fetch_sub(1, Ordering::Relaxed);
            self.rejected_connections.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        self.total_connections.fetch_add(1, Ordering::Relaxed);
        Some(ClientSlot {
            shared: self.clone(),
        })
    }
}

/// One admitted client; frees its place when dropped.
pub(crate) struct ClientSlot {
    shared: Arc<ServerShared>,
}

impl ClientSlot {
    pub fn shared(&self) -> &Arc<ServerShared> {
        &self.shared
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.shared
            .connected_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Redis's `run_id`: 40 random hex digits, fixed for the life of the process.
fn run_id() -> &'static str {
    static RUN_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RUN_ID.get_or_init(|| (0..40).map(|_| fastrand::digit(16)).collect())
}

/// The resident set size, from /proc/self/statm (0 when unavailable).
fn rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// This process's (system, user) CPU time in microseconds; zeros if getrusage fails.
fn cpu_times_us() -> (u64, u64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return (0, 0);
    };
    let us = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64;
    (us(usage.system_time()), us(usage.user_time()))
}

/// Redis's `os` field: `sysname release machine` from uname(2).
fn os_name() -> String {
    match nix::sys::utsname::uname() {
        Ok(name) => format!(
            "{} {} {}",
            name.sysname().to_string_lossy(),
            name.release().to_string_lossy(),
            name.machine().to_string_lossy()
        ),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_sink_is_gone_until_every_other_shard_applied_its_cancel() {
        let c = CancellingSinks::default();
        let (a, b) = (SinkKey::for_test(3, 1), SinkKey::for_test(3, 2));
        c.begin(0, a, 2);
        assert!(c.is_gone(0, a));
        // The same slot reused (a new generation), and the same key on another shard, are
        // other connections.
        assert!(!c.is_gone(0, b));
        assert!(!c.is_gone(1, a));
        c.applied(0, a);
        assert!(c.is_gone(0, a), "one of two shards applied it");
        c.applied(0, a);
        assert!(!c.is_gone(0, a));
        assert!(
            c.0.lock().unwrap().is_empty(),
            "the entry went with the last cancel"
        );
        // A late or unknown cancel changes nothing; a one-shard server tells nobody.
        c.applied(0, a);
        c.begin(0, b, 0);
        assert!(!c.is_gone(0, b));
        assert!(c.0.lock().unwrap().is_empty());
    }
}
