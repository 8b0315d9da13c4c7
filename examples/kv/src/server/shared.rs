//! Process-wide facts every shard reads: settings, start time, the client count.

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
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
    /// Requests waiting in a blocking pop, all shards together (see `blocking.rs`).
    pub blocked_clients: AtomicUsize,
    pub session: Arc<SessionConfig>,
}

impl ServerShared {
    pub fn info(&self) -> ServerInfo {
        ServerInfo {
            process_id: std::process::id(),
            tcp_port: self.tcp_port.load(Ordering::Relaxed),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            connected_clients: self.connected_clients.load(Ordering::Relaxed) as u64,
            blocked_clients: self.blocked_clients.load(Ordering::Relaxed) as u64,
            aof_enabled: self.aof_enabled,
            cluster_enabled: self.cluster_enabled,
        }
    }

    /// Counts a new RESP client, unless `maxclients` are already connected.
    pub fn admit_client(self: &Arc<Self>) -> Option<ClientSlot> {
        let before = self.connected_clients.fetch_add(1, Ordering::Relaxed);
        if before >= self.maxclients.load(Ordering::Relaxed) {
            self.connected_clients.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
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
