//! Per-shard replication links on the master: shard `i` streams its own writes to replica
//! shard `i` over a connection of their own, with no hop through the hub on shard 0.
//!
//! A connection that asked to be shard `i`'s link (`REPLCONF shard-streams N key-map M
//! shard i`, see [`crate::repl::shard_link`]) stays on the shard that accepted it; its
//! PSYNC is handed to shard `i`, whose link task drives it from there (as the hub drives a
//! single-stream replica's connection): bytes are pushed to the connection's shard in
//! bounded chunks, waiting while it has more than `HIGH_WATER` unsent.
//!
//! Shard `i`'s stream is what its feed records (`repl_feed.rs`), tapped as each item is
//! queued for the hub ([`tap`]), plus its own PINGs: it numbers its own bytes (the offset a
//! shard link's `+FULLRESYNC`, PSYNC and `REPLCONF ACK` speak of) and keeps its own backlog
//! (`repl-backlog-size` split evenly over the shards, so the node holds what one backlog
//! holds), so one shard's link resumes partially after a cut while the others go on. The
//! history's id is the node's replication id when the shard's stream began; a node that
//! starts following a master drops its shard links and their history ([`reset_all`]), and
//! declines new ones while it follows.
//!
//! A shard's full sync (`shard_sync.rs`) is its part of one cut for all of its replica's
//! links (`shard_cut.rs`): each shard begins its snapshot and takes its stream's offset in
//! one step while every shard is held, so the link gets every byte streamed after it, and
//! a transaction over several shards is in every part of the snapshot or in every
//! stream. Such a transaction's (or program's) part goes on the stream as a barrier record
//! and its block (`repl::barrier`, [`tap`]), which the replica applies with the others.
//!
//! Each link's full sync or partial resync counts in INFO's `sync_full` /
//! `sync_partial_ok` (a replica on 4 links: 4 full syncs).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire::runtime::{send_to, sleep, spawn_local};
use corewire::sync::Notify;

use crate::config::value::OutputBufferLimits;
use crate::repl::barrier;
use crate::repl::shard_link::{Limits, OutQueue, Over};
use crate::repl::{decide, Backlog, Decision, Identity, LinkState};
use crate::server::repl_feed::FeedItem;
use crate::server::shard::{self, now_ms};
use crate::server::sink::SinkKey;

use super::commands::LinkConf;
use super::link::{push_here, send_via, Gone};
use super::{CHUNK, GETACK, PING, SELECT_0};

/// The shard hub's timer: pings, soft limits, settings.
const TICK: Duration = Duration::from_millis(100);

/// Whether this master serves shard links ([`crate::repl::shards::SERVED`]).
pub(in crate::server) fn served() -> bool {
    crate::repl::shards::SERVED
}

pub(super) struct ShardLink {
    pub(super) id: u64,
    conn_shard: usize,
    sink: SinkKey,
    ip: String,
    port: u16,
    pub(super) state: LinkState,
    pub(super) ack: u64,
    pub(super) ack_ms: u64,
    /// A `REPLCONF ACK` came since the full sync began.
    pub(super) acked: bool,
    /// It gets this shard's bytes (from its cut, or from its partial resync).
    streaming: bool,
    queue: OutQueue,
    wake: Rc<Notify>,
    /// Over its output limit, or gone: the link task ends it.
    dropped: bool,
}

impl ShardLink {
    fn push(&mut self, bytes: Bytes, limits: &Limits) {
        if self.dropped || !self.streaming {
            return;
        }
        if let Err(Over) = self.queue.push(bytes, limits) {
            tracing::warn!(
                ip = %self.ip, port = self.port, shard = shard::current().id,
                "shard link passed its output limit (client-output-buffer-limit replica); \
                 dropping it"
            );
            self.dropped = true;
        }
        self.wake.notify_one();
    }

    fn drop_link(&mut self) {
        self.dropped = true;
        self.wake.notify_one();
    }
}

/// This shard's stream: its offset, backlog and links.
pub(super) struct ShardHub {
    /// The history's id: the node's replication id when this stream began.
    pub(super) replid: String,
    /// Bytes of this shard's stream so far.
    pub(super) offset: u64,
    backlog: Backlog,
    pub(super) links: Vec<ShardLink>,
    limits: Limits,
    ping_period_ms: u64,
    last_ping_ms: u64,
    /// This hub's number on the shard: its timer stops when a reset replaces it.
    generation: u64,
    /// The steps of programs holding this shard, until their part closes them.
    pieces: std::collections::HashMap<crate::repl::barrier::BarrierId, BytesMut>,
}

corewire::runtime::shard_local! {
    static SHARD_HUB: RefCell<Option<ShardHub>> = RefCell::new(None);
    static GENERATION: std::cell::Cell<u64> = std::cell::Cell::new(0);
    static NEXT_ID: std::cell::Cell<u64> = std::cell::Cell::new(0);
    /// Links of a hub that was reset, until their tasks end them.
    static GONE: RefCell<std::collections::HashMap<u64, (usize, SinkKey, String, u16)>> =
        RefCell::new(std::collections::HashMap::new());
}

pub(super) fn with_shard_hub<R>(f: impl FnOnce(&mut ShardHub) -> Option<R>) -> Option<R> {
    SHARD_HUB.with(|hub| hub.borrow_mut().as_mut().and_then(f))
}

impl ShardHub {
    fn start() -> ShardHub {
        let shard = shard::current();
        let replid = shard.shared.repl.info().identity.replid;
        let generation = GENERATION.with(|g| {
            g.set(g.get() + 1);
            g.get()
        });
        let mut hub = ShardHub {
            replid,
            offset: 0,
            backlog: Backlog::new(crate::repl::DEFAULT_BACKLOG_SIZE, 0),
            links: Vec::new(),
            limits: Limits::default(),
            ping_period_ms: 10_000,
            last_ping_ms: now_ms(),
            generation,
            pieces: std::collections::HashMap::new(),
        };
        hub.read_settings();
        // The stream begins by selecting the database, as Redis's does.
        hub.append(Bytes::from_static(SELECT_0));
        spawn_local(tick_forever(generation));
        hub
    }

    fn read_settings(&mut self) {
        let shard = shard::current();
        let live = &shard.shared.session.live;
        let number = |name: &str, default: u64| {
            live.get(name)
                .and_then(|v| crate::number::parse_memory(&v))
                .unwrap_or(default)
        };
        let size = (number("repl-backlog-size", 1 << 20) / shard.count as u64).max(16 * 1024);
        if self.backlog.size() != size as usize {
            self.backlog.resize(size as usize);
        }
        self.ping_period_ms = number("repl-ping-replica-period", 10).max(1) * 1000;
        let limits = live
            .get("client-output-buffer-limit")
            .and_then(|v| OutputBufferLimits::parse(&v))
            .unwrap_or_default();
        let (hard, soft, soft_s) = limits.replica;
        self.limits = Limits { hard, soft, soft_s };
    }

    /// Appends to this shard's stream: the backlog and every streaming link.
    fn append(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.backlog.append(&bytes);
        self.offset += bytes.len() as u64;
        let limits = self.limits;
        for link in &mut self.links {
            link.push(bytes.clone(), &limits);
        }
    }

    fn identity(&self) -> Identity {
        let mut identity = Identity::new(self.replid.clone());
        identity.master_repl_offset = self.offset;
        identity
    }

    pub(super) fn link(&mut self, id: u64) -> Option<&mut ShardLink> {
        self.links.iter_mut().find(|l| l.id == id && !l.dropped)
    }
}

/// An item of this shard's feed, as it is queued for the hub: its bytes go on this shard's
/// stream too, while it has one. A transaction's or a program's part over several shards
/// goes as a barrier record and its block (`repl::barrier`), which the replica applies with
/// the other shards' parts; a part of one shard is a MULTI/EXEC of its own. A program's
/// steps (pieces) wait here for its part, which closes it.
pub(in crate::server) fn tap(item: &mut FeedItem) {
    let shard_id = shard::current().id;
    let bytes = match item {
        // A WAIT waits for this shard's stream as far as it is now (behind the writes the
        // client made before it).
        FeedItem::Wait { shard_offset, .. } => {
            *shard_offset = with_shard_hub(|hub| Some(hub.offset)).unwrap_or(0);
            return;
        }
        FeedItem::Batch { bytes, .. } | FeedItem::FlushAll { bytes, .. } => bytes.clone(),
        FeedItem::Piece { id, bytes, .. } => {
            with_shard_hub(|hub| {
                hub.pieces.entry(*id).or_default().extend_from_slice(bytes);
                Some(())
            });
            return;
        }
        FeedItem::Part {
            id,
            involved,
            bytes,
            ..
        } => {
            let (id, involved, bytes) = (*id, *involved, bytes.clone());
            let Some(body) = with_shard_hub(|hub| {
                let mut body = hub.pieces.remove(&id).unwrap_or_default();
                body.extend_from_slice(&bytes);
                Some(body)
            }) else {
                return;
            };
            let bit = 1u64.checked_shl(shard_id as u32).unwrap_or(0);
            if involved.count_ones() >= 2 && involved & bit != 0 {
                barrier::record(id, involved, &body)
            } else {
                barrier::block(&body)
            }
        }
    };
    with_shard_hub(|hub| {
        // A node that follows a master streams that master's history, not its own: its
        // shard links end ([`reset_all`]) and stream nothing meanwhile.
        if !shard::current().shared.replica.is_replica() {
            hub.append(bytes);
        }
        Some(())
    });
}

/// How a shard link begins.
pub(super) enum Start {
    Continue(Bytes),
    /// A full sync of the replica at this address (with its other links: `shard_cut.rs`).
    Full((String, u16)),
}

/// On shard `i`: the PSYNC of a connection (on `conn_shard`) that is this shard's link.
/// Registers the link and returns its id and how it begins.
pub(super) fn accept(
    conn_shard: usize,
    sink: SinkKey,
    ip: String,
    conf: &LinkConf,
    psync: (Bytes, i64),
) -> (u64, Start) {
    SHARD_HUB.with(|hub| {
        let mut hub = hub.borrow_mut();
        let hub = hub.get_or_insert_with(ShardHub::start);
        // Ids never repeat on a shard: a reset hub's links may still be ending.
        let id = NEXT_ID.with(|n| {
            n.set(n.get() + 1);
            n.get()
        });
        let (replid, offset) = psync;
        let replica = (ip.clone(), conf.port);
        let mut decision = decide(&hub.identity(), Some(&hub.backlog), &replid, offset, &[]);
        if super::shard_cut::forced(&replica) {
            // The replica's links gather for one cut: this one syncs with them.
            decision = Decision::Full(crate::repl::FullReason::Requested);
        }
        let mut link = ShardLink {
            id,
            conn_shard,
            sink,
            ip: ip.clone(),
            port: conf.port,
            state: LinkState::WaitBgsave,
            ack: 0,
            ack_ms: now_ms(),
            acked: false,
            streaming: false,
            queue: OutQueue::default(),
            wake: Rc::new(Notify::default()),
            dropped: false,
        };
        let shard = shard::current().id;
        let start = match decision {
            Decision::Continue { from } => {
                link.streaming = true;
                link.state = LinkState::Online;
                link.ack = from - 1;
                let rest = hub.backlog.since(from).unwrap_or_default();
                link.push(rest, &Limits::default());
                tracing::info!(%ip, port = conf.port, shard, from, "shard link: partial resynchronization accepted");
                Start::Continue(Bytes::from(format!("+CONTINUE {}\r\n", hub.replid)))
            }
            Decision::Full(reason) => {
                tracing::info!(%ip, port = conf.port, shard, ?reason, "shard link: full resynchronization");
                if super::shard_cut::open(&replica, shard::current().count) {
                    drop_streaming(replica.clone());
                }
                Start::Full(replica)
            }
        };
        hub.links.push(link);
        // INFO's sync_full / sync_partial_ok count each shard link's sync.
        let full = matches!(start, Start::Full(_));
        spawn_local(async move {
            let _ = send_to(0, move || {
                super::hub::with_hub(|hub| match full {
                    true => hub.sync_full += 1,
                    false => hub.sync_partial_ok += 1,
                })
            })
            .await;
        });
        (id, start)
    })
}

/// On the link's shard, from the full sync: the snapshot began here now, so the link gets
/// every byte of the stream after this point; returns the history's id and that offset.
pub(super) fn cut(id: u64) -> Result<(String, u64), Gone> {
    with_shard_hub(|hub| {
        let (replid, offset) = (hub.replid.clone(), hub.offset);
        let link = hub.link(id)?;
        link.streaming = true;
        link.acked = false;
        Some((replid, offset))
    })
    .ok_or(Gone)
}

/// The links of the replica at `replica` that stream (on every shard) are dropped: they
/// come back and join its round of full syncs (those waiting for a cut stay).
fn drop_streaming(replica: (String, u16)) {
    let shards = shard::current().count;
    spawn_local(async move {
        for target in 0..shards {
            let replica = replica.clone();
            let _ = send_to(target, move || {
                with_shard_hub(|hub| {
                    for link in &mut hub.links {
                        if link.streaming && (&link.ip, link.port) == (&replica.0, replica.1) {
                            tracing::info!(ip = %link.ip, port = link.port,
                                "shard link dropped: its replica's links sync in full together");
                            link.drop_link();
                        }
                    }
                    Some(())
                });
            })
            .await;
        }
    });
}

/// Whether the link is still wanted.
pub(super) fn alive(id: u64) -> bool {
    with_shard_hub(|hub| hub.link(id).map(|_| ())).is_some()
}

pub(super) fn set_state(id: u64, state: LinkState) -> Result<(), Gone> {
    with_shard_hub(|hub| hub.link(id).map(|l| l.state = state)).ok_or(Gone)
}

/// Whether the replica shard acknowledged since its full sync began.
pub(super) fn acked(id: u64) -> Result<bool, Gone> {
    with_shard_hub(|hub| hub.link(id).map(|l| l.acked)).ok_or(Gone)
}

/// Where the link's connection is.
pub(super) fn conn_of(id: u64) -> Result<(usize, SinkKey), Gone> {
    with_shard_hub(|hub| hub.link(id).map(|l| (l.conn_shard, l.sink))).ok_or(Gone)
}

/// Writes `bytes` to link `id`'s connection, waiting while it has too much unsent.
pub(super) async fn send(id: u64, bytes: Bytes) -> Result<(), Gone> {
    let (conn_shard, sink) = conn_of(id)?;
    send_via(conn_shard, sink, bytes, |pending| {
        // What the connection holds counts against the limits at the next stream bytes
        // (as for a single-stream replica: the snapshot's own bytes alone drop no link).
        with_shard_hub(|hub| {
            hub.link(id)
                .map(|link| link.queue.set_conn_pending(pending))
        })
        .is_some()
    })
    .await
}

/// Link `id`'s task, on its shard: its synchronization, then its stream.
pub(super) async fn run(id: u64, start: Start) {
    let result = async {
        match start {
            Start::Continue(line) => send(id, line).await?,
            Start::Full(replica) => super::shard_sync::full_sync(id, replica).await?,
        }
        stream(id).await
    }
    .await;
    if let Err(Gone) = result {
        tracing::debug!(id, "shard link ended");
    }
    let conn = with_shard_hub(|hub| {
        let at = hub.links.iter().position(|l| l.id == id)?;
        let link = hub.links.remove(at);
        Some((link.conn_shard, link.sink, link.ip, link.port))
    })
    .or_else(|| GONE.with(|gone| gone.borrow_mut().remove(&id)));
    let conn = conn.map(|(conn_shard, sink, ip, port)| {
        tell_hub(ip, port, None);
        (conn_shard, sink)
    });
    if let Some((conn_shard, sink)) = conn {
        let _ = send_to(conn_shard, move || {
            if let Some(sink) = shard::current().sink(sink) {
                sink.kill();
            }
        })
        .await;
    }
}

/// Hands the link's queued stream to its connection until it is gone.
async fn stream(id: u64) -> Result<(), Gone> {
    let wake = with_shard_hub(|hub| hub.link(id).map(|l| l.wake.clone())).ok_or(Gone)?;
    loop {
        let chunk = with_shard_hub(|hub| hub.link(id).map(|l| l.queue.take(CHUNK)));
        match chunk {
            None => return Err(Gone),
            Some(chunk) if chunk.is_empty() => wake.notified().await,
            Some(chunk) => send(id, chunk).await?,
        }
    }
}

/// A `REPLCONF ACK` from link connection `sink` on `conn_shard`, on the link's shard.
pub(super) fn on_ack(conn_shard: usize, sink: SinkKey, offset: u64) {
    let now = now_ms();
    with_shard_hub(|hub| {
        let link = (hub.links.iter_mut()).find(|l| l.conn_shard == conn_shard && l.sink == sink)?;
        link.ack = link.ack.max(offset);
        link.ack_ms = now;
        link.acked = true;
        tell_hub(link.ip.clone(), link.port, Some(offset));
        Some(())
    });
}

/// Tells the hub what this shard's link of a replica acknowledged (`None`: it ended).
fn tell_hub(ip: String, port: u16, ack: Option<u64>) {
    let shard = shard::current().id;
    spawn_local(async move {
        let _ = send_to(0, move || super::hub::shard_link_ack(shard, ip, port, ack)).await;
    });
}

/// Every shard with links asks them to acknowledge now (a WAIT is waiting).
pub(super) fn getack_all() {
    let shards = shard::current().count;
    spawn_local(async move {
        for target in 0..shards {
            let _ = send_to(target, || {
                with_shard_hub(|hub| {
                    (!hub.links.is_empty()).then(|| hub.append(Bytes::from_static(GETACK)))
                });
            })
            .await;
        }
    });
}

/// Link connection `sink` on `conn_shard` closed: its link ends.
pub(super) fn closed(conn_shard: usize, sink: SinkKey) {
    with_shard_hub(|hub| {
        for link in &mut hub.links {
            if link.conn_shard == conn_shard && link.sink == sink {
                link.drop_link();
            }
        }
        Some(())
    });
}

/// On this shard: its links end and its stream's history is forgotten (the node follows a
/// master now: its data is that master's, with another history).
pub(super) fn reset_here() {
    if let Some(mut hub) = SHARD_HUB.with(|hub| hub.borrow_mut().take()) {
        for link in hub.links.drain(..) {
            // Its task ends it: the connection is closed and the hub told.
            link.wake.notify_one();
            let conn = (link.conn_shard, link.sink, link.ip, link.port);
            GONE.with(|gone| gone.borrow_mut().insert(link.id, conn));
        }
    }
}

/// [`reset_here`] on every shard.
pub(super) fn reset_all() {
    let shards = shard::current().count;
    spawn_local(async move {
        for target in 0..shards {
            let _ = send_to(target, reset_here).await;
        }
    });
}

/// The shard hub's timer: the stream's PINGs, soft output limits, settings; it ends with
/// its hub.
async fn tick_forever(generation: u64) {
    loop {
        sleep(TICK).await;
        let now = now_ms();
        let live = with_shard_hub(|hub| {
            if hub.generation != generation {
                return None;
            }
            hub.read_settings();
            if !hub.links.is_empty() && now.saturating_sub(hub.last_ping_ms) >= hub.ping_period_ms {
                hub.last_ping_ms = now;
                hub.append(Bytes::from_static(PING));
            }
            let limits = hub.limits;
            for link in &mut hub.links {
                if !link.dropped && link.queue.tick(now, &limits).is_err() {
                    tracing::warn!(ip = %link.ip, port = link.port,
                        "shard link over its soft output limit too long; dropping it");
                    link.drop_link();
                }
            }
            Some(())
        });
        if live.is_none() {
            return;
        }
    }
}

/// A refusal written to a link connection's PSYNC (its reply slot is silent).
pub(super) fn refuse(conn_shard: usize, sink: SinkKey, line: &'static str) {
    spawn_local(async move {
        let _ = corewire::runtime::submit_to(conn_shard, move || async move {
            push_here(sink, Some(Bytes::from_static(line.as_bytes())))
        })
        .await;
    });
}
