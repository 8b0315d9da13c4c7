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

mod barriers;
mod link;
mod load;
mod shard_links;
mod stream;

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use corewire::runtime::spawn_local;

use super::shard::{now_ms, Shard};
use super::sink::{Origin, SinkKey};
use crate::repl::replicaof::{ReplicaOf, ReplicaRequest};
use crate::repl::{MasterLinkInfo, MasterLinkState as LinkState, ReplicaGate};
use crate::reply::Reply;
use crate::store::ExpiryView;

/// Where this node replicates from.
#[derive(Debug, Default)]
struct Inner {
    /// `None`: a master.
    target: Option<(String, u16)>,
    /// Why the link's last attempt failed (empty: none since this REPLICAOF).
    last_error: String,
}

/// One stream link's state: the single stream's (on shard 0), or shard `i`'s own link on
/// shard links (on shard `i`).
#[derive(Debug)]
pub(super) struct LinkSlot {
    state: AtomicU8,
    /// The link's sink on its shard (packed, plus one; 0: none): its commands see every key.
    master_sink: AtomicU64,
    read_offset: AtomicU64,
    applied_offset: AtomicU64,
    /// The master's replication id this link's data follows (empty: never synced), which a
    /// partial resync asks to continue.
    replid: Mutex<String>,
}

impl LinkSlot {
    fn new() -> LinkSlot {
        LinkSlot {
            state: AtomicU8::new(LinkState::Connect.as_u8()),
            master_sink: AtomicU64::new(0),
            read_offset: AtomicU64::new(0),
            applied_offset: AtomicU64::new(0),
            replid: Mutex::new(String::new()),
        }
    }

    fn replid(&self) -> MutexGuard<'_, String> {
        // Only ever replaced whole: a panic while holding it leaves it usable.
        self.replid.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Forgets the history (the other kind of stream replaced it).
    fn forget(&self) {
        self.replid().clear();
        self.read_offset.store(0, Ordering::Relaxed);
        self.applied_offset.store(0, Ordering::Relaxed);
    }
}

/// Which stream link: the single stream, or shard `i`'s own link (one of `n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    Single,
    Shard { i: usize, n: usize },
}

/// The replica side's state, shared by every shard (in `ServerShared`).
///
/// With shard links (`repl::shards`), each replica shard's link has its own state, resume
/// point and offsets ([`LinkSlot`]); the node-level view is their aggregate: the link is up
/// only when every shard's is, and its offsets are the sum of the shards' (as the master's
/// `master_repl_offset` is on shard links: not a position in any one stream). INFO's
/// `slave_shard_links` and `slave_shard_repl_offsets` (`:`-separated) list the shards'
/// applied offsets.
#[derive(Debug)]
pub(crate) struct ReplicaShared {
    /// What client connections refuse while this node is a replica (the sessions hold it too).
    pub gate: Arc<ReplicaGate>,
    inner: Mutex<Inner>,
    /// Bumped by each REPLICAOF: a link of an older generation stops.
    generation: AtomicU64,
    is_replica: AtomicBool,
    single: LinkSlot,
    /// Per shard, its own link's state on shard links.
    shard_slots: Box<[LinkSlot]>,
    /// The shard links in use (0: the single stream).
    shard_links: AtomicUsize,
    /// Shard link tasks running (a promotion waits for them to end).
    shard_tasks: AtomicUsize,
    /// A shard's link was refused: every shard link ends (the single stream follows).
    links_ended: AtomicBool,
    /// A sub-replica asked this node for a stream: it takes the single stream, which it
    /// can pass on (shard links cannot be), until the next REPLICAOF.
    single_only: AtomicBool,
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
    /// Shard links' transaction parts held at their barriers ([`barriers`]).
    barriers: barriers::Barriers,
    /// The shard links still to load their part of the master's cut (a bit per shard):
    /// the node answers `-LOADING` until every link loaded the same cut.
    cut_pending: Mutex<u64>,
}

impl ReplicaShared {
    pub fn new(gate: Arc<ReplicaGate>, shards: usize) -> ReplicaShared {
        ReplicaShared {
            gate,
            inner: Mutex::new(Inner::default()),
            generation: AtomicU64::new(0),
            is_replica: AtomicBool::new(false),
            single: LinkSlot::new(),
            shard_slots: (0..shards).map(|_| LinkSlot::new()).collect(),
            shard_links: AtomicUsize::new(0),
            shard_tasks: AtomicUsize::new(0),
            links_ended: AtomicBool::new(false),
            single_only: AtomicBool::new(false),
            last_io_ms: AtomicU64::new(0),
            down_since_ms: AtomicU64::new(0),
            was_up: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            holds: AtomicU32::new(0),
            quiet: AtomicBool::new(true),
            barriers: barriers::Barriers::new(shards),
            cut_pending: Mutex::new(0),
        }
    }

    fn slot(&self, which: Which) -> &LinkSlot {
        match which {
            Which::Single => &self.single,
            Which::Shard { i, .. } => &self.shard_slots[i],
        }
    }

    /// The shard links in use (0: the single stream).
    fn links(&self) -> usize {
        self.shard_links.load(Ordering::Relaxed)
    }

    /// The slots the node-level view aggregates.
    fn active(&self) -> &[LinkSlot] {
        match self.links() {
            0 => std::slice::from_ref(&self.single),
            n => &self.shard_slots[..n.min(self.shard_slots.len())],
        }
    }

    /// Whether this node follows its master over shard links.
    pub fn on_shard_links(&self) -> bool {
        self.links() > 0
    }

    /// A sub-replica asked for a stream: shard links (if in use) give way to the single
    /// stream, which this node can pass on.
    pub fn want_single_stream(&self) {
        self.single_only.store(true, Ordering::Relaxed);
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

    /// Whether `origin` is a link applying the master's stream: the single stream's (on
    /// shard 0) or the shard link of the shard it runs on.
    pub fn is_master_origin(&self, origin: &Origin) -> bool {
        let packed = origin.sink.pack().wrapping_add(1);
        let is = |slot: &LinkSlot| slot.master_sink.load(Ordering::Relaxed) == packed;
        (origin.shard == 0 && is(&self.single))
            || self.shard_slots.get(origin.shard).is_some_and(is)
    }

    fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Relaxed) == generation
    }

    /// Whether link `which` of REPLICAOF `generation` goes on: a shard's only while the
    /// node stays on shard links (a refused shard link or a sub-replica ends them all).
    fn still(&self, which: Which, generation: u64) -> bool {
        self.is_current(generation)
            && (which == Which::Single
                || !(self.single_only.load(Ordering::Relaxed)
                    || self.links_ended.load(Ordering::Relaxed)))
    }

    fn target(&self) -> Option<(String, u16)> {
        self.lock().target.clone()
    }

    fn set_state(&self, state: LinkState) {
        self.set_link_state(Which::Single, state);
    }

    /// One link's state; the node's (see [`Self::state`]) follows.
    fn set_link_state(&self, which: Which, state: LinkState) {
        let before = self.state();
        self.slot(which)
            .state
            .store(state.as_u8(), Ordering::Relaxed);
        let state = self.state();
        if state == LinkState::Connected {
            self.was_up.store(true, Ordering::Relaxed);
            self.down_since_ms.store(0, Ordering::Relaxed);
        } else if before == LinkState::Connected {
            self.down_since_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    /// The node's link state: on shard links, connected only when every shard's link is,
    /// else the least advanced link's state.
    fn state(&self) -> LinkState {
        (self.active().iter().map(LinkSlot::state))
            .min_by_key(|s| s.as_u8())
            .unwrap_or_default()
    }

    /// What a link's PSYNC asks to continue: the master's id and the next offset wanted.
    fn resume_point(&self, which: Which) -> Option<(String, u64)> {
        let slot = self.slot(which);
        let replid = slot.replid().clone();
        (!replid.is_empty()).then(|| (replid, slot.applied_offset.load(Ordering::Relaxed) + 1))
    }

    /// A full sync loaded the master's snapshot (or shard's part): its history from
    /// `offset` on.
    fn synced(&self, which: Which, replid: String, offset: u64) {
        *self.slot(which).replid() = replid;
        self.set_offsets(which, offset, offset);
    }

    /// `+CONTINUE <new id>`: the master was promoted; its new id goes on from here.
    fn switched_history(&self, which: Which, replid: String) {
        *self.slot(which).replid() = replid;
    }

    fn set_offsets(&self, which: Which, read: u64, applied: u64) {
        let slot = self.slot(which);
        slot.read_offset.store(read, Ordering::Relaxed);
        slot.applied_offset.store(applied, Ordering::Relaxed);
    }

    fn applied(&self, which: Which) -> u64 {
        self.slot(which).applied_offset.load(Ordering::Relaxed)
    }

    /// The node takes shard links (`n`) or the single stream (0). The other kind's history
    /// is forgotten: its offsets say nothing of what the new kind applies, so a later
    /// switch back syncs in full.
    fn use_shard_links(&self, n: usize) {
        self.shard_links.store(n, Ordering::Relaxed);
        if n == 0 {
            self.shard_slots.iter().for_each(LinkSlot::forget);
        } else {
            self.single.forget();
        }
    }

    fn cut_pending(&self) -> MutexGuard<'_, u64> {
        // Only ever a few bit operations: a panic while holding it leaves it usable.
        self.cut_pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shard link `i` of `n` got `+FULLRESYNC`: the master cut every link of this node
    /// together (its round), so every link loads a part of it before the node serves
    /// reads again. Its old resume point is gone: it must not continue the old stream.
    fn cut_began(&self, i: usize, n: usize) {
        self.shard_slots[i].forget();
        let mut pending = self.cut_pending();
        if *pending == 0 {
            *pending = u64::MAX >> (64 - n.clamp(1, 64));
            self.gate.set_loading(true);
        }
        *pending |= 1u64.checked_shl(i as u32).unwrap_or(0);
    }

    /// Shard link `i` loaded its part of the cut.
    fn cut_loaded(&self, i: usize) {
        let mut pending = self.cut_pending();
        let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
        if *pending & bit != 0 {
            *pending &= !bit;
            if *pending == 0 {
                self.gate.set_loading(false);
            }
        }
    }

    /// Whether shard link `i` is still to load its part of a cut (it cannot continue its
    /// old stream: the other links loaded a later cut).
    fn cut_awaits(&self, i: usize) -> bool {
        *self.cut_pending() & 1u64.checked_shl(i as u32).unwrap_or(0) != 0
    }

    /// The shard links ended: no cut is awaited any more.
    fn cut_abandoned(&self) {
        let mut pending = self.cut_pending();
        if *pending != 0 {
            *pending = 0;
            self.gate.set_loading(false);
        }
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
        let active = self.active();
        let sum = |offset: fn(&LinkSlot) -> &AtomicU64| -> u64 {
            active
                .iter()
                .map(|s| offset(s).load(Ordering::Relaxed))
                .sum()
        };
        // On shard links the id shown is shard 0's link's (every shard's stream began
        // under the master's id of that time).
        let replid = active
            .first()
            .map(|s| s.replid().clone())
            .unwrap_or_default();
        let shard_offsets = self.on_shard_links().then(|| {
            (active.iter())
                .map(|s| s.applied_offset.load(Ordering::Relaxed))
                .collect()
        });
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
            read_offset: sum(|s| &s.read_offset),
            applied_offset: sum(|s| &s.applied_offset),
            priority: live
                .get("replica-priority")
                .and_then(|v| v.parse().ok())
                .unwrap_or(100),
            read_only: yes("replica-read-only"),
            announced: yes("replica-announced"),
            replid,
            shard_offsets,
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
            *replica.single.replid() = identity.replid;
            (replica.single.applied_offset).store(identity.master_repl_offset, Ordering::Relaxed);
        }
        inner.target = Some((host.clone(), port));
        inner.last_error.clear();
    }
    replica.failures.store(0, Ordering::Relaxed);
    // Each REPLICAOF offers shard links again (a sub-replica's wish held for the last).
    replica.single_only.store(false, Ordering::Relaxed);
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
/// on (at once on a node whose link is not applying a stream). Shard links do not hold:
/// this waits until they ended (a promotion stopped them; a sub-replica's sync made the
/// node go back to the single stream, see [`ReplicaShared::want_single_stream`]).
pub(crate) async fn hold_stream(shard: &Shard) -> StreamHold {
    let shared = shard.shared.clone();
    shared.replica.holds.fetch_add(1, Ordering::Relaxed);
    let hold = StreamHold { shared };
    wake_link(shard);
    let replica = &hold.shared.replica;
    while !replica.quiet.load(Ordering::Relaxed) || replica.shard_tasks.load(Ordering::Relaxed) > 0
    {
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

/// The links' sinks (the single stream's here on shard 0, each shard link's on its
/// shard), woken so they see a new generation at once.
fn wake_link(shard: &Shard) {
    wake_sink(shard, &shard.shared.replica.single);
    for (i, slot) in shard.shared.replica.shard_slots.iter().enumerate() {
        if slot.master_sink.load(Ordering::Relaxed) == 0 {
            continue;
        }
        if i == shard.id {
            wake_sink(shard, slot);
        } else {
            spawn_local(corewire::runtime::submit_to(i, move || async move {
                let here = super::shard::current();
                wake_sink(&here, &here.shared.replica.shard_slots[i]);
            }));
        }
    }
}

fn wake_sink(shard: &Shard, slot: &LinkSlot) {
    let packed = slot.master_sink.load(Ordering::Relaxed);
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
