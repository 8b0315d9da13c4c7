//! The hub on shard 0: the stream's backlog, every replica's queue and state, WAIT, the
//! timer (pings, soft output limits, settings), and what the full sync asks of it.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use corewire::runtime::{sleep, spawn_local};
use corewire::sync::Notify;

use crate::config::value::OutputBufferLimits;
use crate::repl::shards::{BarrierId, Barriers};
use crate::repl::{
    good_replicas, stream_start, Acks, Backlog, GroupPart, Identity, LinkState, ReplInfo,
    ReplicaInfo, SyncCut, Target, WaitQueue,
};
use crate::reply::Reply;
use crate::server::repl_feed::FeedItem;
use crate::server::shard::{self, now_ms, Shard};
use crate::server::sink::{Origin, SinkKey};

use super::link::Gone;
use super::{startup_replid, ReplShared, GETACK, PING, SELECT_0, TICK};

/// A shard link's last acknowledged offset and when (Unix ms).
pub(super) type LinkAck = (u64, u64);

pub(super) struct Replica {
    pub(super) id: u64,
    pub(super) shard: usize,
    pub(super) sink: SinkKey,
    pub(super) ip: String,
    pub(super) port: u16,
    pub(super) state: LinkState,
    pub(super) ack: u64,
    pub(super) ack_ms: u64,
    /// A `REPLCONF ACK` came since the full sync began.
    pub(super) acked: bool,
    /// Stream bytes for it, not yet handed to its connection.
    pub(super) out: VecDeque<Bytes>,
    pub(super) out_bytes: usize,
    /// Unsent bytes its connection last reported.
    pub(super) conn_pending: usize,
    /// While a full sync's cut is being established.
    pub(super) cut: Option<SyncCut>,
    /// Where its stream starts, once a full sync's cut is complete.
    pub(super) sync_start: Option<u64>,
    pub(super) soft_since: Option<u64>,
    pub(super) wake: Rc<Notify>,
    /// Over its output limit, or gone: the link task ends it.
    pub(super) dropped: bool,
}

impl Replica {
    pub(super) fn offer(&mut self, shard: Option<usize>, start: u64, bytes: &Bytes, hard: u64) {
        let kept = match &mut self.cut {
            Some(cut) => cut.offer(shard, start, bytes),
            None => Some(bytes.clone()),
        };
        if let Some(bytes) = kept {
            self.push(bytes, hard);
        }
    }

    /// A transaction's parts, streamed as `whole` (see [`SyncCut::offer_group`]).
    pub(super) fn offer_group(&mut self, parts: &[GroupPart], whole: &Bytes, hard: u64) {
        let kept = match &mut self.cut {
            Some(cut) => cut.offer_group(parts),
            None => Some(whole.clone()),
        };
        if let Some(bytes) = kept {
            self.push(bytes, hard);
        }
    }

    pub(super) fn push(&mut self, bytes: Bytes, hard: u64) {
        if bytes.is_empty() || self.dropped {
            return;
        }
        self.out_bytes += bytes.len();
        self.out.push_back(bytes);
        if hard > 0 && (self.out_bytes + self.conn_pending) as u64 > hard {
            tracing::warn!(
                ip = %self.ip, port = self.port, queued = self.out_bytes,
                "replica passed its output limit (client-output-buffer-limit replica); dropping it"
            );
            self.drop_link();
        }
        self.wake.notify_one();
    }

    pub(super) fn drop_link(&mut self) {
        self.dropped = true;
        self.out.clear();
        self.out_bytes = 0;
        self.wake.notify_one();
    }

    pub(super) fn info(&self) -> ReplicaInfo {
        ReplicaInfo {
            ip: self.ip.clone(),
            port: self.port,
            state: self.state,
            ack_offset: self.ack,
            ack_ms: self.ack_ms,
        }
    }
}

pub(super) struct Hub {
    pub(super) identity: Identity,
    pub(super) backlog: Option<Backlog>,
    pub(super) backlog_size: usize,
    /// Per shard: bytes of its stream received.
    pub(super) received: Vec<u64>,
    /// Per shard: its FLUSHALL parts received; and the FLUSHALLs streamed (see
    /// [`FeedItem::FlushAll`]).
    pub(super) flushes: Vec<u64>,
    pub(super) flushes_streamed: u64,
    /// Transactions over several shards whose parts are arriving (see
    /// [`FeedItem::Part`]), and per shard what came after its part, held until the
    /// transaction is streamed whole.
    pub(super) barriers: Barriers,
    pub(super) group_parts: HashMap<BarrierId, Vec<GroupPart>>,
    pub(super) held: Vec<VecDeque<FeedItem>>,
    /// A replica node streams its master's bytes, not its own writes ([`follow`]); after
    /// a promotion, each shard's writes count from its cut here ([`promote`]).
    pub(super) following: bool,
    pub(super) floor: Vec<u64>,
    pub(super) replicas: Vec<Replica>,
    pub(super) next_id: u64,
    pub(super) waits: WaitQueue<Origin>,
    /// WAIT marks received per (client shard, WAIT id), until every shard's arrived, with
    /// each shard's own stream offset at its mark.
    pub(super) wait_marks: HashMap<(usize, u64), (usize, Vec<u64>)>,
    /// Replicas on shard links (by address and listening port): per shard, what its link
    /// acknowledged and when (`None`: no link on that shard now).
    pub(super) shard_replicas: HashMap<(String, u16), Vec<Option<LinkAck>>>,
    /// Offsets where a full sync's replica got bytes in another order than the backlog has
    /// them (see `psync::decide`); the newest few.
    pub(super) unsafe_ranges: VecDeque<Range<u64>>,
    pub(super) sync_full: u64,
    pub(super) sync_partial_ok: u64,
    pub(super) sync_partial_err: u64,
    pub(super) limits: OutputBufferLimits,
    pub(super) ping_period_ms: u64,
    pub(super) last_ping_ms: u64,
    pub(super) min_to_write: u64,
    pub(super) max_lag_s: u64,
}

corewire::runtime::shard_local! {
    static HUB: RefCell<Option<Hub>> = RefCell::new(None);
}

/// Starts the hub on shard 0 (at start-up): its timer keeps the settings INFO and the
/// write path read current.
pub(in crate::server) fn start_hub() {
    with_hub(|_| ());
}

pub(super) fn with_hub<R>(f: impl FnOnce(&mut Hub) -> R) -> R {
    HUB.with(|hub| {
        let mut hub = hub.borrow_mut();
        let hub = hub.get_or_insert_with(Hub::start);
        f(hub)
    })
}

impl Hub {
    pub(super) fn start() -> Hub {
        let shard = shard::current();
        let mut hub = Hub {
            identity: Identity::new(startup_replid().to_owned()),
            backlog: None,
            backlog_size: crate::repl::DEFAULT_BACKLOG_SIZE,
            received: vec![0; shard.count],
            flushes: vec![0; shard.count],
            flushes_streamed: 0,
            barriers: Barriers::default(),
            group_parts: HashMap::new(),
            held: (0..shard.count).map(|_| VecDeque::new()).collect(),
            following: false,
            floor: vec![0; shard.count],
            replicas: Vec::new(),
            next_id: 1,
            waits: WaitQueue::default(),
            wait_marks: HashMap::new(),
            shard_replicas: HashMap::new(),
            unsafe_ranges: VecDeque::new(),
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            limits: OutputBufferLimits::default(),
            ping_period_ms: 10_000,
            last_ping_ms: now_ms(),
            min_to_write: 0,
            max_lag_s: 10,
        };
        hub.read_settings(&shard);
        spawn_local(tick_forever());
        hub
    }

    pub(super) fn read_settings(&mut self, shard: &Shard) {
        let live = &shard.shared.session.live;
        let number = |name: &str, default: u64| {
            live.get(name)
                .and_then(|v| crate::number::parse_memory(&v))
                .unwrap_or(default)
        };
        self.backlog_size = number("repl-backlog-size", 1 << 20).max(16 * 1024) as usize;
        if let Some(backlog) = &mut self.backlog {
            if backlog.size() != self.backlog_size {
                backlog.resize(self.backlog_size);
            }
        }
        self.ping_period_ms = number("repl-ping-replica-period", 10).max(1) * 1000;
        self.min_to_write = number("min-replicas-to-write", 0);
        self.max_lag_s = number("min-replicas-max-lag", 10);
        if let Some(limits) = live
            .get("client-output-buffer-limit")
            .and_then(|v| OutputBufferLimits::parse(&v))
        {
            self.limits = limits;
        }
    }

    pub(super) fn hard_limit(&self) -> u64 {
        self.limits.replica.0
    }

    /// Appends to the stream: the backlog and every replica (`shard`: whose batch, `None`
    /// for the hub's own records).
    pub(super) fn stream(&mut self, shard: Option<usize>, start: u64, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        let (size, offset) = (self.backlog_size, self.identity.master_repl_offset);
        let backlog = (self.backlog).get_or_insert_with(|| Backlog::new(size, offset));
        backlog.append(&bytes);
        self.identity.master_repl_offset += bytes.len() as u64;
        let hard = self.limits.replica.0;
        for replica in &mut self.replicas {
            replica.offer(shard, start, &bytes, hard);
        }
    }

    /// The backlog begins (the first replica): its first record selects the database, as
    /// Redis's stream does.
    pub(super) fn ensure_backlog(&mut self) {
        if self.backlog.is_none() {
            self.backlog = Some(Backlog::new(
                self.backlog_size,
                self.identity.master_repl_offset,
            ));
            self.stream(None, 0, Bytes::from_static(SELECT_0));
        }
    }

    /// Whether a shard's batch is not streamed: the node follows a master, or the writes
    /// ran before its promotion (applied from the old master, whose bytes were streamed).
    pub(super) fn local_writes_skipped(&mut self, from: usize, item: &FeedItem) -> bool {
        let (FeedItem::Batch { start, bytes } | FeedItem::FlushAll { start, bytes }) = item else {
            return false;
        };
        if !self.following && *start >= self.floor[from] {
            return false;
        }
        self.received[from] = start + bytes.len() as u64;
        true
    }

    pub(super) fn acks(&self) -> Vec<u64> {
        (self.replicas.iter())
            .filter(|r| r.state == LinkState::Online && !r.dropped)
            .map(|r| r.ack)
            .collect()
    }

    pub(super) fn replica(&mut self, id: u64) -> Option<&mut Replica> {
        self.replicas.iter_mut().find(|r| r.id == id)
    }

    /// A full sync whose cuts every shard's stream has reached: its stream starts here.
    pub(super) fn settle_cuts(&mut self) {
        let master_offset = self.identity.master_repl_offset;
        let mut ranges = Vec::new();
        for replica in &mut self.replicas {
            if !(replica.cut.as_ref()).is_some_and(|cut| cut.reached(&self.received)) {
                continue;
            }
            replica.cut = None;
            let (start, unsafe_range) = stream_start(master_offset, replica.out_bytes as u64);
            ranges.extend(unsafe_range);
            replica.sync_start = Some(start);
            tracing::info!(
                ip = %replica.ip, port = replica.port, start, after_cut = replica.out_bytes,
                "full sync: the snapshot began on every shard; the replica's stream starts here"
            );
        }
        for range in ranges {
            if self.unsafe_ranges.len() >= 16 {
                self.unsafe_ranges.pop_front();
            }
            self.unsafe_ranges.push_back(range);
        }
    }

    pub(super) fn publish(&self, shared: &ReplShared) {
        // A replica on shard links is one line, after the single-stream ones.
        let mut linked: Vec<_> = self.shard_replicas.iter().collect();
        linked.sort_by(|a, b| a.0.cmp(b.0));
        let linked = (linked.into_iter())
            .map(|((ip, port), links)| crate::repl::shards::linked_replica(ip, *port, links));
        let info = ReplInfo {
            identity: self.identity.clone(),
            replicas: self
                .replicas
                .iter()
                .map(Replica::info)
                .chain(linked)
                .collect(),
            backlog: (self.backlog.as_ref()).map(|b| (b.first_byte_offset(), b.histlen() as u64)),
            backlog_size: self.backlog_size as u64,
            min_replicas_to_write: self.min_to_write,
            good_replicas: self.good() as u64,
            sync_full: self.sync_full,
            sync_partial_ok: self.sync_partial_ok,
            sync_partial_err: self.sync_partial_err,
            now_ms: 0,
        };
        if let Ok(mut slot) = shared.info.lock() {
            *slot = Some(info);
        }
        shared.good.store(self.good() as u64, Ordering::Relaxed);
    }

    pub(super) fn good(&self) -> usize {
        let acks = (self.replicas.iter())
            .filter(|r| r.state == LinkState::Online && !r.dropped)
            .map(|r| r.ack_ms);
        // A replica on shard links is as lagging as its stalest link.
        let linked = (self.shard_replicas.values()).filter_map(|links| {
            let ack_ms: Option<Vec<u64>> = links.iter().map(|l| l.map(|(_, ms)| ms)).collect();
            crate::repl::shards::replica_ack_ms(&ack_ms?)
        });
        good_replicas(acks.chain(linked), now_ms(), self.max_lag_s)
    }

    /// Per replica with a link on every shard, what each link acknowledged.
    pub(super) fn shard_acks(&self) -> Vec<Vec<u64>> {
        (self.shard_replicas.values())
            .filter_map(|links| links.iter().map(|l| l.map(|(ack, _)| ack)).collect())
            .collect()
    }

    /// Answers the WAITs that are due.
    pub(super) fn answer_waits(&mut self, now: u64) {
        if self.waits.is_empty() {
            return;
        }
        let (acks, shard_acks) = (self.acks(), self.shard_acks());
        let acks = Acks {
            single: &acks,
            shard_links: &shard_acks,
        };
        let shard = shard::current();
        for (origin, count) in self.waits.ready(acks, now) {
            shard.deliver(origin, Reply::Integer(count as i64));
        }
    }
}

/// A shard's batch of stream items, on the hub.
pub(in crate::server) fn receive(from: usize, items: Vec<FeedItem>) {
    let shard = shard::current();
    with_hub(|hub| {
        let now = now_ms();
        for item in items {
            hub.take(from, item, now);
        }
        hub.settle_cuts();
        hub.publish(&shard.shared.repl);
    });
}

impl Hub {
    /// One item of shard `from`'s stream, in its order: held while the shard waits at a
    /// transaction's part for the other shards' parts (see `group.rs`).
    pub(super) fn take(&mut self, from: usize, item: FeedItem, now: u64) {
        if self.barriers.is_held(from) {
            self.held[from].push_back(item);
            return;
        }
        match item {
            FeedItem::Batch { .. } | FeedItem::FlushAll { .. }
                if self.local_writes_skipped(from, &item) => {}
            FeedItem::Batch { start, bytes } => {
                self.received[from] = start + bytes.len() as u64;
                self.ensure_backlog();
                self.stream(Some(from), start, bytes);
            }
            FeedItem::FlushAll { start, bytes } => {
                self.received[from] = start + bytes.len() as u64;
                self.flushes[from] += 1;
                if self.flushes[from] > self.flushes_streamed {
                    self.flushes_streamed += 1;
                    self.ensure_backlog();
                    self.stream(Some(from), start, bytes);
                }
            }
            FeedItem::Part {
                id,
                involved,
                start,
                bytes,
            } => self.part(from, id, involved, (from, start, bytes), now),
            // A program's step: streamed with the rest of the program (see `group.rs`).
            FeedItem::Piece { id, start, bytes } => self
                .group_parts
                .entry(id)
                .or_default()
                .push((from, start, bytes)),
            FeedItem::Wait {
                origin,
                id,
                parts,
                replicas,
                timeout_ms,
                shard_offset,
            } => {
                let shards = self.received.len();
                let (marks, offsets) = (self.wait_marks.entry((origin.shard, id)))
                    .or_insert_with(|| (0, vec![0; shards]));
                *marks += 1;
                offsets[from] = shard_offset;
                if *marks < parts {
                    return;
                }
                let Some((_, offsets)) = self.wait_marks.remove(&(origin.shard, id)) else {
                    return;
                };
                let target = Target {
                    offset: self.identity.master_repl_offset,
                    shards: offsets,
                };
                let deadline = (timeout_ms > 0).then(|| now + timeout_ms);
                let (acks, shard_acks) = (self.acks(), self.shard_acks());
                let acks = Acks {
                    single: &acks,
                    shard_links: &shard_acks,
                };
                if !self.shard_replicas.is_empty() {
                    // Shard links are asked to acknowledge now too.
                    super::shard_link::getack_all();
                }
                match (self.waits).add(origin, target, replicas as usize, deadline, acks) {
                    Err((origin, count)) => {
                        shard::current().deliver(origin, Reply::Integer(count as i64))
                    }
                    // The replicas are asked to acknowledge now, not at their next second.
                    Ok(()) if !self.replicas.is_empty() => {
                        self.stream(None, 0, Bytes::from_static(GETACK))
                    }
                    Ok(()) => {}
                }
            }
        }
    }
}

/// The hub's timer: WAIT deadlines, the stream's PING, soft output limits, settings.
async fn tick_forever() {
    let mut ticks = 0u64;
    loop {
        sleep(TICK).await;
        ticks += 1;
        let shard = shard::current();
        let now = now_ms();
        with_hub(|hub| {
            hub.answer_waits(now);
            if !ticks.is_multiple_of(5) {
                return;
            }
            hub.read_settings(&shard);
            // A node that follows a master passes its master's PINGs on instead.
            if !hub.replicas.is_empty()
                && !hub.following
                && now.saturating_sub(hub.last_ping_ms) >= hub.ping_period_ms
            {
                hub.last_ping_ms = now;
                hub.stream(None, 0, Bytes::from_static(PING));
            }
            let (_, soft, soft_s) = hub.limits.replica;
            for replica in &mut hub.replicas {
                let held = (replica.out_bytes + replica.conn_pending) as u64;
                if soft > 0 && held > soft {
                    let since = *replica.soft_since.get_or_insert(now);
                    if now.saturating_sub(since) >= soft_s * 1000 && !replica.dropped {
                        tracing::warn!(ip = %replica.ip, port = replica.port,
                            "replica over its soft output limit too long; dropping it");
                        replica.drop_link();
                    }
                } else {
                    replica.soft_since = None;
                }
            }
            hub.publish(&shard.shared.repl);
        });
    }
}

/// Hub helpers for the full sync (`repl_sync.rs`).
pub(in crate::server) fn set_state(id: u64, state: LinkState) -> Result<(), Gone> {
    with_hub(|hub| {
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        replica.state = state;
        hub.publish(&shard::current().shared.repl);
        Ok(())
    })
}

/// Whether the replica sent a `REPLCONF ACK` since its full sync began (see `repl_sync.rs`).
pub(in crate::server) fn acked(id: u64) -> Result<bool, Gone> {
    with_hub(|hub| {
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        Ok(replica.acked)
    })
}

/// A full sync begins: acknowledgements before it do not count.
pub(in crate::server) fn clear_acked(id: u64) -> Result<(), Gone> {
    with_hub(|hub| {
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        replica.acked = false;
        Ok(())
    })
}

/// The snapshots began with these cuts: the held batches after them stay queued.
pub(in crate::server) fn set_cuts(id: u64, cuts: Vec<u64>) -> Result<(), Gone> {
    with_hub(|hub| {
        let hard = hub.hard_limit();
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        let cut = replica.cut.as_mut().ok_or(Gone)?;
        for bytes in cut.set_cuts(cuts) {
            replica.push(bytes, hard);
        }
        hub.settle_cuts();
        Ok(())
    })
}

/// Where the replica's stream starts once every shard's stream reached its cut (`None`:
/// not yet).
pub(in crate::server) fn sync_start(id: u64) -> Result<Option<(String, u64)>, Gone> {
    with_hub(|hub| {
        let replid = hub.identity.replid.clone();
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        Ok(replica.sync_start.map(|start| (replid, start)))
    })
}

/// Whether the replica is still wanted (its link may go on).
pub(in crate::server) fn alive(id: u64) -> bool {
    with_hub(|hub| hub.replica(id).is_some_and(|r| !r.dropped))
}

/// Shard `shard`'s link of the replica at `ip`:`port` acknowledged `offset` (or, `None`,
/// ended): WAIT and min-replicas-to-write count that replica by all its links.
pub(super) fn shard_link_ack(shard: usize, ip: String, port: u16, ack: Option<u64>) {
    let now = now_ms();
    with_hub(|hub| {
        let shards = hub.received.len();
        let key = (ip, port);
        match ack {
            Some(offset) => {
                let links = (hub.shard_replicas.entry(key)).or_insert_with(|| vec![None; shards]);
                if let Some(link) = links.get_mut(shard) {
                    let acked = link.map_or(offset, |(before, _)| before.max(offset));
                    *link = Some((acked, now));
                }
            }
            None => {
                if let Some(links) = hub.shard_replicas.get_mut(&key) {
                    if let Some(link) = links.get_mut(shard) {
                        *link = None;
                    }
                    if links.iter().all(Option::is_none) {
                        hub.shard_replicas.remove(&key);
                    }
                }
            }
        }
        hub.answer_waits(now);
        hub.publish(&shard::current().shared.repl);
    });
}
