//! One RDMA connection: a reliable-connected queue pair on its device's CQ, receiving into
//! the shard's shared receive queue (or buffers of its own), frames carried as a byte stream
//! over SEND messages (small frames share a message; large ones span several). The flow
//! policy (credits, grants, acks, send slots) lives in [`super::flow`]; this file posts and
//! dispatches completions.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use corewire_runtime::sync::{Notify, WakerCell};
use corewire_runtime::{spawn_local, Budget, RoundBudget};
use corewire_verbs::{
    Access, MemoryRegion, QpCaps, QueuePair, SendOp, SendWr, WcStatus, WorkCompletion,
};

use super::device::{CqReservation, Device};
use super::flow::{Flow, Incoming, RESERVED_FOR_ACKS};
use super::keepalive::Keepalive;
use super::large::control::{self, Descriptor, Record, CONTROL_IMM, DESCRIPTOR_LEN, DONE_LEN};
use super::large::incoming::{self, AssemblyError};
use super::large::outgoing::{Outgoing, ID_MASK};
use super::large::registered::{user_region, Held, Tracked};
use super::pool::{ChunkId, PoolError};
use super::shard::RdmaShard;
use super::wakeups::SendWait;
use super::wr_id::{WrId, WrKind};
use super::{RdmaConfig, ReceiveQueues};
use crate::conn::{ConnStats, ConnStatsCells, Connection, OutQueue, TransportError, TransportKind};
use crate::frame::{Frame, FrameDecoder, FrameEncoder, FrameHeader};

/// Buffers a writer pulls from the out queue per round.
const WRITE_BATCH: usize = 256;

/// The queue sizes of every connection's queue pair: sends bounded by the peer's window
/// (credits) plus acks and one spare, and the RDMA READs of large messages; receives for
/// the window plus the credit acks, unless the shard's shared receive queue takes them.
pub(crate) fn queue_sizes(config: &RdmaConfig) -> QpCaps {
    let depth = config.window + RESERVED_FOR_ACKS;
    let shared = matches!(config.receive, ReceiveQueues::Shared { .. });
    QpCaps {
        max_send_wr: depth + 4 + read_slots(config) + KEEPALIVE_SLOTS,
        max_recv_wr: if shared { 0 } else { depth },
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

/// Send-queue slots kept for keepalive probes (one in flight at most).
const KEEPALIVE_SLOTS: u32 = 1;

/// Send-queue slots kept for the RDMA READs of large messages.
fn read_slots(config: &RdmaConfig) -> u32 {
    config.large_in_flight.max(1)
}

/// Completion queue entries a queue pair of these sizes can fill.
pub(crate) fn cq_entries_needed(caps: &QpCaps) -> u32 {
    caps.max_send_wr + caps.max_recv_wr
}

pub(crate) struct ConnCore {
    slot: u32,
    generation: u16,
    shard: Rc<RdmaShard>,
    device: Rc<Device>,
    qp: RefCell<Option<QueuePair>>,
    /// CQ entries held for the queue pair: given back after it is destroyed.
    cq: RefCell<Option<CqReservation>>,
    peer: Option<SocketAddr>,
    /// Receives come from the device's shared receive queue (else from `recv_chunks`).
    shared: bool,
    /// Receive buffers this connection owns (posted, or held back by backpressure), without
    /// a shared receive queue.
    recv_chunks: RefCell<Vec<ChunkId>>,
    held: RefCell<Vec<ChunkId>>,
    /// Send buffers posted and not yet completed.
    sending: RefCell<Vec<ChunkId>>,
    /// The largest message the peer accepts.
    peer_chunk: usize,
    /// The most grants our peer may hold.
    window: u32,
    /// Credits, grants, acks and send slots (the policy; this file only posts).
    flow: RefCell<Flow>,
    rx: RefCell<BytesMut>,
    decoder: RefCell<FrameDecoder>,
    encoder: RefCell<FrameEncoder>,
    reader: Notify,
    /// A `recv` is running (one reader at a time).
    reading: Cell<bool>,
    /// That `recv` is waiting for the rest of a frame: grants are given back at once (the
    /// reader is not behind), whatever is buffered; frame limits bound it.
    reader_waiting: Cell<bool>,
    out: OutQueue,
    writer: Notify,
    /// Why the connection ended, once it has.
    ended: RefCell<Option<String>>,
    /// It ended by a failure (a work completion or post that failed, a QP error, a bad
    /// frame), not by either side closing: `recv` reports the reason instead of an orderly
    /// end of stream.
    failed: Cell<bool>,
    torn_down: Cell<bool>,
    stats: ConnStatsCells,
    budget: Budget,
    /// This round's use of `budget`, charged by `recv`.
    round: RefCell<RoundBudget>,
    /// Large messages (`super::large`): parts of at least this many bytes go by descriptor.
    large_threshold: Option<usize>,
    /// What we sent by descriptor, registered until the peer's "done".
    outgoing: RefCell<Outgoing<Held>>,
    /// Where the peer's large messages stand in our stream, and their assembly into frames.
    incoming: RefCell<incoming::Incoming>,
    /// Our RDMA READs in flight, by the peer's id: the buffers they fill.
    reads: RefCell<HashMap<u32, Tracked>>,
    /// Work completions of this connection so far (what the keepalive calls activity).
    completions: Cell<u64>,
    /// Established and carrying frames (`run` was called): only then may a probe go out, a
    /// queue pair still being connected is not ready to send.
    running: Cell<bool>,
    keepalive: Cell<Keepalive>,
    /// "Done"s owed to the peer (sent by the writer task, which `control_waker` wakes).
    dones: RefCell<Vec<u32>>,
    control_waker: WakerCell,
}

/// What [`ConnCore::start`] needs besides the shard: the queue pair (created on `device`
/// with [`queue_sizes`] under the CQ reservation `cq`, not connected yet), the grants our
/// handshake gives the peer, and the peer's window and buffer size (window 0 until known).
pub(crate) struct ConnParts {
    pub device: Rc<Device>,
    pub qp: QueuePair,
    pub cq: CqReservation,
    pub granted: u32,
    pub peer_window: u32,
    pub peer_chunk: usize,
}

impl ConnCore {
    /// Register a connection on the shard and post its receive buffers (none with a shared
    /// receive queue). On failure the queue pair is handed back so the caller can still
    /// reject the peer through its id.
    pub(crate) fn start(
        shard: &Rc<RdmaShard>,
        parts: ConnParts,
    ) -> Result<Rc<ConnCore>, (super::RdmaError, Option<QueuePair>)> {
        let ConnParts {
            device,
            qp,
            cq,
            granted,
            peer_window,
            peer_chunk,
        } = parts;
        let config = shard.config();
        let sizes = queue_sizes(&config);
        let shared = device.srq.is_some();
        let chunks = if shared {
            Vec::new()
        } else {
            match device
                .pool
                .borrow_mut()
                .alloc_recv(sizes.max_recv_wr as usize)
            {
                Ok(c) => c,
                Err(e) => {
                    // Nothing was posted on the queue pair: its CQ entries are free again.
                    drop(cq);
                    return Err((super::RdmaError::Pool(e), Some(qp)));
                }
            }
        };
        let peer = qp.cm_id().peer_addr();
        let qp_num = qp.qp_num();
        // What the CQ reservation covers, even if the device granted more; the READ slots
        // are not the flow's.
        let max_sends = qp.caps().max_send_wr.min(sizes.max_send_wr) - read_slots(&config);
        let conn = shard.add_conn(|slot, generation| {
            Rc::new(ConnCore {
                slot,
                generation,
                shard: shard.clone(),
                device: device.clone(),
                qp: RefCell::new(Some(qp)),
                cq: RefCell::new(Some(cq)),
                peer,
                shared,
                recv_chunks: RefCell::new(chunks.clone()),
                held: RefCell::new(Vec::new()),
                sending: RefCell::new(Vec::new()),
                peer_chunk: peer_chunk.min(config.chunk_size),
                window: config.window,
                flow: RefCell::new(Flow::new(peer_window, granted, max_sends)),
                rx: RefCell::new(BytesMut::new()),
                decoder: RefCell::new(FrameDecoder::new(config.limits)),
                encoder: RefCell::new(FrameEncoder::new(config.limits)),
                reader: Notify::new(),
                reading: Cell::new(false),
                reader_waiting: Cell::new(false),
                out: OutQueue::without_copies(config.max_queued_bytes),
                writer: Notify::new(),
                ended: RefCell::new(None),
                failed: Cell::new(false),
                torn_down: Cell::new(false),
                stats: ConnStatsCells::default(),
                budget: config.budget,
                round: RefCell::new(RoundBudget::new(config.budget)),
                large_threshold: config.large_message_threshold.filter(|&t| t > 0),
                outgoing: RefCell::new(Outgoing::new(config.large_in_flight as usize)),
                incoming: RefCell::new(incoming::Incoming::new(config.large_in_flight as usize)),
                reads: RefCell::new(HashMap::new()),
                completions: Cell::new(0),
                running: Cell::new(false),
                keepalive: Cell::new(Keepalive::default()),
                dones: RefCell::new(Vec::new()),
                control_waker: WakerCell::new(),
            })
        });
        device.register_qp(qp_num, (conn.slot, conn.generation));
        for chunk in chunks {
            if let Err(e) = conn.post_recv(chunk) {
                conn.teardown(format!("posting receive buffers failed: {e}"));
                return Err((super::RdmaError::Device(e), None));
            }
        }
        Ok(conn)
    }

    /// The peer's window and buffer size are known only after connecting (client side).
    pub(crate) fn set_peer(&self, peer_window: u32) {
        self.flow.borrow_mut().set_peer_window(peer_window);
        self.wake_writer();
    }

    /// The READ depths this side asks for: as many as large transfers may be in flight
    /// (`RdmaConfig::large_in_flight`), within what the device allows.
    pub(crate) fn read_depths_wanted(&self) -> corewire_verbs::ReadDepths {
        corewire_verbs::ReadDepths::both(self.device.read_depth)
    }

    pub(crate) fn qp_do<R>(&self, f: impl FnOnce(&QueuePair) -> R) -> Option<R> {
        self.qp.borrow().as_ref().map(f)
    }

    /// Start the writer task: from here on the connection carries frames.
    pub(crate) fn run(self: &Rc<Self>) {
        self.running.set(true);
        spawn_local(write_loop(self.clone()));
    }

    pub(crate) fn key(&self) -> (u32, u16) {
        (self.slot, self.generation)
    }

    fn wr(&self, kind: WrKind, buffer: u32) -> u64 {
        WrId {
            conn_slot: self.slot,
            generation: self.generation,
            kind,
            buffer,
        }
        .encode()
    }

    fn post_recv(&self, chunk: ChunkId) -> corewire_verbs::Result<()> {
        let pool = self.device.pool.borrow();
        let sge = pool.sge(chunk, pool.chunk_size());
        match self.qp.borrow().as_ref() {
            Some(qp) => qp.post_recv(self.wr(WrKind::Recv, chunk), &[sge]),
            None => Ok(()),
        }
    }

    /// Post a data message (or a pure ack); `control`: it carries large-message control
    /// records, not stream bytes.
    fn post_send(
        &self,
        kind: WrKind,
        chunk: ChunkId,
        len: usize,
        control: bool,
    ) -> corewire_verbs::Result<()> {
        let is_data = kind != WrKind::Ack;
        let imm = if is_data {
            self.flow.borrow_mut().post_data()
        } else {
            self.flow.borrow_mut().post_ack()
        };
        let marked = if control { imm | CONTROL_IMM } else { imm };
        let pool = self.device.pool.borrow();
        // A pure ack carries no buffer, only its immediate data.
        let data = is_data.then(|| pool.sge(chunk, len));
        let wr = SendWr {
            wr_id: self.wr(kind, chunk),
            sges: data.as_slice(),
            op: SendOp::SendWithImm(marked),
            signaled: true,
            // Every message is solicited: its receiver has work to do (data to deliver,
            // credits a waiting writer may need). Only our own send completions are not
            // (see `wakeups`).
            solicited: true,
            inline: false,
        };
        let res = match self.qp.borrow().as_ref() {
            Some(qp) => qp.post_send(&wr),
            None => Err(corewire_verbs::VerbsError::InvalidArgument(
                "queue pair gone",
            )),
        };
        if res.is_err() {
            self.flow.borrow_mut().post_failed(imm, is_data);
        }
        res
    }

    /// Send a pure credit acknowledgement if one is due and nothing else will carry it
    /// (queued data goes out with the grants; a full send queue sends one when a send
    /// completes).
    fn maybe_ack(&self) {
        if self.is_ended() {
            return;
        }
        let data_waiting = self.out.queued_bytes() > 0 && self.flow.borrow().can_send_data();
        if !self.flow.borrow().ack_due(data_waiting) {
            return;
        }
        if let Err(e) = self.post_send(WrKind::Ack, 0, 0, false) {
            self.fail(format!("posting a credit ack failed: {e}"));
            return;
        }
        self.shard.stats.borrow_mut().acks_sent += 1;
    }

    /// The keepalive interval ended: probe the peer if nothing completed during all of it.
    pub(crate) fn keepalive_tick(&self) {
        if !self.running.get() || self.is_ended() {
            return;
        }
        let mut k = self.keepalive.get();
        let probe = k.tick(self.completions.get());
        if !probe {
            self.keepalive.set(k);
            return;
        }
        let wr = SendWr {
            wr_id: self.wr(WrKind::Keepalive, 0),
            sges: &[],
            op: SendOp::ZeroLengthWrite,
            signaled: true,
            solicited: false,
            inline: false,
        };
        let posted = match self.qp.borrow().as_ref() {
            Some(qp) => qp.post_send(&wr),
            None => return,
        };
        match posted {
            Ok(()) => {
                self.keepalive.set(k);
                self.shard.stats.borrow_mut().keepalives_sent += 1;
            }
            Err(e) => self.fail(format!("posting a keepalive probe failed: {e}")),
        }
    }

    pub(crate) fn on_completion(self: &Rc<Self>, id: WrId, wc: &WorkCompletion) {
        self.completions.set(self.completions.get() + 1);
        if id.kind == WrKind::Keepalive {
            let mut k = self.keepalive.get();
            k.completed();
            self.keepalive.set(k);
        }
        if wc.status != WcStatus::Success {
            match id.kind {
                WrKind::Send => self.finish_send(id.buffer),
                WrKind::Ack => self.flow.borrow_mut().send_completed(),
                // Its buffer goes with the connection, which ends now (a probe has none).
                WrKind::Recv | WrKind::SharedRecv | WrKind::Read | WrKind::Keepalive => {}
            }
            if wc.status != WcStatus::WrFlushError || !self.is_ended() {
                self.shard.stats.borrow_mut().connection_errors += 1;
                self.fail(format!(
                    "work completion failed: {:?} (vendor error {:#x})",
                    wc.status, wc.vendor_err
                ));
            }
            return;
        }
        match id.kind {
            WrKind::Recv | WrKind::SharedRecv => self.on_recv(id.kind, id.buffer, wc),
            WrKind::Send => {
                self.finish_send(id.buffer);
                self.maybe_ack();
            }
            WrKind::Ack => {
                self.flow.borrow_mut().send_completed();
                self.wake_writer();
                self.maybe_ack();
            }
            WrKind::Read => self.read_completed(id.buffer),
            // The peer is there; nothing to free.
            WrKind::Keepalive => {}
        }
    }

    fn on_recv(&self, kind: WrKind, chunk: ChunkId, wc: &WorkCompletion) {
        let len = wc.byte_len as usize;
        let incoming = if len > 0 {
            Incoming::Data
        } else {
            Incoming::Ack
        };
        let imm = wc.imm_data.unwrap_or(0);
        let control = imm & CONTROL_IMM != 0;
        let credits = imm & !CONTROL_IMM;
        self.flow.borrow_mut().received(incoming, credits);
        if credits > 0 {
            self.wake_writer();
        }
        let own_buffer = kind == WrKind::Recv;
        if incoming == Incoming::Ack {
            // An ack's buffer is one of the reserved ones (or a shared one, reposted by the
            // device): posted again, granted to nobody.
            if own_buffer {
                self.repost(chunk, 0);
            }
            return;
        }
        let pool = self.device.pool.borrow();
        if control {
            let records = control::decode(pool.read(chunk, len));
            drop(pool);
            self.on_control(records);
            if self.is_ended() && own_buffer {
                // The buffer went with the connection's (a shared one is still accounted
                // for below).
                return;
            }
        } else {
            self.rx
                .borrow_mut()
                .extend_from_slice(pool.read(chunk, len));
            drop(pool);
            self.incoming.borrow_mut().stream_bytes(len);
        }
        self.reader.notify_one();
        if !own_buffer {
            // The shared buffer goes back to the queue at once; the grant it used comes
            // back from the shard's budget when the reader keeps up.
            if let Some(s) = &self.device.srq {
                s.grants.borrow_mut().consumed();
            }
            self.top_up_grants();
            return;
        }
        if self.reader_behind() {
            // Keep the buffer (and the peer's credit) until the reader catches up.
            self.held.borrow_mut().push(chunk);
            return;
        }
        self.repost(chunk, 1);
    }

    fn reader_behind(&self) -> bool {
        Flow::hold_back(
            self.rx.borrow().len(),
            self.shard.config().max_rx_buffered,
            self.reader_waiting.get(),
        )
    }

    /// Post `chunk` for receive again, granting `grants` withheld credits back to the peer.
    fn repost(&self, chunk: ChunkId, grants: u32) {
        if let Err(e) = self.post_recv(chunk) {
            self.fail(format!("reposting a receive buffer failed: {e}"));
            return;
        }
        self.flow.borrow_mut().regrant(grants);
        self.maybe_ack();
    }

    /// With a shared receive queue: top the peer's grants up to the window, as far as the
    /// shard's budget allows (the rest comes when the budget frees up).
    pub(crate) fn top_up_grants(&self) {
        let Some(s) = &self.device.srq else { return };
        if self.is_ended() {
            return;
        }
        let (want, holds) = {
            let f = self.flow.borrow();
            (f.wanted(self.window, self.reader_behind()), f.peer_holds())
        };
        if want == 0 {
            return;
        }
        let n = s.grants.borrow_mut().grant(self.key(), want, holds);
        if n > 0 {
            self.flow.borrow_mut().grant(n);
            self.maybe_ack();
        }
    }

    /// The reader caught up (or waits for more of a frame): give back the grants held back
    /// for backpressure.
    fn release_held(&self) {
        if self.shared {
            if !self.reader_behind() {
                self.top_up_grants();
            }
            return;
        }
        if self.held.borrow().is_empty() || self.reader_behind() {
            return;
        }
        let held: Vec<ChunkId> = self.held.borrow_mut().drain(..).collect();
        for chunk in held {
            self.repost(chunk, 1);
        }
    }

    fn finish_send(&self, chunk: ChunkId) {
        self.flow.borrow_mut().send_completed();
        let mut sending = self.sending.borrow_mut();
        if let Some(pos) = sending.iter().position(|&c| c == chunk) {
            sending.swap_remove(pos);
            drop(sending);
            self.device.pool.borrow_mut().free_send(chunk);
            self.device.send_buffer_freed();
        }
        self.wake_writer();
    }

    pub(crate) fn wake_writer(&self) {
        self.writer.notify_one();
    }

    /// End the connection with `reason` (first reason wins) and release its resources.
    pub(crate) fn fail(&self, reason: String) {
        if self.ended.borrow().is_none() {
            tracing::debug!(peer = ?self.peer, %reason, "rdma connection ended");
            *self.ended.borrow_mut() = Some(reason.clone());
            self.failed.set(true);
        }
        self.out.discard();
        self.teardown(reason);
    }

    /// The peer disconnected (rdma_cm DISCONNECTED).
    pub(crate) fn peer_disconnected(&self) {
        if self.ended.borrow().is_none() {
            *self.ended.borrow_mut() = Some("disconnected by peer".into());
        }
        self.out.discard();
        self.teardown("disconnected by peer".into());
    }

    /// Retire the queue pair (the device destroys it once nothing can touch our buffers),
    /// then give everything back: receive buffers, send buffers (after the queue pair is
    /// gone), CQ entries and the peer's grants. Late completions are ignored (stale
    /// generation).
    fn teardown(&self, reason: String) {
        if self.torn_down.replace(true) {
            return;
        }
        if self.ended.borrow().is_none() {
            *self.ended.borrow_mut() = Some(reason);
        }
        let qp = self.qp.borrow_mut().take();
        let cq = self.cq.borrow_mut().take();
        let sends: Vec<ChunkId> = self.sending.borrow_mut().drain(..).collect();
        match qp {
            Some(qp) => {
                let key = qp.cm_id().key();
                let _ = qp.cm_id().disconnect();
                self.shard.cm.unregister(key);
                self.device.retire(qp, cq, sends);
            }
            None => drop(cq),
        }
        // Without a shared queue the queue pair is destroyed by now: its buffers are ours.
        let mut pool = self.device.pool.borrow_mut();
        for c in self.recv_chunks.borrow_mut().drain(..) {
            pool.free_recv(c);
        }
        drop(pool);
        self.held.borrow_mut().clear();
        // Large messages: deregister and free what we lent the peer and what we were
        // reading (a read still in flight completes with an error, or not at all: the queue
        // pair is on its way out).
        drop(self.outgoing.borrow_mut().drain());
        self.reads.borrow_mut().clear();
        self.dones.borrow_mut().clear();
        if let Some(s) = &self.device.srq {
            let holds = self.flow.borrow().peer_holds();
            s.grants.borrow_mut().closed(self.key(), holds);
            self.device.serve_grant_waiters(&self.shard);
        }
        self.shard.remove_conn(self.slot, self.generation);
        self.reader.notify_one();
        self.wake_writer();
    }

    pub(crate) fn is_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// Wait until a data message may be posted: a credit, a send slot, and a free buffer.
    /// With every send buffer of the device in use, wait for one to come back (sends in
    /// flight always complete: the peer has room for each). A registration failure with
    /// nothing in flight cannot be waited out: it ends this connection, with the error.
    async fn reserve_send(&self) -> Result<ChunkId, TransportError> {
        let mut credit_wait_counted = false;
        let mut pool_wait_counted = false;
        loop {
            if let Some(why) = self.ended.borrow().as_ref() {
                return Err(TransportError::Other(why.clone()));
            }
            if self.flow.borrow().can_send_data() {
                let mut pool = self.device.pool.borrow_mut();
                match pool.alloc_send() {
                    // The credit and slot are taken when the message is posted.
                    Ok(chunk) => return Ok(chunk),
                    Err(PoolError::Register(e)) if pool.send_in_use() == 0 => {
                        drop(pool);
                        let msg = PoolError::Register(e).to_string();
                        self.fail(msg.clone());
                        return Err(TransportError::Other(msg));
                    }
                    Err(_) => {
                        drop(pool);
                        if !pool_wait_counted {
                            pool_wait_counted = true;
                            self.shard.stats.borrow_mut().pool_waits += 1;
                        }
                        self.device.wait_for_send_buffer(self.key());
                    }
                }
            } else if !credit_wait_counted {
                credit_wait_counted = true;
                self.shard.stats.borrow_mut().credit_waits += 1;
            }
            // Woken by a credit, a completed send or a freed buffer (`wake_writer`).
            let _awaiting = SendWait::new(&self.device);
            self.writer.notified().await;
        }
    }

    fn post_data(&self, chunk: ChunkId, len: usize, control: bool) -> Result<(), TransportError> {
        self.sending.borrow_mut().push(chunk);
        if let Err(e) = self.post_send(WrKind::Send, chunk, len, control) {
            self.sending.borrow_mut().retain(|&c| c != chunk);
            self.device.pool.borrow_mut().free_send(chunk);
            self.device.send_buffer_freed();
            let msg = format!("ibv_post_send failed: {e}");
            self.fail(msg.clone());
            return Err(TransportError::Other(msg));
        }
        Ok(())
    }

    /// Post a frame straight from the sending task, without the writer task's hop, when the
    /// connection is idle: nothing queued, owed or waiting (so nothing can be overtaken, and the
    /// writer holds no batch: its bytes count as queued until all are posted), no send in
    /// flight, a credit, a free send buffer, and the frame fits one message and is not
    /// large. A lone request or reply is then on the wire before its task yields, which is
    /// what a request/response round trip waits for (each hop costs a task poll, a lot
    /// under TCG: BENCHMARKS.md, issue 15). With a send in flight the frame queues instead,
    /// so the writer packs what a busy connection produces into few messages. `None`: not
    /// idle, queue it.
    fn try_send_now(
        &self,
        header: &FrameHeader,
        payload: &Bytes,
        attachment: &Bytes,
    ) -> Option<Result<(), TransportError>> {
        // `has_room` also means nobody waits for admission: a newcomer never overtakes a
        // sender waiting in line.
        if !self.running.get()
            || self.out.is_closed()
            || self.out.queued_bytes() > 0
            || !self.out.has_room()
            || !self.dones.borrow().is_empty()
        {
            return None;
        }
        {
            let flow = self.flow.borrow();
            if flow.sends_outstanding() > 0 || !flow.can_send_data() {
                return None;
            }
        }
        if self.is_large(payload) || self.is_large(attachment) {
            return None;
        }
        let total = match self
            .encoder
            .borrow()
            .frame_len(header, payload.len(), attachment.len())
        {
            Ok(total) => total,
            Err(e) => return Some(Err(e.into())),
        };
        if total > self.peer_chunk {
            return None;
        }
        let chunk = self.device.pool.borrow_mut().alloc_send().ok()?;
        let head =
            match self
                .encoder
                .borrow_mut()
                .encode_header(header, payload.len(), attachment.len())
            {
                Ok(head) => head,
                Err(e) => {
                    self.device.pool.borrow_mut().free_send(chunk);
                    return Some(Err(e.into()));
                }
            };
        {
            let mut pool = self.device.pool.borrow_mut();
            pool.write(chunk, 0, &head);
            pool.write(chunk, head.len(), payload);
            pool.write(chunk, head.len() + payload.len(), attachment);
        }
        if let Err(e) = self.post_data(chunk, total, false) {
            return Some(Err(e));
        }
        self.stats.add_out(total);
        self.shard.stats.borrow_mut().sends_inline += 1;
        Some(Ok(()))
    }

    /// Control records from the peer: descriptors to read, "done"s to release.
    fn on_control(&self, records: Result<Vec<Record>, control::BadControl>) {
        let records = match records {
            Ok(r) => r,
            Err(e) => return self.fail(e.to_string()),
        };
        let max_body = self.shard.config().limits.max_body_len;
        for record in records {
            match record {
                Record::Descriptor(d) => {
                    if d.id & !ID_MASK != 0 || d.len as usize > max_body {
                        return self.fail(format!("bad large-message descriptor {d:?}"));
                    }
                    self.shard.stats.borrow_mut().large_received += 1;
                    let start = self.incoming.borrow_mut().descriptor(d);
                    if let Some(d) = start {
                        self.start_read(d);
                    }
                }
                Record::Done { id } => {
                    // Deregistered here (dropped); the writer may have been waiting for room.
                    if self.outgoing.borrow_mut().release(id).is_some() {
                        self.wake_writer();
                    }
                }
            }
        }
    }

    /// Register a buffer for large message `d` and RDMA READ it from the peer.
    fn start_read(&self, d: Descriptor) {
        if self.is_ended() {
            return;
        }
        let len = d.len as usize;
        let buf = vec![0u8; len].into_boxed_slice();
        let mr = match MemoryRegion::from_boxed(&self.device.pd, buf, Access::LOCAL_WRITE) {
            Ok(mr) => mr,
            Err(e) => {
                return self.fail(format!(
                    "registering {len} bytes to read a large message failed: {e}"
                ))
            }
        };
        let tracked = Tracked::new(&self.shard, mr);
        let posted = match tracked.mr().sge(0, len) {
            Ok(sge) => {
                let wr = SendWr {
                    wr_id: self.wr(WrKind::Read, d.id),
                    sges: &[sge],
                    op: SendOp::RdmaRead {
                        remote_addr: d.addr,
                        rkey: d.rkey,
                    },
                    signaled: true,
                    solicited: false,
                    inline: false,
                };
                match self.qp.borrow().as_ref() {
                    Some(qp) => qp.post_send(&wr),
                    None => return,
                }
            }
            Err(e) => Err(e),
        };
        match posted {
            Ok(()) => {
                self.reads.borrow_mut().insert(d.id, tracked);
            }
            Err(e) => self.fail(format!("posting an RDMA READ failed: {e}")),
        }
    }

    /// A READ completed: its buffer, deregistered, is the large message (no copy).
    fn read_completed(&self, id: u32) {
        let Some(tracked) = self.reads.borrow_mut().remove(&id) else {
            return;
        };
        let Some(data) = tracked.into_boxed() else {
            return;
        };
        self.incoming.borrow_mut().read_done(id, Bytes::from(data));
        self.reader.notify_one();
    }

    /// Whether `part` goes by descriptor: a part of a `RegisteredBuf`, or at least the
    /// threshold.
    fn is_large(&self, part: &Bytes) -> bool {
        self.large_threshold.is_some_and(|t| part.len() >= t)
            || user_region(&self.shard.user_regions, &self.device, part).is_some()
    }

    /// Send `part` by descriptor: wait for room in the table, register it (or use its
    /// `RegisteredBuf`'s registration) and send the descriptor. `Ok(false)`: registering
    /// failed, send it by copy instead.
    async fn send_large(&self, part: &Bytes) -> Result<bool, TransportError> {
        loop {
            if let Some(why) = self.ended.borrow().as_ref() {
                return Err(TransportError::Other(why.clone()));
            }
            if self.outgoing.borrow().has_room() {
                break;
            }
            // The peer may be waiting for our "done"s just as we wait for its: send them
            // (this is the writer task) before waiting.
            self.send_dones().await?;
            if self.outgoing.borrow().has_room() {
                break;
            }
            // Woken by the peer's "done", a "done" we owe (`owe_dones`), or the end.
            self.writer.notified().await;
        }
        let held = match user_region(&self.shard.user_regions, &self.device, part) {
            Some(Ok(mr)) => Held::User(mr),
            other => {
                let user = other.is_some();
                match MemoryRegion::from_bytes(&self.device.pd, part.clone(), Access::REMOTE_READ) {
                    Ok(mr) => Held::Own(Tracked::new(&self.shard, mr)),
                    Err(e) => {
                        tracing::debug!(error = %e, len = part.len(), user, "large message sent by copy");
                        self.shard.stats.borrow_mut().large_copied += 1;
                        return Ok(false);
                    }
                }
            }
        };
        if matches!(held, Held::User(_)) {
            self.shard.stats.borrow_mut().large_sent_registered += 1;
        }
        let rkey = held.rkey();
        let id = self.outgoing.borrow_mut().insert(held);
        let chunk = self.reserve_send().await?;
        let mut rec = Vec::with_capacity(DESCRIPTOR_LEN);
        Record::Descriptor(Descriptor {
            id,
            addr: part.as_ptr() as u64,
            len: part.len() as u32,
            rkey,
        })
        .encode(&mut rec);
        self.device.pool.borrow_mut().write(chunk, 0, &rec);
        self.post_data(chunk, rec.len(), true)?;
        self.shard.stats.borrow_mut().large_sent += 1;
        Ok(true)
    }

    /// Owe the peer "done"s: wake the writer, wherever it waits.
    fn owe_dones(&self, ids: Vec<u32>) {
        self.dones.borrow_mut().extend(ids);
        self.control_waker.wake();
        self.wake_writer();
    }

    /// Send the "done"s owed to the peer.
    async fn send_dones(&self) -> Result<(), TransportError> {
        while !self.dones.borrow().is_empty() {
            let chunk = self.reserve_send().await?;
            let per_message = (self.peer_chunk / DONE_LEN).max(1);
            let ids: Vec<u32> = {
                let mut d = self.dones.borrow_mut();
                let n = d.len().min(per_message);
                d.drain(..n).collect()
            };
            let mut rec = Vec::with_capacity(ids.len() * DONE_LEN);
            for id in ids {
                Record::Done { id }.encode(&mut rec);
            }
            self.device.pool.borrow_mut().write(chunk, 0, &rec);
            self.post_data(chunk, rec.len(), true)?;
        }
        Ok(())
    }

    /// The writer's next batch of queued buffers; an empty one when "done"s are owed.
    async fn next_batch(&self) -> Option<Vec<Bytes>> {
        poll_fn(|cx| {
            if !self.dones.borrow().is_empty() {
                return Poll::Ready(Some(Vec::new()));
            }
            self.control_waker.register(cx.waker());
            self.out.poll_next_batch(cx, WRITE_BATCH)
        })
        .await
    }
}

impl Drop for ConnCore {
    /// Dropped without an orderly close (its tasks were dropped at shutdown): still retire
    /// the queue pair before giving the buffers back.
    fn drop(&mut self) {
        self.teardown("dropped".into());
    }
}

/// Pack queued buffers into registered chunks and post them as SEND messages.
async fn write_loop(conn: Rc<ConnCore>) {
    let chunk_size = conn.peer_chunk;
    loop {
        if let Err(e) = conn.send_dones().await {
            conn.fail(e.to_string());
            return;
        }
        let Some(batch) = conn.next_batch().await else {
            break;
        };
        let total: usize = batch.iter().map(Bytes::len).sum();
        let mut current: Option<(ChunkId, usize)> = None;
        for buf in batch {
            if conn.is_large(&buf) {
                // The stream bytes before it go first: the descriptor stands after them.
                if let Some((chunk, filled)) = current.take() {
                    if conn.post_data(chunk, filled, false).is_err() {
                        return;
                    }
                }
                match conn.send_large(&buf).await {
                    Ok(true) => continue,
                    // Registration failed: by copy, below.
                    Ok(false) => {}
                    Err(e) => {
                        conn.fail(e.to_string());
                        return;
                    }
                }
            }
            let mut data = &buf[..];
            while !data.is_empty() {
                let (chunk, filled) = match current.take() {
                    Some(c) => c,
                    None => match conn.reserve_send().await {
                        Ok(chunk) => (chunk, 0),
                        // Never exit silently: the connection ends, with the reason, so
                        // pending and later sends and receives fail instead of waiting.
                        Err(e) => {
                            conn.fail(e.to_string());
                            return;
                        }
                    },
                };
                let n = data.len().min(chunk_size - filled);
                conn.device
                    .pool
                    .borrow_mut()
                    .write(chunk, filled, &data[..n]);
                data = &data[n..];
                if filled + n == chunk_size {
                    if conn.post_data(chunk, chunk_size, false).is_err() {
                        // post_data ended the connection with the reason.
                        return;
                    }
                } else {
                    current = Some((chunk, filled + n));
                }
            }
        }
        if let Some((chunk, filled)) = current {
            if conn.post_data(chunk, filled, false).is_err() {
                return;
            }
        }
        conn.out.sent(total);
    }
    // Closed and flushed: wait for the last sends to complete and the peer to be done with
    // our large messages (it reads them from our memory), then disconnect.
    while (conn.flow.borrow().sends_outstanding() > 0 || !conn.outgoing.borrow().is_empty())
        && !conn.is_ended()
    {
        let _awaiting = SendWait::new(&conn.device);
        conn.writer.notified().await;
    }
    conn.teardown("closed".into());
}

/// Clears the connection's reader flags when a `recv` ends or is dropped.
struct ReadingGuard<'a>(&'a ConnCore);

impl Drop for ReadingGuard<'_> {
    fn drop(&mut self) {
        self.0.reading.set(false);
        self.0.reader_waiting.set(false);
    }
}

/// Closes the connection when the last user handle goes away.
struct Owner(Rc<ConnCore>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.out.close();
    }
}

/// A frame connection over RDMA (reliable connected queue pair, SEND/RECV).
#[derive(Clone)]
pub struct RdmaConnection {
    owner: Rc<Owner>,
}

impl RdmaConnection {
    pub(crate) fn new(core: Rc<ConnCore>) -> RdmaConnection {
        RdmaConnection {
            owner: Rc::new(Owner(core)),
        }
    }

    fn core(&self) -> &Rc<ConnCore> {
        &self.owner.0
    }

    /// Why the connection ended, if it has.
    pub fn end_reason(&self) -> Option<String> {
        self.core().ended.borrow().clone()
    }

    /// The RDMA READ depths the queue pair settled on (large messages are pulled by READ:
    /// this many may be in flight each way), `None` once the connection is gone.
    pub fn read_depths(&self) -> Option<corewire_verbs::ReadDepths> {
        self.core().qp_do(|qp| qp.read_depths().ok()).flatten()
    }

    /// Force the queue pair into the error state (fault injection for tests): every posted
    /// work request is flushed and the connection ends with an error.
    pub fn inject_qp_error(&self) -> Result<(), TransportError> {
        match self.core().qp_do(|qp| qp.set_error()) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(TransportError::Other(e.to_string())),
            None => Err(TransportError::Closed),
        }
    }
}

impl Connection for RdmaConnection {
    async fn send(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> Result<(), TransportError> {
        let c = self.core();
        if let Some(why) = c.ended.borrow().as_ref() {
            return Err(TransportError::Other(why.clone()));
        }
        if let Some(sent) = c.try_send_now(header, &payload, &attachment) {
            return sent;
        }
        c.out
            .push_frame(&c.encoder, &c.stats, header, payload, attachment)
            .await
    }

    async fn ready_to_send(&self) -> Result<(), TransportError> {
        let c = self.core();
        if !c.is_ended() && c.out.wait_for_room().await && !c.is_ended() {
            Ok(())
        } else {
            Err(TransportError::Closed)
        }
    }

    /// Cancel-safe: every received byte stays buffered in the connection (the frame decoder
    /// and its input live there, not in the future), and a frame is taken out only in the
    /// poll that returns it, so dropping this future loses nothing and the next call carries
    /// on. `send` is cancel-safe too: a frame is queued whole or not at all.
    async fn recv(&self) -> Result<Option<Frame>, TransportError> {
        let c = self.core();
        if c.reading.replace(true) {
            return Err(TransportError::Busy);
        }
        // Cleared however this future ends, dropped mid-wait included.
        let _reading = ReadingGuard(c);
        // The fairness budget, charged here so no reader can forget it (see conn::budget).
        poll_fn(|cx| c.round.borrow_mut().poll_proceed(cx)).await;
        let result = loop {
            let decoded = c
                .incoming
                .borrow_mut()
                .next_frame(&mut c.decoder.borrow_mut(), &mut c.rx.borrow_mut());
            match decoded {
                Ok(Some(taken)) => {
                    let frame = taken.frame;
                    if !taken.done.is_empty() {
                        c.owe_dones(taken.done);
                    }
                    for d in taken.start {
                        c.start_read(d);
                    }
                    c.stats.add_in(frame.payload.len() + frame.attachment.len());
                    let in_round = {
                        let mut round = c.round.borrow_mut();
                        round.charge(frame.payload.len() + frame.attachment.len());
                        u64::from(round.round_messages())
                    };
                    let mut st = c.shard.stats.borrow_mut();
                    st.max_round_frames = st.max_round_frames.max(in_round);
                    drop(st);
                    c.reader_waiting.set(false);
                    c.release_held();
                    break Ok(Some(frame));
                }
                Ok(None) => {}
                Err(AssemblyError::Frame(e)) => break Err(TransportError::Protocol(e)),
                Err(e @ AssemblyError::Misplaced(_)) => {
                    let msg = e.to_string();
                    c.fail(msg.clone());
                    break Err(TransportError::Other(msg));
                }
            }
            if c.is_ended() {
                let buffered = c.rx.borrow().len();
                break if buffered == 0 && c.failed.get() {
                    // A dead peer or link (e.g. RetryExceeded) is an error, not an orderly
                    // close: callers see why.
                    Err(TransportError::Other(
                        c.ended.borrow().clone().unwrap_or_default(),
                    ))
                } else if buffered == 0 {
                    Ok(None)
                } else {
                    Err(TransportError::Truncated { buffered })
                };
            }
            // Waiting for the rest of a frame: the held buffers are needed to receive it.
            c.reader_waiting.set(true);
            c.release_held();
            // Waiting for the peer ends the budget's round.
            c.round.borrow_mut().reset();
            // Waiting for our own RDMA READs is waiting for send-queue completions: they
            // must wake the shard (see `wakeups`).
            let _reads = (!c.reads.borrow().is_empty()).then(|| SendWait::new(&c.device));
            c.reader.notified().await;
        };
        if let Err(e) = &result {
            if matches!(e, TransportError::Protocol(_)) {
                c.fail(format!("protocol error: {e}"));
            }
        }
        result
    }

    fn close(&self) {
        self.core().out.close();
    }

    fn is_closed(&self) -> bool {
        self.core().is_ended() || self.core().out.is_closed()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.core().peer
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Rdma
    }

    fn budget(&self) -> Budget {
        self.core().budget
    }

    fn arrived_at(&self) -> u64 {
        self.core().round.borrow().arrived_at()
    }

    fn stats(&self) -> ConnStats {
        let c = self.core();
        c.stats.snapshot(c.out.queued_bytes())
    }
}
