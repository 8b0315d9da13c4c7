//! The link to the master, one task on shard 0: connect, handshake, load a snapshot or
//! continue, then apply the stream until the link breaks; reconnect every second while this
//! REPLICAOF holds. When the master consents to shard links (`+SHARD-STREAMS N`), this
//! connection ends there and each shard runs its own link ([`super::shard_links`]), with
//! the same session code ([`Which`] says whose): until they end, this task waits.
//!
//! The stream's commands run as the master's client: the link is a registered reply sink
//! and dispatches through [`Shard::dispatch`] like a connection, so per-shard FIFO keeps
//! single-shard order, and a transaction or a command over several shards holds back what
//! follows until it ran (the same rule a connection follows). No reply goes back but
//! `REPLCONF ACK <offset>`, sent every second and after `REPLCONF GETACK`, for the offset
//! of the commands that ran.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::net::ToSocketAddrs;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use corewire::runtime::fs::remove_file;
use corewire::runtime::sync::WakerCell;
use corewire::runtime::timer::sleep_until;

use super::super::shard::{now_ms, Shard};
use super::super::shared::ServerShared;
use super::super::sink::{Merges, Origin, Part, ReplySink, SinkKey};
use super::barriers::Step;
use super::stream::MasterStream;
use super::Which;
use crate::repl::barrier::{BarrierId, Retract};
use crate::repl::forward::Forwarder;
use crate::repl::handshake::{
    request, take_line, Handshake, HandshakeConfig, HandshakeError, Next, Outcome,
};
use crate::repl::stream::{Applied, Item, StreamReader};
use crate::repl::transfer::RdbReceiver;
use crate::repl::MasterLinkState as LinkState;
use crate::reply::Reply;

/// Commands dispatched and not yet run, at most (then the link stops reading).
const MAX_IN_FLIGHT: usize = 1024;
/// Input buffered past what is parsed, at most (a single request may need more; the
/// parser's own limits bound that).
const MAX_INPUT: usize = 1 << 20;
/// The largest snapshot accepted (spooled to `dir`, loaded piece by piece).
const MAX_SNAPSHOT: u64 = 1 << 40;
/// Between two attempts to connect (Redis retries from its once-a-second cron).
const RETRY: Duration = Duration::from_secs(1);
/// Between two `REPLCONF ACK`s.
const ACK_PERIOD: Duration = Duration::from_secs(1);

/// The link's reply sink: replies only say a command ran.
pub(super) struct Link {
    pub(super) core: RefCell<Core>,
    task: WakerCell,
    woken: Cell<bool>,
    shared: Arc<ServerShared>,
}

pub(super) struct Core {
    pub(super) merges: Merges,
    pub(super) applied: Applied,
}

impl ReplySink for Link {
    fn deliver(&self, seq: u64, part: Part, reply: Reply) {
        {
            let mut core = self.core.borrow_mut();
            let Core { merges, applied } = &mut *core;
            if let Some(reply) = merges.accept(seq, part, reply, || self.shared.info()) {
                note_reply(&reply);
                applied.completed(seq);
            }
        }
        self.wake();
    }

    /// A new REPLICAOF: the link looks at its generation now.
    fn kill(&self) {
        self.wake();
    }
}

impl Link {
    fn wake(&self) {
        self.woken.set(true);
        self.task.wake();
    }

    fn take_woken(&self) -> bool {
        self.woken.replace(false)
    }

    pub(super) fn new(shared: Arc<ServerShared>) -> Rc<Link> {
        Rc::new(Link {
            core: RefCell::new(Core {
                merges: Merges::default(),
                applied: Applied::new(0, MAX_IN_FLIGHT),
            }),
            task: WakerCell::new(),
            woken: Cell::new(false),
            shared,
        })
    }

    pub(super) fn applied(&self) -> u64 {
        self.core.borrow().applied.offset()
    }

    fn is_idle(&self) -> bool {
        self.core.borrow().applied.is_idle()
    }

    /// Waits until every command dispatched has run.
    pub(super) async fn drain(&self) {
        while !self.is_idle() {
            poll_fn(|cx| {
                if self.take_woken() || self.is_idle() {
                    return Poll::Ready(());
                }
                self.task.register(cx.waker());
                Poll::Pending
            })
            .await;
        }
    }
}

/// An error reply to the master's command: Redis logs those too (the data may diverge).
pub(super) fn note_reply(reply: &Reply) {
    if let Reply::Error(text) = reply {
        tracing::warn!(
            error = %String::from_utf8_lossy(text),
            "a command from the master failed"
        );
    }
}

/// Why the link dropped.
#[derive(Debug)]
pub(super) enum LinkError {
    Io(io::Error),
    Closed,
    Timeout,
    /// The master refused a shard's link: the node goes back to the single stream.
    LinkRefused(String),
    Other(String),
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkError::Io(e) => write!(f, "{e}"),
            LinkError::Closed => f.write_str("the master closed the connection"),
            LinkError::Timeout => f.write_str("timeout: no data from the master"),
            LinkError::LinkRefused(why) => write!(f, "the master refused a shard link: {why}"),
            LinkError::Other(why) => f.write_str(why),
        }
    }
}

impl From<io::Error> for LinkError {
    fn from(e: io::Error) -> LinkError {
        LinkError::Io(e)
    }
}

fn other(e: impl std::fmt::Display) -> LinkError {
    LinkError::Other(e.to_string())
}

/// The link's task for REPLICAOF generation `generation`.
pub(super) async fn run(shard: Rc<Shard>, generation: u64) {
    let shared = shard.shared.clone();
    let link = Link::new(shared.clone());
    let mut seq = 0;
    // (Only a shard's link is ever refused.)
    let _ = run_link(&shard, &link, Which::Single, generation, &mut seq).await;
}

/// Sessions of one link (the single stream's, or a shard's) while `generation` holds (and,
/// for a shard's, while the node stays on shard links), one attempt a second. `Err`: a
/// shard's link was refused.
pub(super) async fn run_link(
    shard: &Rc<Shard>,
    link: &Rc<Link>,
    which: Which,
    generation: u64,
    seq: &mut u64,
) -> Result<(), LinkError> {
    let shared = shard.shared.clone();
    let replica = &shared.replica;
    let key = shard.register(link.clone());
    let packed = key.pack().wrapping_add(1);
    let slot = replica.slot(which);
    slot.master_sink.store(packed, Ordering::Relaxed);
    let mut outcome = Ok(());
    while replica.still(which, generation) {
        let result = session(shard, link, key, generation, seq, which).await;
        // What was dispatched runs before anything from a new link (or a promotion).
        link.drain().await;
        slot.applied_offset.store(link.applied(), Ordering::Relaxed);
        if !replica.still(which, generation) {
            break;
        }
        replica.set_link_state(which, LinkState::Connect);
        super::sync_gate(&shared);
        match result {
            Ok(Some(n)) => {
                // The master consented to shard links: they run until they end.
                Box::pin(super::shard_links::run_all(shard, generation, n)).await;
                continue;
            }
            Ok(None) => {}
            Err(LinkError::LinkRefused(why)) => {
                tracing::warn!(%why, "the master refused a shard link; back to one stream");
                replica.link_failed(format!("shard link refused: {why}"));
                outcome = Err(LinkError::LinkRefused(why));
                break;
            }
            Err(error) => {
                tracing::warn!(%error, ?which, "the link with the MASTER is down; retrying");
                replica.link_failed(error.to_string());
            }
        }
        let retry_at = Instant::now() + RETRY;
        while Instant::now() < retry_at && replica.still(which, generation) {
            wait_for(link, None, &mut BytesMut::new(), retry_at)
                .await
                .ok();
        }
    }
    let _ = slot
        .master_sink
        .compare_exchange(packed, 0, Ordering::Relaxed, Ordering::Relaxed);
    shard.unregister(key);
    outcome
}

/// What woke the link.
enum Event {
    Read(usize),
    Woken,
    Tick,
}

/// Waits for input (appended to `input`, when `stream` is given), a wake-up, or `deadline`.
async fn wait_for(
    link: &Link,
    stream: Option<&MasterStream>,
    input: &mut BytesMut,
    deadline: Instant,
) -> io::Result<Event> {
    let mut timer = sleep_until(deadline);
    poll_fn(|cx| {
        if link.take_woken() {
            return Poll::Ready(Ok(Event::Woken));
        }
        link.task.register(cx.waker());
        if let Some(stream) = stream {
            if let Poll::Ready(read) = stream.poll_recv(cx, input) {
                return Poll::Ready(read.map(Event::Read));
            }
        }
        if Pin::new(&mut timer).poll(cx).is_ready() {
            return Poll::Ready(Ok(Event::Tick));
        }
        Poll::Pending
    })
    .await
}

/// The link's I/O: the stream, its input and the `repl-timeout` deadline.
struct Conn {
    stream: MasterStream,
    input: BytesMut,
    timeout: Duration,
    last_io: Instant,
}

impl Conn {
    /// Reads more (or returns at a wake-up, to look at the generation). Errors at the end
    /// of the stream and after `repl-timeout` without data.
    async fn read_more(&mut self, link: &Link, shared: &ServerShared) -> Result<(), LinkError> {
        // (Each link's own deadline; INFO's last-io is the node's: any link's bytes.)
        let deadline = self.last_io + self.timeout;
        match wait_for(link, Some(&self.stream), &mut self.input, deadline).await? {
            Event::Read(0) => Err(LinkError::Closed),
            Event::Read(_) => {
                self.last_io = Instant::now();
                shared.replica.touched();
                Ok(())
            }
            Event::Woken => Ok(()),
            Event::Tick if Instant::now() >= deadline => Err(LinkError::Timeout),
            Event::Tick => Ok(()),
        }
    }
}

/// One connection to the master, until it breaks or this REPLICAOF is replaced. `Some(n)`:
/// the master consented to `n` shard links (this connection ends there).
async fn session(
    shard: &Rc<Shard>,
    link: &Rc<Link>,
    key: SinkKey,
    generation: u64,
    seq: &mut u64,
    which: Which,
) -> Result<Option<usize>, LinkError> {
    let shared = shard.shared.clone();
    let replica = &shared.replica;
    let Some((host, port)) = replica.target() else {
        return Ok(None);
    };
    replica.set_link_state(which, LinkState::Connecting);
    let addr = (host.as_str(), port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| other(format!("no address for {host}")))?;
    let live = &shared.session.live;
    let timeout = Duration::from_secs(
        live.get("repl-timeout")
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );
    // With `tls-replication yes` the link runs over TLS (the handshake within the timeout).
    let tls = (shared.tls.as_ref()).and_then(|tls| tls.replication_connector());
    // `bind-source-addr`: the address the master sees this replica connect from.
    let source = match live.get("bind-source-addr").filter(|a| !a.is_empty()) {
        None => None,
        Some(source) => Some(
            source
                .parse()
                .map_err(|_| other(format!("bind-source-addr {source:?} is no IP address")))?,
        ),
    };
    let connect = MasterStream::open(live, source, addr, &host, tls);
    let stream = corewire::runtime::timer::timeout(timeout, connect)
        .await
        .map_err(|_| LinkError::Timeout)??;
    tracing::info!(%host, port, ?which, "MASTER <-> REPLICA sync started");
    replica.set_link_state(which, LinkState::Handshake);
    let mut conn = Conn {
        stream,
        input: BytesMut::new(),
        timeout,
        last_io: Instant::now(),
    };
    let outcome = handshake(&mut conn, link, &shared, generation, which).await?;
    let Some(outcome) = outcome else {
        return Ok(None);
    };
    if which == Which::Single && !matches!(outcome, Outcome::ShardLinks(_)) {
        // The single stream again: what shard links applied is not a position in it.
        replica.use_shard_links(0);
    }
    let start = match outcome {
        Outcome::ShardLinks(n) => return Ok(Some(n)),
        Outcome::FullResync { replid, offset } => {
            tracing::info!(%replid, offset, ?which, "full resync from the master");
            if let Which::Shard { i, n } = which {
                replica.cut_began(i, n);
            }
            replica.set_link_state(which, LinkState::Sync);
            // The snapshot goes to a temporary file in `dir` as it arrives (clients keep
            // the old data meanwhile), then loads from there piece by piece.
            let dir = super::super::rdb_save::target(&shared).dir;
            let suffix = match which {
                Which::Single => "-replica".to_owned(),
                Which::Shard { i, .. } => format!("-replica-shard{i}"),
            };
            let (path, file) = super::super::rdb_save::create_temp(&dir, &suffix).await;
            let file =
                file.map_err(|e| other(format!("temporary file {}: {e}", path.display())))?;
            let loaded = async {
                let mut receiver = RdbReceiver::new(MAX_SNAPSHOT);
                loop {
                    let piece = receiver.feed(&mut conn.input).map_err(other)?;
                    if !piece.bytes.is_empty() {
                        let at = receiver.received() - piece.bytes.len() as u64;
                        file.write_all_at(Bytes::from(piece.bytes), at).await?;
                    }
                    if piece.done {
                        break;
                    }
                    if !replica.still(which, generation) {
                        return Ok(None);
                    }
                    conn.read_more(link, &shared).await?;
                }
                tracing::info!(
                    bytes = receiver.received(),
                    ?which,
                    "MASTER <-> REPLICA sync: loading the snapshot"
                );
                let loaded = match which {
                    Which::Single => {
                        // This node's replicas follow the old data: they resynchronize
                        // (Redis disconnects them as it loads a new master's snapshot).
                        super::super::repl_master::drop_replicas();
                        super::load::full_sync(shard, key, &file, receiver.received()).await
                    }
                    // Shard links have no sub-replicas (`shard_links.rs`).
                    Which::Shard { .. } => {
                        super::load::shard_part(shard, key, &file, receiver.received()).await
                    }
                };
                loaded.map(Some).map_err(other)
            }
            .await;
            let _ = file.close().await;
            let _ = remove_file(&path).await;
            let Some(keys) = loaded? else {
                return Ok(None);
            };
            tracing::info!(
                keys,
                ?which,
                "MASTER <-> REPLICA sync: finished with success"
            );
            if which == Which::Single {
                super::super::repl_master::follow(replid.clone(), offset, true);
            }
            replica.synced(which, replid, offset);
            if let Which::Shard { i, .. } = which {
                replica.cut_loaded(i);
            }
            offset
        }
        Outcome::Continue { .. } if matches!(which, Which::Shard { i, .. } if replica.cut_awaits(i)) =>
        {
            // The other links loaded a cut this link has not: its stream is not theirs.
            replica.slot(which).forget();
            return Err(other(
                "the master's other shard links synced in full: this one does too",
            ));
        }
        Outcome::Continue { new_replid } => {
            tracing::info!(
                ?which,
                "successful partial resynchronization with the master"
            );
            if let Some(id) = new_replid {
                replica.switched_history(which, id);
            }
            let offset = replica.applied(which);
            if let (Which::Single, Some((id, _))) = (which, replica.resume_point(which)) {
                super::super::repl_master::follow(id, offset, false);
            }
            offset
        }
    };
    link.core.borrow_mut().applied = Applied::new(start, MAX_IN_FLIGHT);
    replica.set_offsets(which, start, start);
    replica.set_link_state(which, LinkState::Connected);
    super::sync_gate(&shared);
    apply_stream(shard, link, key, generation, seq, conn, start, which)
        .await
        .map(|()| None)
}

/// PING .. PSYNC. `None`: this REPLICAOF was replaced meanwhile.
async fn handshake(
    conn: &mut Conn,
    link: &Link,
    shared: &ServerShared,
    generation: u64,
    which: Which,
) -> Result<Option<Outcome>, LinkError> {
    let live = &shared.session.live;
    let setting = |name: &str| live.get(name).filter(|v| !v.is_empty()).map(Bytes::from);
    let auth = setting("masterauth").map(|password| (setting("masteruser"), password));
    let announced_port = live
        .get("replica-announce-port")
        .and_then(|v| v.parse::<u16>().ok())
        .filter(|&p| p != 0);
    // The port bound (a server started with port 0 learns it once listening).
    let bound = Some(shared.tcp_port.load(Ordering::Relaxed)).filter(|&p| p != 0);
    // Over TLS the master is told the TLS port, as Redis does.
    let tls_port = (shared.tls.as_ref())
        .map(|tls| tls.settings())
        .filter(|settings| settings.replication && settings.port != 0)
        .map(|settings| settings.port);
    let configured = live.get("port").and_then(|v| v.parse::<u16>().ok());
    let config = HandshakeConfig {
        auth,
        listening_port: (announced_port.or(tls_port).or(bound).or(configured)).unwrap_or(0),
        announce_ip: setting("replica-announce-ip"),
        resume: shared.replica.resume_point(which),
        // Shard links are offered only by a build that applies them, and not by a node a
        // sub-replica asked for a stream (see `shard_links.rs`).
        shards: match which {
            Which::Shard { n, .. } => n,
            Which::Single if super::shard_links::offers(shared) => {
                super::super::shard::current().count
            }
            Which::Single => 1,
        },
        link: match which {
            Which::Shard { i, .. } => Some(i),
            Which::Single => None,
        },
    };
    let (mut handshake, first) = Handshake::start(config);
    conn.stream.send_all(first).await?;
    loop {
        let line = loop {
            if let Some(line) = take_line(&mut conn.input, 4096).map_err(other)? {
                break line;
            }
            if !shared.replica.still(which, generation) {
                return Ok(None);
            }
            conn.read_more(link, shared).await?;
        };
        let next = handshake.on_line(&line).map_err(|e| match e {
            HandshakeError::LinkRefused(why) => LinkError::LinkRefused(why),
            e => other(e),
        })?;
        match next {
            Next::Send(bytes) => conn.stream.send_all(bytes).await?,
            Next::Done(outcome) => return Ok(Some(outcome)),
        }
    }
}

/// Applies the master's stream from offset `start` until the link breaks.
///
/// A shard's link applies its shard's stream on its shard: keyed commands stay here, and a
/// FLUSHALL / FLUSHDB (which every shard's stream carries, alone or in that shard's part of
/// a transaction) empties this shard only, once what was dispatched before it ran (the
/// part's other commands run with it, in one go). Shard links pass nothing on and are not held (a node
/// on shard links has no sub-replicas).
#[allow(clippy::too_many_arguments)]
async fn apply_stream(
    shard: &Rc<Shard>,
    link: &Rc<Link>,
    key: SinkKey,
    generation: u64,
    seq: &mut u64,
    mut conn: Conn,
    start: u64,
    which: Which,
) -> Result<(), LinkError> {
    let shared = shard.shared.clone();
    let replica = &shared.replica;
    let single = which == Which::Single;
    let slot = replica.slot(which);
    // A shard link's FLUSHALL (alone, or in its transaction part) read while commands
    // before it still run: it waits here, then runs on this shard only.
    let mut flush_waiting: Option<(Vec<crate::command::Command>, u64)> = None;
    // A shard link's barrier (see `barriers.rs`): the record read (its id, shards, and
    // the offset before it), its part read and waiting for the link to be idle, the
    // stream held at it until its parts ran (the part's end, the record's start), and
    // the parts this link dispatched.
    let mut barrier: Option<(BarrierId, u64, u64)> = None;
    let mut part_ready: Option<(BarrierId, u64, Vec<crate::command::TxnItem>, u64, u64)> = None;
    let mut held_at: Option<(u64, u64)> = None;
    let mut applying: Option<BarrierId> = None;
    let mut reader = StreamReader::new(start, shared.session.parser_limits);
    // What was read goes on to this node's own replicas once applied.
    let mut forward = Forwarder::new(start);
    forward.read(&conn.input);
    let mut db = 0;
    let mut ack_wanted = true;
    let mut next_ack = Instant::now();
    let mut warned_db = false;
    let result = 'link: loop {
        if !replica.still(which, generation) {
            break Ok(());
        }
        // Parse and dispatch what is buffered, as far as ordering and the bound allow.
        let now = now_ms();
        let mut waiting_for_bytes = false;
        let held = single && replica.held();
        if single && !held {
            replica.set_quiet(false);
        }
        loop {
            if held || shard.txn.is_held_back(key) || link.core.borrow().applied.is_full() {
                break;
            }
            if let Some(id) = applying {
                if !link.is_idle() {
                    break;
                }
                applying = None;
                super::barriers::finish(&shared, id);
                replica.barriers.released(shard.id);
            }
            if let Some((end, _)) = held_at {
                if !replica.barriers.released(shard.id) {
                    break;
                }
                held_at = None;
                link.core.borrow_mut().applied.counted(end);
                continue;
            }
            if let Some((id, involved, items, start, end)) = part_ready.take() {
                if !link.is_idle() {
                    part_ready = Some((id, involved, items, start, end));
                    break;
                }
                match super::barriers::arrive(&shared, shard.id, id, involved, items) {
                    Ok(Step::Hold) | Ok(Step::Spawned) => held_at = Some((end, start)),
                    Ok(Step::Dispatch(command)) => {
                        let mut core = link.core.borrow_mut();
                        let Core { merges, applied } = &mut *core;
                        *seq += 1;
                        applied.dispatched(*seq, end);
                        if let Some(reply) = shard.dispatch(key, *seq, command, merges, now) {
                            note_reply(&reply);
                            applied.completed(*seq);
                        }
                        applying = Some(id);
                    }
                    Err(error) => {
                        break 'link Err(other(format!(
                            "a transaction's part out of place ({error:?}, {id:?})"
                        )))
                    }
                }
                continue;
            }
            if let Some((commands, end)) = flush_waiting.take() {
                if !link.is_idle() {
                    flush_waiting = Some((commands, end));
                    break;
                }
                let origin = Origin {
                    shard: shard.id,
                    sink: key,
                    seq: 0,
                    part: None,
                };
                // In one go: a transaction part stays whole for this shard's readers.
                for command in commands {
                    if let Some(reply) = shard.execute_store(origin, command, now) {
                        note_reply(&reply);
                    }
                }
                link.core.borrow_mut().applied.counted(end);
                continue;
            }
            let before = reader.offset();
            let framed = match reader.next(&mut conn.input) {
                Ok(Some(framed)) => framed,
                Ok(None) => {
                    waiting_for_bytes = true;
                    break;
                }
                Err(error) => break 'link Err(other(error)),
            };
            let mut core = link.core.borrow_mut();
            let Core { merges, applied } = &mut *core;
            if let Some((id, involved, start)) = barrier.take() {
                match framed.item {
                    Item::Apply(crate::command::Command::Transaction(transaction)) => {
                        part_ready = Some((id, involved, transaction.items, start, framed.end));
                        continue;
                    }
                    item => {
                        break 'link Err(other(format!(
                            "a barrier record not followed by its block: {item:?}"
                        )))
                    }
                }
            }
            match framed.item {
                Item::Barrier { id, involved } if !single && db == 0 => {
                    barrier = Some((id, involved, before));
                }
                Item::Barrier { .. } => applied.counted(framed.end),
                Item::Apply(command) if db == 0 && !single && flushes(&command) => {
                    flush_waiting = Some((here_only(command), framed.end));
                }
                Item::Apply(command) if db == 0 => {
                    *seq += 1;
                    applied.dispatched(*seq, framed.end);
                    if let Some(reply) = shard.dispatch(key, *seq, command, merges, now) {
                        note_reply(&reply);
                        applied.completed(*seq);
                    }
                }
                Item::Apply(command) => {
                    if !warned_db {
                        warned_db = true;
                        tracing::error!(
                            db,
                            command = command.name(),
                            "the master writes to a database other than 0, which \
                             corewire-kv does not have: those writes are skipped"
                        );
                    }
                    applied.counted(framed.end);
                }
                Item::GetAck => {
                    ack_wanted = true;
                    applied.counted(framed.end);
                }
                Item::Select(index) => {
                    db = index;
                    applied.counted(framed.end);
                }
                Item::Skip => applied.counted(framed.end),
                Item::Invalid { name, why } => {
                    tracing::warn!(command = %name, %why, "a command from the master was not understood");
                    applied.counted(framed.end);
                }
            }
        }
        let applied = link.applied();
        if single {
            super::super::repl_master::follow_stream(forward.applied(applied));
        }
        if held && link.is_idle() {
            replica.set_quiet(true);
        }
        slot.read_offset.store(
            reader.offset() + reader.partial() + conn.input.len() as u64,
            Ordering::Relaxed,
        );
        slot.applied_offset.store(applied, Ordering::Relaxed);
        let now = Instant::now();
        if (ack_wanted && link.is_idle()) || now >= next_ack {
            let offset = applied.to_string();
            let ack = request(&[b"REPLCONF", b"ACK", offset.as_bytes()]);
            if let Err(error) = conn.stream.send_all(ack).await {
                break Err(error.into());
            }
            ack_wanted &= !link.is_idle();
            next_ack = now + ACK_PERIOD;
        }
        // Read only while the buffer has room, or when what is buffered is incomplete.
        let read = waiting_for_bytes || conn.input.len() < MAX_INPUT;
        let deadline = (conn.last_io + conn.timeout).min(next_ack);
        let stream = read.then_some(&conn.stream);
        let had = conn.input.len();
        match wait_for(link, stream, &mut conn.input, deadline).await {
            Ok(Event::Read(0)) => break Err(LinkError::Closed),
            Ok(Event::Read(_)) => {
                if single {
                    forward.read(&conn.input[had..]);
                }
                conn.last_io = Instant::now();
                replica.touched();
            }
            Ok(Event::Woken) => {}
            Ok(Event::Tick) => {
                if Instant::now() >= conn.last_io + conn.timeout {
                    break Err(LinkError::Timeout);
                }
            }
            Err(error) => break Err(error.into()),
        }
    };
    // A new link continues after the last whole item taken (a MULTI block cut short comes
    // again whole).
    link.drain().await;
    let mut resume = match flush_waiting {
        // Not applied: it comes again, after what ran before it.
        Some(_) => link.applied(),
        None => reader.resume_offset(),
    };
    if let Some(id) = applying {
        // What this link dispatched ran (drained): the held links go on.
        super::barriers::finish(&shared, id);
    }
    // A record read whose part did not arrive comes again whole.
    if let Some((_, _, start)) = barrier {
        resume = start;
    }
    if let Some((_, _, _, start, _)) = part_ready {
        resume = start;
    }
    if !single {
        match replica.barriers.retract(shard.id) {
            Retract::Nothing => {}
            Retract::Retracted => {
                if let Some((_, start)) = held_at {
                    resume = start;
                }
            }
            Retract::InFlight => {
                // The parts are being applied (this one with them): after them.
                while !replica.barriers.released(shard.id) {
                    corewire::runtime::sleep(Duration::from_millis(1)).await;
                }
                if let Some((end, _)) = held_at {
                    resume = end;
                }
            }
        }
    }
    if single {
        // The next link continues after `resume`: what was read past it comes again.
        super::super::repl_master::follow_stream(forward.end(resume));
        replica.set_quiet(true);
    }
    let mut core = link.core.borrow_mut();
    core.applied = Applied::new(resume, MAX_IN_FLIGHT);
    drop(core);
    replica.set_offsets(which, resume, resume);
    result
}

/// FLUSHALL or FLUSHDB, which a shard link applies to its own shard only.
fn is_flush(command: &crate::command::Command) -> bool {
    use crate::command::{Command, KeyCommand, KeyOp};
    matches!(
        command,
        Command::FlushAll
            | Command::Key(KeyCommand {
                op: KeyOp::FlushDb,
                ..
            })
    )
}

/// A flush, or a transaction part holding one: dispatched, it would reach every shard.
fn flushes(command: &crate::command::Command) -> bool {
    use crate::command::{Command, TxnItem};
    match command {
        Command::Transaction(transaction) => (transaction.items.iter())
            .any(|item| matches!(item, TxnItem::Run(command) if is_flush(command))),
        command => is_flush(command),
    }
}

/// The commands of a shard link's flush or transaction part, to run on its shard alone
/// (every other command of the part names this shard's keys).
fn here_only(command: crate::command::Command) -> Vec<crate::command::Command> {
    use crate::command::{Command, TxnItem};
    match command {
        Command::Transaction(transaction) => (transaction.items.into_iter())
            .filter_map(|item| match item {
                TxnItem::Run(command) => Some(command),
                TxnItem::Answered(_) => None,
            })
            .collect(),
        command => vec![command],
    }
}
