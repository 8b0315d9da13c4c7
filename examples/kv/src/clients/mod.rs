//! The CLIENT family and what connections share: CLIENT's table rows, arguments and requests
//! ([`command`]); CLIENT LIST / INFO / KILL lines and filters (`list`); client-side caching
//! ([`tracking`]); and the state every connection of a server sees ([`ClientsShared`]: CLIENT
//! PAUSE, and the directory of connections by id that CLIENT TRACKING REDIRECT and CLIENT
//! UNBLOCK look clients up in). The connection's own part is `session/client.rs`, the
//! shard's `server/clients.rs`.

pub mod command;
mod list;
pub mod tracking;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub use command::{ClientRequest, ClientsBroadcast, ClientsOp, LibAttribute};
pub use list::{ClientFlags, ClientLine, ClientType, KillFilter, ListQuery};

/// Where a connection lives: its shard and the glue's handle for it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientAddress {
    pub shard: usize,
    pub handle: u64,
}

/// What every connection of a server shares (one per server, in an `Arc`).
#[derive(Debug, Default)]
pub struct ClientsShared {
    /// CLIENT PAUSE: until when (Unix ms; 0: not paused), and whether every command waits
    /// (ALL) or only those that write (WRITE).
    pause_until_ms: AtomicU64,
    pause_all: AtomicBool,
    /// Requests CLIENT PAUSE holds back now, all shards together: INFO's `blocked_clients`
    /// counts them, as Redis counts its postponed clients (see [`PauseHold`]).
    postponed: AtomicUsize,
    /// Connected clients by id (a mutex: touched at connect, close and by the commands that
    /// name a client, never per request).
    directory: Mutex<HashMap<u64, ClientAddress>>,
}

/// Relaxed: each flag is read on its own; a pause is seen at the next request.
const RELAXED: Ordering = Ordering::Relaxed;

impl ClientsShared {
    /// CLIENT PAUSE: the later end wins; the new mode replaces the old one.
    pub fn pause(&self, until_ms: u64, all: bool) {
        self.pause_until_ms.fetch_max(until_ms, RELAXED);
        self.pause_all.store(all, RELAXED);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        self.pause_until_ms.store(0, RELAXED);
    }

    /// Whether a pause is in force at `now_ms` (one load: what every request checks first).
    pub fn is_paused(&self, now_ms: u64) -> bool {
        self.pause_until_ms.load(RELAXED) > now_ms
    }

    /// Until when a command waits at `now_ms` (`writes`: whether it writes or may
    /// propagate, what a WRITE pause holds), if it does.
    pub fn paused_until(&self, now_ms: u64, writes: bool) -> Option<u64> {
        let until = self.pause_until_ms.load(RELAXED);
        (until > now_ms && (writes || self.pause_all.load(RELAXED))).then_some(until)
    }

    /// Holds back a request until `until_ms` (counted while the hold lives).
    pub fn hold(self: &Arc<Self>, until_ms: u64) -> PauseHold {
        self.postponed.fetch_add(1, RELAXED);
        PauseHold {
            clients: self.clone(),
            until_ms,
        }
    }

    /// Requests held back by CLIENT PAUSE now.
    pub fn postponed(&self) -> usize {
        self.postponed.load(RELAXED)
    }

    fn directory(&self) -> std::sync::MutexGuard<'_, HashMap<u64, ClientAddress>> {
        // One insert or remove per use: a panic while holding it leaves it whole.
        self.directory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A connection opened.
    pub fn register(&self, id: u64, address: ClientAddress) {
        self.directory().insert(id, address);
    }

    /// A connection closed.
    pub fn unregister(&self, id: u64) {
        self.directory().remove(&id);
    }

    /// Where client `id` is, if connected.
    pub fn find(&self, id: u64) -> Option<ClientAddress> {
        self.directory().get(&id).copied()
    }
}

/// A request CLIENT PAUSE holds back: counted in [`ClientsShared::postponed`] from its
/// making until it is dropped (released, or its connection gone), so no path forgets it.
#[derive(Debug)]
pub struct PauseHold {
    clients: Arc<ClientsShared>,
    /// Until when the pause lasts (Unix ms), as seen when the request was held.
    pub until_ms: u64,
}

impl Drop for PauseHold {
    fn drop(&mut self) {
        self.clients.postponed.fetch_sub(1, RELAXED);
    }
}

/// Redis's `may_replicate` commands a client or script sends (the flag is hidden from
/// COMMAND, so named here): a WRITE pause holds them, a read-only script may not call them.
pub fn may_replicate(name: &str) -> bool {
    matches!(name, "pfcount" | "publish" | "spublish")
}

/// Whether a command waits while writes are paused: Redis's `write` and `may_replicate`
/// commands (the latter are hidden from COMMAND, so named here). A script that declares its
/// flags is judged by them instead (Redis's `scriptFlagsToCmdFlags`): `script_writes` says,
/// given its body, SHA1 or function name, whether it may write.
pub fn held_by_write_pause(name: &str, script_writes: impl FnOnce() -> bool) -> bool {
    match name {
        "eval" | "evalsha" | "fcall" => script_writes(),
        name if may_replicate(name) => true,
        _ => crate::introspect::meta::find(name).is_some_and(|meta| meta.has_flag("write")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_and_directory() {
        let shared = ClientsShared::default();
        assert_eq!(shared.paused_until(0, true), None);
        shared.pause(1_000, false);
        assert_eq!(shared.paused_until(500, true), Some(1_000));
        assert_eq!(shared.paused_until(500, false), None);
        shared.pause(800, true);
        assert_eq!(shared.paused_until(500, false), Some(1_000));
        assert_eq!(shared.paused_until(1_001, true), None);
        shared.unpause();
        assert_eq!(shared.paused_until(500, true), None);
        let at = ClientAddress {
            shard: 1,
            handle: 7,
        };
        shared.register(3, at);
        assert_eq!(shared.find(3), Some(at));
        shared.unregister(3);
        assert_eq!(shared.find(3), None);
        let never = || -> bool { unreachable!("not a script") };
        assert!(held_by_write_pause("set", never) && held_by_write_pause("publish", never));
        assert!(!held_by_write_pause("get", never));
        assert!(held_by_write_pause("eval", || true) && !held_by_write_pause("fcall", || false));
    }
}
