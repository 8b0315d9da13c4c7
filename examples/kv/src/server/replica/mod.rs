//! The replica side of replication, on shard 0: REPLICAOF / SLAVEOF, ROLE, `--replicaof` at
//! start, and the link to the master ([`link`], over TCP, TLS or RDMA: [`stream`]) that loads its
//! snapshot ([`load`]) and applies its command stream.
//!
//! Process-wide facts (where the node replicates from, the link's state and offsets) live in
//! [`ReplicaShared`], read by INFO, ROLE and every shard (a replica's keys expire only when
//! its master says so, see [`ReplicaShared::expiry_view`]). The entry points for other code
//! (cluster failover) are [`replicate_from`] and [`promote`]. The link passes what it applied
//! on to this node's own replicas (a chain: `repl_master/follow.rs`), and [`hold_stream`]
//! holds it still where their snapshots are cut.

mod link;
mod load;
mod stream;

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use corewire::runtime::spawn_local;

use super::shard::{now_ms, Shard};
use super::sink::{Origin, SinkKey};
use crate::repl::replicaof::{ReplicaOf, ReplicaRequest};
use crate::repl::{MasterLinkInfo, MasterLinkState as LinkState, ReplicaGate};
use crate::reply::Reply;
use crate::store::ExpiryView;

/// Where this node replicates from, and the history its data follows.
#[derive(Debug, Default)]
struct Inner {
    /// `None`: a master.
    target: Option<(String, u16)>,
    /// Why the link's last attempt failed (empty: none since this REPLICAOF).
    last_error: String,
    /// The master's replication id the data follows (empty: never synced), which a
    /// partial resync asks to continue.
    master_replid: String,
}

/// The replica side's state, shared by every shard (in `ServerShared`).
#[derive(Debug)]
pub(crate) struct ReplicaShared {
    /// What client connections refuse while this node is a replica (the sessions hold it too).
    pub gate: Arc<ReplicaGate>,
    inner: Mutex<Inner>,
    /// Bumped by each REPLICAOF: a link of an older generation stops.
    generation: AtomicU64,
    is_replica: AtomicBool,
    state: AtomicU8,
    /// The link's sink on shard 0 (packed, plus one; 0: none): its commands see every key.
    master_sink: AtomicU64,
    read_offset: AtomicU64,
    applied_offset: AtomicU64,
    /// Unix ms of the last bytes from the master, and since when the link is down (0:
    /// never, or it is up).
    last_io_ms: AtomicU64,
    down_since_ms: AtomicU64,
    /// Whether the link has been up since this REPLICAOF (Redis reports -1 down-time
    /// before the first sync).
    was_up: AtomicBool,
    /// The link's attempts that failed since this REPLICAOF.
    failures: AtomicU64,
    /// Holds of the stream ([`hold_stream`]): while any, the link dispatches nothing.
    holds: AtomicU32,
    /// Nothing the link dispatched is running and every byte it applied went on to the
    /// master side's stream (see `repl::forward`).
    quiet: AtomicBool,
}

impl ReplicaShared {
    pub fn new(gate: Arc<ReplicaGate>) -> ReplicaShared {
        ReplicaShared {
            gate,
            inner: Mutex::new(Inner::default()),
            generation: AtomicU64::new(0),
            is_replica: AtomicBool::new(false),
            state: AtomicU8::new(LinkState::Connect.as_u8()),
            master_sink: AtomicU64::new(0),
            read_offset: AtomicU64::new(0),
            applied_offset: AtomicU64::new(0),
            last_io_ms: AtomicU64::new(0),
            down_since_ms: AtomicU64::new(0),
            was_up: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            holds: AtomicU32::new(0),
            quiet: AtomicBool::new(true),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update is a few assignments: a panic while holding it leaves it usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_replica(&self) -> bool {
        self.is_replica.load(Ordering::Relaxed)
    }

    /// How a command from `origin` treats expired keys: on a master they are deleted when
    /// met; on a replica the master's stream sees them all and clients see them as missing
    /// (nothing is deleted but by the master's DEL).
    pub fn expiry_view(&self, origin: &Origin) -> ExpiryView {
        if !self.is_replica() {
            ExpiryView::Delete
        } else if self.is_master_origin(origin) {
            ExpiryView::Keep
        } else {
            ExpiryView::Hide
        }
    }

    /// Whether `origin` is the link applying the master's stream.
    pub fn is_master_origin(&self, origin: &Origin) -> bool {
        let master = self.master_sink.load(Ordering::Relaxed);
        master != 0 && origin.shard == 0 && origin.sink.pack().wrapping_add(1) == master
    }

    fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Relaxed) == generation
    }

    fn target(&self) -> Option<(String, u16)> {
        self.lock().target.clone()
    }

    fn set_state(&self, state: LinkState) {
        let before = LinkState::from_u8(self.state.swap(state.as_u8(), Ordering::Relaxed));
        if state == LinkState::Connected {
            self.was_up.store(true, Ordering::Relaxed);
            self.down_since_ms.store(0, Ordering::Relaxed);
        } else if before == LinkState::Connected {
            self.down_since_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// What PSYNC asks to continue: the master's id and the next offset wanted.
    fn resume_point(&self) -> Option<(String, u64)> {
        let inner = self.lock();
        (!inner.master_replid.is_empty()).then(|| {
            (
                inner.master_replid.clone(),
                self.applied_offset.load(Ordering::Relaxed) + 1,
            )
        })
    }

    /// A full sync loaded the master's snapshot: its history from `offset` on.
    fn synced(&self, replid: String, offset: u64) {
        self.lock().master_replid = replid;
        self.set_offsets(offset, offset);
    }

    /// `+CONTINUE <new id>`: the master was promoted; its new id goes on from here.
    fn switched_history(&self, replid: String) {
        self.lock().master_replid = replid;
    }

    fn set_offsets(&self, read: u64, applied: u64) {
        self.read_offset.store(read, Ordering::Relaxed);
        self.applied_offset.store(applied, Ordering::Relaxed);
    }

    /// Whether the stream is held (the link dispatches nothing).
    fn held(&self) -> bool {
        self.holds.load(Ordering::Relaxed) > 0
    }

    fn set_quiet(&self, quiet: bool) {
        self.quiet.store(quiet, Ordering::Relaxed);
    }

    /// Whether the link to the master is up (a sub-replica may sync from this node).
    pub fn link_up(&self) -> bool {
        self.state() == LinkState::Connected
    }

    /// An attempt of the link failed (INFO's `master_link_failures` and `_last_error`).
    fn link_failed(&self, why: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.lock().last_error = why;
    }

    fn touched(&self) {
        self.last_io_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// INFO replication's replica fields (`None` on a master).
    pub fn info(&self, live: &crate::config::LiveConfig) -> Option<MasterLinkInfo> {
        let inner = self.lock();
        let (host, port) = inner.target.clone()?;
        let now = now_ms();
        let state = self.state();
        let last_io = self.last_io_ms.load(Ordering::Relaxed);
        let down_since = self.down_since_ms.load(Ordering::Relaxed);
        let yes = |name: &str| live.get(name).as_deref() != Some("no");
        Some(MasterLinkInfo {
            master_host: host,
            master_port: port,
            state,
            last_io_seconds_ago: (state == LinkState::Connected && last_io != 0)
                .then(|| now.saturating_sub(last_io) / 1000),
            down_since_seconds: (self.was_up.load(Ordering::Relaxed) && down_since != 0)
                .then(|| now.saturating_sub(down_since) / 1000),
            read_offset: self.read_offset.load(Ordering::Relaxed),
            applied_offset: self.applied_offset.load(Ordering::Relaxed),
            priority: live
                .get("replica-priority")
                .and_then(|v| v.parse().ok())
                .unwrap_or(100),
            read_only: yes("replica-read-only"),
            announced: yes("replica-announced"),
            replid: inner.master_replid.clone(),
            transport: stream::Transport::from_setting(live.get("repl-transport").as_deref())
                .name(),
            failures: self.failures.load(Ordering::Relaxed),
            last_error: inner.last_error.clone(),
        })
    }
}

/// REPLICAOF and ROLE, on shard 0. `None`: the reply comes later (`REPLICAOF NO ONE`
/// answers once the node streams its own writes, so none acknowledged after it is missing
/// from its replicas' stream).
pub(crate) fn run(shard: &Shard, origin: Origin, request: ReplicaRequest) -> Option<Reply> {
    Some(match request {
        ReplicaRequest::ReplicaOf(_) if shard.shared.cluster_enabled => {
            Reply::error("ERR REPLICAOF not allowed in cluster mode.")
        }
        ReplicaRequest::ReplicaOf(ReplicaOf::NoOne) => {
            promote_then(shard, Some(origin));
            return None;
        }
        ReplicaRequest::ReplicaOf(ReplicaOf::Master { host, port }) => {
            let replica = &shard.shared.replica;
            let same = replica
                .target()
                .is_some_and(|(h, p)| h.eq_ignore_ascii_case(&host) && p == port);
            if same {
                tracing::info!(
                    "REPLICAOF would result into synchronization with the master we are \
                     already connected with. No operation performed."
                );
                return Some(Reply::simple("OK Already connected to specified master"));
            }
            replicate_from(shard, host, port);
            Reply::ok()
        }
    })
}

/// Makes this node a replica of `host:port` (from shard 0): any previous link stops, a new
/// one starts; the data stays until the new master's snapshot replaces it (a partial resync
/// continues it when the new master shares its history).
pub(crate) fn replicate_from(shard: &Shard, host: String, port: u16) {
    let shared = shard.shared.clone();
    let replica = &shared.replica;
    let generation = replica.generation.fetch_add(1, Ordering::Relaxed) + 1;
    {
        let mut inner = replica.lock();
        if inner.target.is_none() {
            // A master following another: its own history (the master side's identity) is
            // what a partial resync can offer (the new master may share it).
            let identity = super::repl_master::identity();
            inner.master_replid = identity.replid;
            replica
                .applied_offset
                .store(identity.master_repl_offset, Ordering::Relaxed);
        }
        inner.target = Some((host.clone(), port));
        inner.last_error.clear();
    }
    replica.failures.store(0, Ordering::Relaxed);
    replica.is_replica.store(true, Ordering::Relaxed);
    replica.was_up.store(false, Ordering::Relaxed);
    replica.set_state(LinkState::Connect);
    sync_gate(&shared);
    wake_link(shard);
    tracing::info!(%host, port, "connecting to MASTER");
    let shard = super::shard::current();
    spawn_local(link::run(shard, generation));
}

/// `REPLICAOF NO ONE` (from shard 0): the link stops, the data stays, and this node starts
/// a history of its own (the master's id becomes its `replid2`, so replicas that followed
/// the same master can continue from it). The returned future ends once the node takes
/// writes; `None`: it is not a replica, or a promotion is already under way.
pub(crate) fn promote(shard: &Shard) -> Option<impl std::future::Future<Output = ()>> {
    let shared = shard.shared.clone();
    let replica = &shared.replica;
    replica.lock().target.take()?;
    replica.generation.fetch_add(1, Ordering::Relaxed);
    replica.set_state(LinkState::Connect);
    wake_link(shard);
    tracing::info!("MASTER MODE enabled (user request)");
    // The master side starts this node's own history (replid2 = the master's) once the
    // link's last bytes are passed on; only then are writes taken (a write before the
    // new history's start would reach no replica).
    Some(async move {
        super::repl_master::promote().await;
        // (Unless a REPLICAOF came meanwhile.)
        if shared.replica.lock().target.is_none() {
            shared.replica.is_replica.store(false, Ordering::Relaxed);
            sync_gate(&shared);
        }
    })
}

/// [`promote`], answering `answer` with `+OK` once the node streams its own writes.
fn promote_then(shard: &Shard, answer: Option<Origin>) {
    let Some(promoted) = promote(shard) else {
        if let Some(origin) = answer {
            shard.deliver(origin, Reply::ok());
        }
        return;
    };
    spawn_local(async move {
        promoted.await;
        if let Some(origin) = answer {
            super::shard::current().deliver(origin, Reply::ok());
        }
    });
}

/// While held, the master's stream is not applied (on shard 0): the data is then exactly
/// the stream up to the master side's `master_repl_offset`, where a sub-replica's snapshot
/// is cut (and where a promotion starts the new history).
pub(crate) struct StreamHold {
    shared: Arc<super::shared::ServerShared>,
}

/// Holds the master's stream still, once what the link dispatched has run and been passed
/// on (at once on a node whose link is not applying a stream).
pub(crate) async fn hold_stream(shard: &Shard) -> StreamHold {
    let shared = shard.shared.clone();
    shared.replica.holds.fetch_add(1, Ordering::Relaxed);
    let hold = StreamHold { shared };
    wake_link(shard);
    while !hold.shared.replica.quiet.load(Ordering::Relaxed) {
        corewire::runtime::sleep(Duration::from_millis(1)).await;
    }
    hold
}

impl Drop for StreamHold {
    fn drop(&mut self) {
        self.shared.replica.holds.fetch_sub(1, Ordering::Relaxed);
        wake_link(&super::shard::current());
    }
}

/// The link's sink on this shard (0), woken so it sees a new generation at once.
fn wake_link(shard: &Shard) {
    let packed = shard.shared.replica.master_sink.load(Ordering::Relaxed);
    if packed != 0 {
        if let Some(sink) = shard.sink(SinkKey::unpack(packed - 1)) {
            sink.kill();
        }
    }
}

/// The sessions' gate after a change of role, link or configuration.
pub(crate) fn sync_gate(shared: &super::shared::ServerShared) {
    let replica = &shared.replica;
    replica.gate.configure(&shared.session.live);
    replica
        .gate
        .set_link_down(replica.state() != LinkState::Connected);
    replica.gate.set_replica(replica.is_replica());
}

/// `--replicaof host port` / `replicaof` in the configuration file: start replicating once
/// the shards run (on shard 0).
pub(crate) fn start_configured(shard: &Rc<Shard>) {
    let Some(value) = shard.shared.session.live.get("replicaof") else {
        return;
    };
    let words: Vec<bytes::Bytes> = value
        .split_ascii_whitespace()
        .map(|w| bytes::Bytes::from(w.to_owned()))
        .collect();
    if words.is_empty() {
        return;
    }
    match crate::repl::replicaof::parse_target(&words) {
        Ok(ReplicaOf::Master { host, port }) => replicate_from(shard, host, port),
        Ok(ReplicaOf::NoOne) => {}
        Err(error) => tracing::error!(%value, %error, "bad replicaof setting"),
    }
}
