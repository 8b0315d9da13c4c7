//! Process-wide facts every shard reads: settings, start time, the client count.

use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::info::ServerInfo;
use crate::session::SessionConfig;

pub(crate) struct ServerShared {
    pub started: Instant,
    pub tcp_port: AtomicU16,
    pub aof_enabled: bool,
    pub cluster_enabled: bool,
    /// Changed at run time by CONFIG SET maxclients.
    pub maxclients: AtomicUsize,
    pub connected_clients: AtomicUsize,
    /// Redis's `total_connections_received` and `rejected_connections` (over `maxclients`).
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Requests waiting in a blocking pop, all shards together (see `blocking.rs`).
    pub blocked_clients: AtomicUsize,
    pub session: Arc<SessionConfig>,
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
            blocked_clients: self.blocked_clients.load(Ordering::Relaxed) as u64,
            aof_enabled: self.aof_enabled,
            cluster_enabled: self.cluster_enabled,
            os: os_name(),
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
        }
    }

    /// A CONFIG GET value: the glue records the effective settings there at start-up, and
    /// CONFIG SET keeps them current.
    fn parameter(&self, name: &str) -> Option<bytes::Bytes> {
        let (_, value) = self
            .session
            .parameters
            .matching(|n| n == name)
            .into_iter()
            .next()?;
        Some(value)
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

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.shared
            .connected_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
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
