//! What a replica refuses its own clients, checked by every connection before a request is
//! queued or run: writes on a read-only replica (`-READONLY`), commands not flagged `stale`
//! while the link is down and `replica-serve-stale-data` is `no` (`-MASTERDOWN`), and
//! commands not flagged `loading` while a snapshot from the master loads (`-LOADING`). The
//! master's own stream never passes here.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use bytes::Bytes;

use crate::command::Command;
use crate::config::LiveConfig;
use crate::reply::Reply;

#[derive(Debug)]
pub struct ReplicaGate {
    /// `replica` or `loading`: one load on a master's data path.
    any: AtomicBool,
    replica: AtomicBool,
    /// `replica-read-only` and `replica-serve-stale-data`, as configured.
    read_only: AtomicBool,
    serve_stale: AtomicBool,
    link_down: AtomicBool,
    /// Snapshot loads in flight: one on the single stream, up to one per shard on shard
    /// links (each shard loads its own part).
    loading: AtomicU32,
}

impl Default for ReplicaGate {
    fn default() -> Self {
        ReplicaGate {
            any: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            read_only: AtomicBool::new(true),
            serve_stale: AtomicBool::new(true),
            link_down: AtomicBool::new(true),
            loading: AtomicU32::new(0),
        }
    }
}

pub const READONLY: &str = "READONLY You can't write against a read only replica.";
pub const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";

impl ReplicaGate {
    /// Whether this node is a replica now.
    pub fn set_replica(&self, on: bool) {
        self.replica.store(on, Ordering::Relaxed);
        self.sync_any();
    }

    /// `replica-read-only` and `replica-serve-stale-data` (at start, after CONFIG SET).
    pub fn configure(&self, live: &LiveConfig) {
        let yes = |name: &str| live.get(name).as_deref() != Some("no");
        self.read_only
            .store(yes("replica-read-only"), Ordering::Relaxed);
        self.serve_stale
            .store(yes("replica-serve-stale-data"), Ordering::Relaxed);
    }

    /// Whether the link to the master is down.
    pub fn set_link_down(&self, down: bool) {
        self.link_down.store(down, Ordering::Relaxed);
    }

    /// A snapshot (or one shard's part of it) from the master begins loading (`true`) or
    /// ended (`false`): clients get `-LOADING` while any load is in flight.
    pub fn set_loading(&self, on: bool) {
        if on {
            self.loading.fetch_add(1, Ordering::Relaxed);
        } else {
            // Never below zero: an end without a begin is ignored.
            let _ = (self.loading)
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
        self.sync_any();
    }

    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed) > 0
    }

    /// Whether clients' writes are refused (a read-only replica): a script declaring writes
    /// does not start, a legacy script's write fails.
    pub fn refuses_writes(&self) -> bool {
        self.replica.load(Ordering::Relaxed) && self.read_only.load(Ordering::Relaxed)
    }

    fn sync_any(&self) {
        let any = self.replica.load(Ordering::Relaxed) || self.is_loading();
        self.any.store(any, Ordering::Relaxed);
    }

    /// The refusal for a client's request `args`, in Redis's order (READONLY, then
    /// MASTERDOWN, then LOADING); `None` on a master, and for what may run.
    /// Asked for every request: inlined, one load and a branch on a master.
    #[inline]
    pub fn refusal(&self, args: &[Bytes]) -> Option<Reply> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        self.refusal_now(args)
    }

    fn refusal_now(&self, args: &[Bytes]) -> Option<Reply> {
        let flags = Command::flags(args);
        if flags.is_empty() && Command::check_table(args).is_err() {
            // An unknown command or a wrong arity: its own error comes first.
            return None;
        }
        let has = |flag: &str| flags.contains(&flag);
        let replica = self.replica.load(Ordering::Relaxed);
        if replica && self.read_only.load(Ordering::Relaxed) && has("write") {
            return Some(Reply::error(READONLY));
        }
        if replica
            && self.link_down.load(Ordering::Relaxed)
            && !self.serve_stale.load(Ordering::Relaxed)
            && !has("stale")
        {
            return Some(Reply::error(MASTERDOWN));
        }
        if self.is_loading() && !has("loading") {
            return Some(Reply::error(LOADING));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn refusals_in_order() {
        let gate = ReplicaGate::default();
        let set = args(&["SET", "k", "v"]);
        let get = args(&["GET", "k"]);
        let info = args(&["INFO"]);
        assert_eq!(gate.refusal(&set), None);
        gate.set_replica(true);
        assert_eq!(gate.refusal(&set), Some(Reply::error(READONLY)));
        // The link is down but stale data is served by default.
        assert_eq!(gate.refusal(&get), None);
        let live = LiveConfig::default();
        live.set("replica-serve-stale-data", "no");
        gate.configure(&live);
        assert_eq!(gate.refusal(&get), Some(Reply::error(MASTERDOWN)));
        assert_eq!(gate.refusal(&info), None);
        gate.set_link_down(false);
        gate.set_loading(true);
        assert_eq!(gate.refusal(&get), Some(Reply::error(LOADING)));
        assert_eq!(gate.refusal(&set), Some(Reply::error(READONLY)));
        live.set("replica-read-only", "no");
        gate.configure(&live);
        assert_eq!(gate.refusal(&set), Some(Reply::error(LOADING)));
        gate.set_loading(false);
        gate.set_replica(false);
        assert_eq!(gate.refusal(&set), None);
    }

    #[test]
    fn loading_lasts_while_any_load_is_in_flight() {
        let gate = ReplicaGate::default();
        let get = args(&["GET", "k"]);
        gate.set_loading(true);
        gate.set_loading(true);
        gate.set_loading(false);
        assert_eq!(gate.refusal(&get), Some(Reply::error(LOADING)));
        gate.set_loading(false);
        assert_eq!(gate.refusal(&get), None);
        // An unmatched end does not wrap the count.
        gate.set_loading(false);
        gate.set_loading(true);
        assert!(gate.is_loading());
    }
}
