//! The master side of replication: the hub on shard 0 that owns the stream's backlog and
//! the replica links, and the replication commands' glue (PSYNC, SYNC, REPLCONF, WAIT,
//! ROLE, min-replicas-to-write).
//!
//! Every shard streams its writes to the hub (`repl_feed.rs`); the hub appends each batch
//! to the backlog (numbering the bytes: `master_repl_offset`) and to every replica's
//! queue. A replica's connection lives on whichever shard accepted it: its link task here
//! hands the queued bytes to that shard's connection in bounded chunks, waiting while the
//! connection has more than [`HIGH_WATER`] unsent, and drops the replica when what is
//! queued for it passes `client-output-buffer-limit replica` (so a replica that stops
//! reading costs at most the limit). A full sync is in `repl_sync.rs`.
//!
//! The decisions (partial or full, WAIT, good replicas) are in [`crate::repl`].

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire::runtime::{send_to, sleep, spawn_local, submit_to};
use corewire::sync::Notify;

use super::repl_feed::FeedItem;
use super::shard::{self, now_ms, Shard};
use super::sink::{Origin, SinkKey};
use crate::config::value::OutputBufferLimits;
use crate::repl::command::ReplConf;
use crate::repl::{
    decide, good_replicas, stream_start, Backlog, Decision, FullReason, Identity, LinkState,
    ReplInfo, ReplRequest, ReplicaInfo, SyncCut, WaitQueue,
};
use crate::reply::Reply;

/// A connection with more than this much unsent is not handed more.
pub(super) const HIGH_WATER: usize = 1 << 20;
/// Bytes handed to a connection in one message at most.
const CHUNK: usize = 256 << 10;
/// The hub's timer: WAIT timeouts, pings, limits, settings.
const TICK: Duration = Duration::from_millis(20);

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const SELECT_0: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";

/// Replication's state that every shard reads: INFO's and ROLE's snapshot, and what the
/// write path checks for min-replicas-to-write.
#[derive(Default)]
pub(crate) struct ReplShared {
    info: Mutex<Option<ReplInfo>>,
    /// The replicas good by `min-replicas-max-lag` (refreshed by the hub's timer; the
    /// `min-replicas-to-write` they are held to is the live configuration's).
    good: AtomicU64,
}

impl ReplShared {
    pub fn info(&self) -> ReplInfo {
        let mut info = (self.info.lock())
            .map(|i| i.clone())
            .unwrap_or_default()
            .unwrap_or_else(fresh_info);
        info.now_ms = now_ms();
        info
    }

    /// `-NOREPLICAS` when min-replicas-to-write (`min`, as set now: a CONFIG SET applies
    /// to the next write, not at the hub's next tick) is not met.
    pub fn write_refusal(&self, min: u64) -> Option<Reply> {
        (min > 0 && self.good.load(Ordering::Relaxed) < min)
            .then(|| Reply::error("NOREPLICAS Not enough good replicas to write."))
    }
}

/// Before the hub starts, INFO shows a master with its id and no backlog.
fn fresh_info() -> ReplInfo {
    ReplInfo {
        identity: Identity::new(startup_replid().to_owned()),
        ..ReplInfo::default()
    }
}

/// The replication id the node starts with (random per run, as Redis's).
fn startup_replid() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(crate::repl::random_replid)
}

// ---------------------------------------------------------------------------------------
// The hub (shard 0).

struct Replica {
    id: u64,
    shard: usize,
    sink: SinkKey,
    ip: String,
    port: u16,
    state: LinkState,
    ack: u64,
    ack_ms: u64,
    /// A `REPLCONF ACK` came since the full sync began.
    acked: bool,
    /// Stream bytes for it, not yet handed to its connection.
    out: VecDeque<Bytes>,
    out_bytes: usize,
    /// Unsent bytes its connection last reported.
    conn_pending: usize,
    /// While a full sync's cut is being established.
    cut: Option<SyncCut>,
    /// Where its stream starts, once a full sync's cut is complete.
    sync_start: Option<u64>,
    soft_since: Option<u64>,
    wake: Rc<Notify>,
    /// Over its output limit, or gone: the link task ends it.
    dropped: bool,
}

impl Replica {
    fn offer(&mut self, shard: Option<usize>, start: u64, bytes: &Bytes, hard: u64) {
        let kept = match &mut self.cut {
            Some(cut) => cut.offer(shard, start, bytes),
            None => Some(bytes.clone()),
        };
        if let Some(bytes) = kept {
            self.push(bytes, hard);
        }
    }

    fn push(&mut self, bytes: Bytes, hard: u64) {
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

    fn drop_link(&mut self) {
        self.dropped = true;
        self.out.clear();
        self.out_bytes = 0;
        self.wake.notify_one();
    }

    fn info(&self) -> ReplicaInfo {
        ReplicaInfo {
            ip: self.ip.clone(),
            port: self.port,
            state: self.state,
            ack_offset: self.ack,
            ack_ms: self.ack_ms,
        }
    }
}

struct Hub {
    identity: Identity,
    backlog: Option<Backlog>,
    backlog_size: usize,
    /// Per shard: bytes of its stream received.
    received: Vec<u64>,
    /// Per shard: its FLUSHALL parts received; and the FLUSHALLs streamed (see
    /// [`FeedItem::FlushAll`]).
    flushes: Vec<u64>,
    flushes_streamed: u64,
    /// A replica node streams its master's bytes, not its own writes ([`follow`]); after
    /// a promotion, each shard's writes count from its cut here ([`promote`]).
    following: bool,
    floor: Vec<u64>,
    replicas: Vec<Replica>,
    next_id: u64,
    waits: WaitQueue<Origin>,
    /// WAIT marks received per (client shard, WAIT id), until every shard's arrived.
    wait_marks: HashMap<(usize, u64), usize>,
    /// Offsets where a full sync's replica got bytes in another order than the backlog has
    /// them (see `psync::decide`); the newest few.
    unsafe_ranges: VecDeque<Range<u64>>,
    sync_full: u64,
    sync_partial_ok: u64,
    sync_partial_err: u64,
    limits: OutputBufferLimits,
    ping_period_ms: u64,
    last_ping_ms: u64,
    min_to_write: u64,
    max_lag_s: u64,
}

corewire::runtime::shard_local! {
    static HUB: RefCell<Option<Hub>> = RefCell::new(None);
    /// This shard's WAITs, numbered (see [`FeedItem::Wait`]).
    static WAIT_IDS: std::cell::Cell<u64> = std::cell::Cell::new(0);
    /// This shard's connections that are replicas (their links are on the hub), and what
    /// each connection said with REPLCONF before its PSYNC.
    static LINKS: RefCell<HashMap<SinkKey, LinkConf>> = RefCell::new(HashMap::new());
}

#[derive(Debug, Clone, Default)]
struct LinkConf {
    port: u16,
    ip: Option<String>,
    eof: bool,
    psync2: bool,
    replica: bool,
}

/// Starts the hub on shard 0 (at start-up): its timer keeps the settings INFO and the
/// write path read current.
pub(super) fn start_hub() {
    with_hub(|_| ());
}

fn with_hub<R>(f: impl FnOnce(&mut Hub) -> R) -> R {
    HUB.with(|hub| {
        let mut hub = hub.borrow_mut();
        let hub = hub.get_or_insert_with(Hub::start);
        f(hub)
    })
}

impl Hub {
    fn start() -> Hub {
        let shard = shard::current();
        let mut hub = Hub {
            identity: Identity::new(startup_replid().to_owned()),
            backlog: None,
            backlog_size: crate::repl::DEFAULT_BACKLOG_SIZE,
            received: vec![0; shard.count],
            flushes: vec![0; shard.count],
            flushes_streamed: 0,
            following: false,
            floor: vec![0; shard.count],
            replicas: Vec::new(),
            next_id: 1,
            waits: WaitQueue::default(),
            wait_marks: HashMap::new(),
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

    fn read_settings(&mut self, shard: &Shard) {
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

    fn hard_limit(&self) -> u64 {
        self.limits.replica.0
    }

    /// Appends to the stream: the backlog and every replica (`shard`: whose batch, `None`
    /// for the hub's own records).
    fn stream(&mut self, shard: Option<usize>, start: u64, bytes: Bytes) {
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
    fn ensure_backlog(&mut self) {
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
    fn local_writes_skipped(&mut self, from: usize, item: &FeedItem) -> bool {
        let (FeedItem::Batch { start, bytes } | FeedItem::FlushAll { start, bytes }) = item else {
            return false;
        };
        if !self.following && *start >= self.floor[from] {
            return false;
        }
        self.received[from] = start + bytes.len() as u64;
        true
    }

    fn acks(&self) -> Vec<u64> {
        (self.replicas.iter())
            .filter(|r| r.state == LinkState::Online && !r.dropped)
            .map(|r| r.ack)
            .collect()
    }

    fn replica(&mut self, id: u64) -> Option<&mut Replica> {
        self.replicas.iter_mut().find(|r| r.id == id)
    }

    /// A full sync whose cuts every shard's stream has reached: its stream starts here.
    fn settle_cuts(&mut self) {
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

    fn publish(&self, shared: &ReplShared) {
        let info = ReplInfo {
            identity: self.identity.clone(),
            replicas: self.replicas.iter().map(Replica::info).collect(),
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

    fn good(&self) -> usize {
        let acks = (self.replicas.iter())
            .filter(|r| r.state == LinkState::Online && !r.dropped)
            .map(|r| r.ack_ms);
        good_replicas(acks, now_ms(), self.max_lag_s)
    }

    /// Answers the WAITs that are due.
    fn answer_waits(&mut self, now: u64) {
        if self.waits.is_empty() {
            return;
        }
        let acks = self.acks();
        let shard = shard::current();
        for (origin, count) in self.waits.ready(&acks, now) {
            shard.deliver(origin, Reply::Integer(count as i64));
        }
    }
}

/// A shard's batch of stream items, on the hub.
pub(super) fn receive(from: usize, items: Vec<FeedItem>) {
    let shard = shard::current();
    with_hub(|hub| {
        let now = now_ms();
        for item in items {
            match item {
                FeedItem::Batch { .. } | FeedItem::FlushAll { .. }
                    if hub.local_writes_skipped(from, &item) => {}
                FeedItem::Batch { start, bytes } => {
                    hub.received[from] = start + bytes.len() as u64;
                    hub.ensure_backlog();
                    hub.stream(Some(from), start, bytes);
                }
                FeedItem::FlushAll { start, bytes } => {
                    hub.received[from] = start + bytes.len() as u64;
                    hub.flushes[from] += 1;
                    if hub.flushes[from] > hub.flushes_streamed {
                        hub.flushes_streamed += 1;
                        hub.ensure_backlog();
                        hub.stream(Some(from), start, bytes);
                    }
                }
                FeedItem::Wait {
                    origin,
                    id,
                    parts,
                    replicas,
                    timeout_ms,
                } => {
                    let marks = hub.wait_marks.entry((origin.shard, id)).or_insert(0);
                    *marks += 1;
                    if *marks < parts {
                        continue;
                    }
                    hub.wait_marks.remove(&(origin.shard, id));
                    let target = hub.identity.master_repl_offset;
                    let deadline = (timeout_ms > 0).then(|| now + timeout_ms);
                    let acks = hub.acks();
                    match hub
                        .waits
                        .add(origin, target, replicas as usize, deadline, &acks)
                    {
                        Err((origin, count)) => shard.deliver(origin, Reply::Integer(count as i64)),
                        // The replicas are asked to acknowledge now, not at their next second.
                        Ok(()) if !hub.replicas.is_empty() => {
                            hub.stream(None, 0, Bytes::from_static(GETACK))
                        }
                        Ok(()) => {}
                    }
                }
            }
        }
        hub.settle_cuts();
        hub.publish(&shard.shared.repl);
    });
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

// ---------------------------------------------------------------------------------------
// The commands, on the shard of the connection that sent them.

/// Runs a replication command for the connection at `origin` on its shard. `None`: the
/// reply comes later.
pub(super) fn dispatch(shard: &Shard, origin: Origin, request: ReplRequest) -> Option<Reply> {
    match request {
        // A replica answers with its link (see `server/replica`).
        ReplRequest::Role => Some(
            match shard.shared.replica.info(&shard.shared.session.live) {
                Some(link) => link.role_reply(),
                None => shard.shared.repl.info().role_reply(),
            },
        ),
        ReplRequest::Wait { .. } if shard.shared.replica.is_replica() => Some(Reply::error(
            "ERR WAIT cannot be used with replica instances. Please also note that since \
             Redis 4.0 if a replica is configured to be writable (which is not the default) \
             writes to replicas are just local and are not propagated.",
        )),
        ReplRequest::Wait {
            replicas,
            timeout_ms,
        } => {
            let id = WAIT_IDS.with(|ids| {
                ids.set(ids.get() + 1);
                ids.get()
            });
            let parts = shard.count;
            let mark = move || FeedItem::Wait {
                origin,
                id,
                parts,
                replicas,
                timeout_ms,
            };
            // Every shard marks it behind its writes: the ones this client's writes made
            // there ran before the WAIT reached it.
            super::repl_feed::wait_mark(mark());
            let here = shard.id;
            spawn_local(async move {
                for target in (0..parts).filter(|&s| s != here) {
                    let item = mark();
                    let _ = send_to(target, move || super::repl_feed::wait_mark(item)).await;
                }
            });
            None
        }
        ReplRequest::ReplConf(options) => replconf(shard, origin, options),
        ReplRequest::Psync { replid, offset } => {
            psync(shard, origin, Some((replid, offset)));
            // Unanswered here: the link writes `+FULLRESYNC` or `+CONTINUE` itself.
            Some(Reply::ok())
        }
        ReplRequest::Sync => {
            psync(shard, origin, None);
            Some(Reply::ok())
        }
    }
}

fn replconf(shard: &Shard, origin: Origin, options: Vec<ReplConf>) -> Option<Reply> {
    let mut ack = None;
    LINKS.with(|links| {
        let mut links = links.borrow_mut();
        let conf = links.entry(origin.sink).or_default();
        for option in options {
            match option {
                ReplConf::ListeningPort(port) => conf.port = port,
                ReplConf::IpAddress(ip) => {
                    conf.ip = Some(String::from_utf8_lossy(&ip).into_owned())
                }
                ReplConf::Capa(capa) if capa.eq_ignore_ascii_case(b"eof") => conf.eof = true,
                ReplConf::Capa(capa) if capa.eq_ignore_ascii_case(b"psync2") => conf.psync2 = true,
                ReplConf::Ack(offset) if conf.replica => ack = Some(offset),
                _ => {}
            }
        }
    });
    let _ = shard;
    if let Some(offset) = ack {
        let (from, sink) = (origin.shard, origin.sink);
        spawn_local(async move {
            let _ = send_to(0, move || on_ack(from, sink, offset)).await;
        });
    }
    Some(Reply::ok())
}

/// A replica's `REPLCONF ACK`, on the hub.
fn on_ack(shard: usize, sink: SinkKey, offset: u64) {
    let now = now_ms();
    with_hub(|hub| {
        if let Some(replica) =
            (hub.replicas.iter_mut()).find(|r| r.shard == shard && r.sink == sink)
        {
            replica.ack = replica.ack.max(offset);
            replica.ack_ms = now;
            replica.acked = true;
        }
        hub.answer_waits(now);
    });
}

/// PSYNC (`Some`) or SYNC (`None`): the hub takes the connection as a replica. A replica
/// whose own link is down has no stream to offer (Redis: `-NOMASTERLINK`; the sub-replica
/// tries again).
fn psync(shard: &Shard, origin: Origin, psync: Option<(Bytes, i64)>) {
    let replica = &shard.shared.replica;
    if replica.is_replica() && !replica.link_up() {
        // PSYNC's reply slot is silent: the refusal is written like `+FULLRESYNC` is.
        let sink = origin.sink;
        spawn_local(async move {
            let refusal = Bytes::from_static(
                b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n",
            );
            let _ = submit_to(origin.shard, move || async move {
                push_here(sink, Some(refusal))
            })
            .await;
        });
        return;
    }
    let conf = LINKS.with(|links| {
        let mut links = links.borrow_mut();
        let conf = links.entry(origin.sink).or_default();
        conf.replica = true;
        conf.clone()
    });
    let _ = shard;
    let (from, sink) = (origin.shard, origin.sink);
    spawn_local(async move {
        // The connection is running its turn now: it is marked once that is over.
        let peer = submit_to(from, move || async move { mark_replica(sink) }).await;
        let Ok(Some(peer_ip)) = peer else { return };
        let ip = conf.ip.clone().unwrap_or(peer_ip);
        let _ = send_to(0, move || {
            let id = accept(from, sink, ip, conf, psync);
            spawn_local(link(id));
        })
        .await;
    });
}

/// On the connection's shard: it is a replica from now on; its peer's address.
fn mark_replica(sink: SinkKey) -> Option<String> {
    let sink = shard::current().sink(sink)?;
    sink.set_replica();
    let line = sink.client_line(now_ms())?;
    Some(
        line.addr
            .rsplit_once(':')
            .map_or(line.addr.clone(), |(ip, _)| ip.to_owned()),
    )
}

/// How a link begins.
enum Start {
    /// `+CONTINUE`: the stream from the backlog is already queued.
    Continue(Bytes),
    Full {
        eof: bool,
        psync: bool,
    },
}

struct Accepted {
    start: Start,
}

corewire::runtime::shard_local! {
    static STARTS: RefCell<HashMap<u64, Accepted>> = RefCell::new(HashMap::new());
}

/// The hub's side of PSYNC/SYNC: decides, registers the replica, and returns its id (its
/// link task starts next).
fn accept(
    shard: usize,
    sink: SinkKey,
    ip: String,
    conf: LinkConf,
    psync: Option<(Bytes, i64)>,
) -> u64 {
    with_hub(|hub| {
        let id = hub.next_id;
        hub.next_id += 1;
        let decision = match &psync {
            Some((replid, offset)) => {
                let ranges: Vec<Range<u64>> = hub.unsafe_ranges.iter().cloned().collect();
                decide(
                    &hub.identity,
                    hub.backlog.as_ref(),
                    replid,
                    *offset,
                    &ranges,
                )
            }
            None => Decision::Full(FullReason::Requested),
        };
        let mut replica = Replica {
            id,
            shard,
            sink,
            ip: ip.clone(),
            port: conf.port,
            state: LinkState::WaitBgsave,
            ack: 0,
            ack_ms: now_ms(),
            acked: false,
            out: VecDeque::new(),
            out_bytes: 0,
            conn_pending: 0,
            cut: Some(SyncCut::default()),
            sync_start: None,
            soft_since: None,
            wake: Rc::new(Notify::default()),
            dropped: false,
        };
        let start = match decision {
            Decision::Continue { from } => {
                hub.sync_partial_ok += 1;
                replica.cut = None;
                replica.state = LinkState::Online;
                replica.ack = from - 1;
                let rest = (hub.backlog.as_ref())
                    .and_then(|b| b.since(from))
                    .unwrap_or_default();
                replica.push(rest, 0);
                let line = if conf.psync2 {
                    format!("+CONTINUE {}\r\n", hub.identity.replid)
                } else {
                    "+CONTINUE\r\n".to_owned()
                };
                tracing::info!(%ip, port = conf.port, from, "partial resynchronization accepted");
                Start::Continue(Bytes::from(line))
            }
            Decision::Full(reason) => {
                hub.sync_full += 1;
                if psync
                    .as_ref()
                    .is_some_and(|(replid, _)| &replid[..] != b"?")
                {
                    hub.sync_partial_err += 1;
                }
                tracing::info!(%ip, port = conf.port, ?reason, "full resynchronization");
                Start::Full {
                    eof: conf.eof,
                    psync: psync.is_some(),
                }
            }
        };
        hub.ensure_backlog();
        hub.replicas.push(replica);
        STARTS.with(|s| s.borrow_mut().insert(id, Accepted { start }));
        hub.publish(&shard::current().shared.repl);
        id
    })
}

/// Why a link ended.
#[derive(Debug)]
pub(super) struct Gone;

/// One replica's link, on the hub: its synchronization, then its stream.
async fn link(id: u64) {
    let Some(accepted) = STARTS.with(|s| s.borrow_mut().remove(&id)) else {
        return;
    };
    let Some((shard, sink, wake)) =
        with_hub(|hub| hub.replica(id).map(|r| (r.shard, r.sink, r.wake.clone())))
    else {
        return;
    };
    let result = async {
        match accepted.start {
            Start::Continue(line) => send(id, shard, sink, line).await?,
            Start::Full { eof, psync } => {
                super::repl_sync::full_sync(id, shard, sink, eof, psync).await?
            }
        }
        stream(id, shard, sink, &wake).await
    }
    .await;
    if let Err(Gone) = result {
        tracing::debug!(id, "replica link ended");
    }
    end_link(id, shard, sink).await;
}

/// Hands the replica's queued stream to its connection, forever (until it is gone).
async fn stream(id: u64, shard: usize, sink: SinkKey, wake: &Notify) -> Result<(), Gone> {
    loop {
        let chunk = with_hub(|hub| {
            let replica = hub.replica(id)?;
            if replica.dropped {
                return None;
            }
            let mut chunk = BytesMut::new();
            while chunk.len() < CHUNK {
                let Some(bytes) = replica.out.pop_front() else {
                    break;
                };
                replica.out_bytes -= bytes.len();
                chunk.extend_from_slice(&bytes);
            }
            Some(chunk.freeze())
        });
        match chunk {
            None => return Err(Gone),
            Some(chunk) if chunk.is_empty() => wake.notified().await,
            Some(chunk) => send(id, shard, sink, chunk).await?,
        }
    }
}

/// Writes `bytes` to the replica's connection (on its shard), then waits while the
/// connection has more than [`HIGH_WATER`] unsent.
pub(super) async fn send(id: u64, shard: usize, sink: SinkKey, bytes: Bytes) -> Result<(), Gone> {
    let mut pending = submit_to(shard, move || async move { push_here(sink, Some(bytes)) })
        .await
        .ok()
        .flatten()
        .ok_or(Gone)?;
    // A slow replica is looked at less and less often (1 ms doubling to 16 ms).
    let mut pause = Duration::from_millis(1);
    loop {
        let alive = with_hub(|hub| match hub.replica(id) {
            Some(replica) if !replica.dropped => {
                replica.conn_pending = pending;
                true
            }
            _ => false,
        });
        if !alive {
            return Err(Gone);
        }
        if pending <= HIGH_WATER {
            return Ok(());
        }
        sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(16));
        pending = submit_to(shard, move || async move { push_here(sink, None) })
            .await
            .ok()
            .flatten()
            .ok_or(Gone)?;
    }
}

/// On the connection's shard: appends `bytes` to its output; its unsent bytes, or `None`
/// if it is gone.
fn push_here(sink: SinkKey, bytes: Option<Bytes>) -> Option<usize> {
    let sink = shard::current().sink(sink)?;
    sink.push_raw(bytes.as_deref().unwrap_or_default())
}

/// The link is over: the hub forgets the replica and its connection is closed.
async fn end_link(id: u64, shard: usize, sink: SinkKey) {
    with_hub(|hub| {
        hub.replicas.retain(|r| r.id != id);
        hub.publish(&shard::current().shared.repl);
    });
    let _ = send_to(shard, move || {
        if let Some(sink) = shard::current().sink(sink) {
            sink.kill();
        }
    })
    .await;
}

/// A connection of this shard closed: if it was a replica, the hub drops its link.
pub(super) fn closed(shard: &Shard, sink: SinkKey) {
    let was_replica = LINKS
        .with(|links| links.borrow_mut().remove(&sink))
        .is_some_and(|c| c.replica);
    if !was_replica {
        return;
    }
    let from = shard.id;
    spawn_local(async move {
        let _ = send_to(0, move || {
            with_hub(|hub| {
                for replica in &mut hub.replicas {
                    if replica.shard == from && replica.sink == sink {
                        replica.drop_link();
                    }
                }
            })
        })
        .await;
    });
}

/// Hub helpers for the full sync (`repl_sync.rs`).
pub(super) fn set_state(id: u64, state: LinkState) -> Result<(), Gone> {
    with_hub(|hub| {
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        replica.state = state;
        hub.publish(&shard::current().shared.repl);
        Ok(())
    })
}

/// Whether the replica sent a `REPLCONF ACK` since its full sync began (see `repl_sync.rs`).
pub(super) fn acked(id: u64) -> Result<bool, Gone> {
    with_hub(|hub| {
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        Ok(replica.acked)
    })
}

/// A full sync begins: acknowledgements before it do not count.
pub(super) fn clear_acked(id: u64) -> Result<(), Gone> {
    with_hub(|hub| {
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        replica.acked = false;
        Ok(())
    })
}

/// The snapshots began with these cuts: the held batches after them stay queued.
pub(super) fn set_cuts(id: u64, cuts: Vec<u64>) -> Result<(), Gone> {
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
pub(super) fn sync_start(id: u64) -> Result<Option<(String, u64)>, Gone> {
    with_hub(|hub| {
        let replid = hub.identity.replid.clone();
        let replica = hub.replica(id).filter(|r| !r.dropped).ok_or(Gone)?;
        Ok(replica.sync_start.map(|start| (replid, start)))
    })
}

/// Whether the replica is still wanted (its link may go on).
pub(super) fn alive(id: u64) -> bool {
    with_hub(|hub| hub.replica(id).is_some_and(|r| !r.dropped))
}

// ---------------------------------------------------------------------------------------

mod follow;

pub(crate) use follow::{drop_replicas, follow, follow_stream, identity, promote};
pub(super) use follow::{following, set_follow_cut};
