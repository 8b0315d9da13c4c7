//! One RDMA connection: a reliable-connected queue pair on its device's CQ, receiving into
//! the shard's shared receive queue (or buffers of its own), frames carried as a byte stream
//! over SEND messages (small frames share a message; large ones span several, or go by RDMA
//! READ).
//!
//! The decisions are sans-I/O state machines tested without a device: the flow policy
//! (credits, grants, acks, send slots) in [`super::flow`], the phase and end reason in
//! [`lifecycle`], the keepalive in [`super::keepalive`], the large-message tables in
//! [`super::large`]. The files here are the glue that posts work requests and dispatches
//! their completions: this one holds the connection, its start, end and completion dispatch;
//! [`reader`] the receive path and `recv`, [`writer`] the send path and the writer task,
//! [`large`] the large-message path, [`handle`] the users' [`RdmaConnection`].

mod handle;
mod large;
mod lifecycle;
mod reader;
mod writer;

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;

use corewire_runtime::{spawn_local, Budget};
use corewire_verbs::{QpCaps, QueuePair, SendOp, SendWr, WcStatus, WorkCompletion};

use super::device::{CqReservation, Device};
use super::flow::{Flow, RESERVED_FOR_ACKS};
use super::keepalive::Keepalive;
use super::shard::RdmaShard;
use super::wr_id::{WrId, WrKind};
use super::{RdmaConfig, ReceiveQueues};
use crate::conn::{ConnStatsCells, TransportError};

pub use handle::RdmaConnection;
pub(crate) use lifecycle::{EndReason, Failure, Setup};
use lifecycle::{Lifecycle, Posting};

/// The queue sizes of every connection's queue pair: sends bounded by the peer's window
/// (credits) plus acks and one spare, and the RDMA READs of large messages; receives for
/// the window plus the credit acks, unless the shard's shared receive queue takes them.
pub(crate) fn queue_sizes(config: &RdmaConfig) -> QpCaps {
    let depth = config.window + RESERVED_FOR_ACKS;
    let shared = matches!(config.receive, ReceiveQueues::Shared { .. });
    {
        let mut o = QpCaps::default();
        o.max_send_wr = depth + 4 + read_slots(config) + KEEPALIVE_SLOTS;
        o.max_recv_wr = if shared { 0 } else { depth };
        o.max_send_sge = 1;
        o.max_recv_sge = 1;
        o.max_inline_data = 0;
        o
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

/// The queue pair and the CQ entries held for it, until the connection ends.
struct Link {
    qp: QueuePair,
    cq: CqReservation,
}

/// The keepalive's view of the connection: its probe state and how many work requests
/// completed so far (what it calls activity).
#[derive(Debug, Default, Clone, Copy)]
struct Liveness {
    keepalive: Keepalive,
    completions: u64,
}

pub(crate) struct ConnCore {
    slot: u32,
    generation: u16,
    shard: Rc<RdmaShard>,
    device: Rc<Device>,
    peer: Option<SocketAddr>,
    /// Receives come from the device's shared receive queue (else from buffers of its own).
    shared: bool,
    /// The largest message the peer accepts.
    peer_chunk: usize,
    /// The most grants our peer may hold.
    window: u32,
    budget: Budget,
    /// `None` once the connection ended (the device retires the queue pair).
    link: RefCell<Option<Link>>,
    life: RefCell<Lifecycle>,
    /// Credits, grants, acks and send slots (the policy; the glue only posts).
    flow: RefCell<Flow>,
    rx: reader::Receiver,
    tx: writer::Sender,
    large: large::Large,
    liveness: Cell<Liveness>,
    stats: ConnStatsCells,
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
                peer,
                shared,
                peer_chunk: peer_chunk.min(config.chunk_size),
                window: config.window,
                budget: config.budget,
                link: RefCell::new(Some(Link { qp, cq })),
                life: RefCell::new(Lifecycle::Connecting),
                flow: RefCell::new(Flow::new(peer_window, granted, max_sends)),
                rx: reader::Receiver::new(&config, chunks.clone()),
                tx: writer::Sender::new(&config),
                large: large::Large::new(&config),
                liveness: Cell::new(Liveness::default()),
                stats: ConnStatsCells::default(),
            })
        });
        device.register_qp(qp_num, (conn.slot, conn.generation));
        for chunk in chunks {
            if let Err(e) = conn.post_recv(chunk) {
                conn.end(
                    EndReason::Failed(Failure::Post(Posting::FirstReceives, e.clone())),
                    false,
                );
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
        self.link.borrow().as_ref().map(|l| f(&l.qp))
    }

    /// Start the writer task: from here on the connection carries frames.
    pub(crate) fn run(self: &Rc<Self>) {
        self.life.borrow_mut().start_running();
        spawn_local(writer::write_loop(self.clone()));
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

    /// The keepalive interval ended: probe the peer if nothing completed during all of it.
    pub(crate) fn keepalive_tick(&self) {
        if !self.life.borrow().is_running() {
            return;
        }
        let mut live = self.liveness.get();
        if !live.keepalive.tick(live.completions) {
            self.liveness.set(live);
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
        let Some(posted) = self.qp_do(|qp| qp.post_send(&wr)) else {
            return;
        };
        match posted {
            Ok(()) => {
                self.liveness.set(live);
                self.shard.stats.borrow_mut().keepalives_sent += 1;
            }
            Err(e) => self.fail(Failure::Post(Posting::Keepalive, e)),
        }
    }

    pub(crate) fn on_completion(self: &Rc<Self>, id: WrId, wc: &WorkCompletion) {
        let mut live = self.liveness.get();
        live.completions += 1;
        if id.kind == WrKind::Keepalive {
            live.keepalive.completed();
        }
        self.liveness.set(live);
        if wc.status != WcStatus::Success {
            match id.kind {
                WrKind::Send => self.finish_send(id.buffer),
                WrKind::Ack => self.flow.borrow_mut().send_completed(),
                // Its buffer goes with the connection, which ends now (a probe has none).
                WrKind::Recv | WrKind::SharedRecv | WrKind::Read | WrKind::Keepalive => {}
            }
            if wc.status != WcStatus::WrFlushError || !self.is_ended() {
                self.shard.stats.borrow_mut().connection_errors += 1;
                self.fail(Failure::Completion {
                    status: wc.status,
                    vendor_err: wc.vendor_err,
                });
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

    /// End the connection with a failure (the first reason wins) and release its resources.
    pub(crate) fn fail(&self, why: Failure) {
        self.end(EndReason::Failed(why), true);
    }

    /// The peer disconnected (rdma_cm DISCONNECTED).
    pub(crate) fn peer_disconnected(&self) {
        self.end(EndReason::PeerDisconnected, true);
    }

    /// Ends the connection with `reason` unless it already ended; `discard`: drop what is
    /// still queued to send (it can no longer go). The first end releases the resources.
    fn end(&self, reason: EndReason, discard: bool) {
        let first = {
            if reason.is_failure() && !self.is_ended() {
                tracing::debug!(peer = ?self.peer, %reason, "rdma connection ended");
            }
            self.life.borrow_mut().end(reason)
        };
        if discard {
            self.tx.out.discard();
        }
        if first {
            self.release();
        }
    }

    /// Retire the queue pair (the device destroys it once nothing can touch our buffers),
    /// then give everything back: receive buffers, send buffers (after the queue pair is
    /// gone), CQ entries and the peer's grants. Late completions are ignored (stale
    /// generation).
    fn release(&self) {
        let link = self.link.borrow_mut().take();
        let sends = self.tx.take_posted();
        if let Some(Link { qp, cq }) = link {
            let key = qp.cm_id().key();
            let _ = qp.cm_id().disconnect();
            self.shard.cm.unregister(key);
            self.device.retire(qp, Some(cq), sends);
        }
        // Without a shared queue the queue pair is destroyed by now: its buffers are ours.
        self.rx.release_buffers(&self.device);
        self.large.release();
        if let Some(s) = &self.device.srq {
            let holds = self.flow.borrow().peer_holds();
            s.grants.borrow_mut().closed(self.key(), holds);
            self.device.serve_grant_waiters(&self.shard);
        }
        self.shard.remove_conn(self.slot, self.generation);
        self.rx.ready.notify_one();
        self.wake_writer();
    }

    pub(crate) fn is_ended(&self) -> bool {
        self.life.borrow().is_ended()
    }

    /// The end reason, as the error a send or receive on an ended connection returns.
    fn ended_error(&self) -> TransportError {
        TransportError::other(
            self.life
                .borrow()
                .reason()
                .map(ToString::to_string)
                .unwrap_or_default(),
        )
    }
}

impl Drop for ConnCore {
    /// Dropped without an orderly close (its tasks were dropped at shutdown): still retire
    /// the queue pair before giving the buffers back.
    fn drop(&mut self) {
        self.end(EndReason::Dropped, false);
    }
}
