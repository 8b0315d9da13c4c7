//! The send path of an RDMA connection: frames queue in the out queue (or, on an idle
//! connection, go straight out from the sending task), the writer task packs queued bytes
//! into registered send buffers and posts them as SEND messages when [`Flow`] gives a credit
//! and a send slot, pure credit acks go out when [`Flow`] says one is due, and a closed
//! connection disconnects once its last sends completed.
//!
//! [`Flow`]: super::super::flow::Flow

use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use corewire_runtime::sync::Notify;
use corewire_verbs::{SendOp, SendWr};

use super::super::large::control::CONTROL_IMM;
use super::super::pool::{ChunkId, PoolError};
use super::super::wakeups::SendWait;
use super::super::wr_id::WrKind;
use super::super::RdmaConfig;
use super::lifecycle::{EndReason, Failure, Posting};
use super::ConnCore;
use crate::conn::{OutQueue, PayloadBuf, TransportError};
use crate::frame::{FrameEncoder, FrameHeader};

/// Buffers a writer pulls from the out queue per round.
const WRITE_BATCH: usize = 256;

/// The connection has ended (its reason says why): nothing more can be sent.
#[derive(Debug)]
pub(super) struct Ended;

/// The send side's state.
pub(super) struct Sender {
    pub(super) out: OutQueue,
    pub(super) encoder: RefCell<FrameEncoder>,
    /// Wakes the writer (and whoever waits to send): a credit, a completed send, a freed
    /// buffer, a "done" owed or received, or the end.
    ready: Notify,
    /// Send buffers posted and not yet completed.
    posted: RefCell<Vec<ChunkId>>,
}

impl Sender {
    pub(super) fn new(config: &RdmaConfig) -> Sender {
        Sender {
            out: OutQueue::without_copies(config.max_queued_bytes),
            encoder: RefCell::new(FrameEncoder::new(config.limits)),
            ready: Notify::new(),
            posted: RefCell::new(Vec::new()),
        }
    }

    /// The send buffers still posted: the connection ended, the device frees them once its
    /// queue pair is gone.
    pub(super) fn take_posted(&self) -> Vec<ChunkId> {
        self.posted.borrow_mut().drain(..).collect()
    }
}

impl ConnCore {
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
        let res = self.qp_do(|qp| qp.post_send(&wr)).unwrap_or(Err(
            corewire_verbs::VerbsError::InvalidArgument("queue pair gone"),
        ));
        if res.is_err() {
            self.flow.borrow_mut().post_failed(imm, is_data);
        }
        res
    }

    /// Send a pure credit acknowledgement if one is due and nothing else will carry it
    /// (queued data goes out with the grants; a full send queue sends one when a send
    /// completes).
    pub(super) fn maybe_ack(&self) {
        if self.is_ended() {
            return;
        }
        let data_waiting = self.tx.out.queued_bytes() > 0 && self.flow.borrow().can_send_data();
        if !self.flow.borrow().ack_due(data_waiting) {
            return;
        }
        if let Err(e) = self.post_send(WrKind::Ack, 0, 0, false) {
            self.fail(Failure::Post(Posting::Ack, e));
            return;
        }
        self.shard.stats.borrow_mut().acks_sent += 1;
    }

    pub(super) fn finish_send(&self, chunk: ChunkId) {
        self.flow.borrow_mut().send_completed();
        let mut posted = self.tx.posted.borrow_mut();
        if let Some(pos) = posted.iter().position(|&c| c == chunk) {
            posted.swap_remove(pos);
            drop(posted);
            self.device.pool.borrow_mut().free_send(chunk);
            self.device.send_buffer_freed();
        }
        self.wake_writer();
    }

    pub(crate) fn wake_writer(&self) {
        self.tx.ready.notify_one();
    }

    /// Waits for whatever [`wake_writer`](Self::wake_writer) signals.
    pub(super) async fn writer_woken(&self) {
        self.tx.ready.notified().await;
    }

    /// Wait until a data message may be posted: a credit, a send slot, and a free buffer.
    /// With every send buffer of the device in use, wait for one to come back (sends in
    /// flight always complete: the peer has room for each). A registration failure with
    /// nothing in flight cannot be waited out: it ends this connection, with the error.
    pub(super) async fn reserve_send(&self) -> Result<ChunkId, Ended> {
        let mut credit_wait_counted = false;
        let mut pool_wait_counted = false;
        loop {
            if self.is_ended() {
                return Err(Ended);
            }
            if self.flow.borrow().can_send_data() {
                let mut pool = self.device.pool.borrow_mut();
                match pool.alloc_send() {
                    // The credit and slot are taken when the message is posted.
                    Ok(chunk) => return Ok(chunk),
                    Err(PoolError::Register(e)) if pool.send_in_use() == 0 => {
                        drop(pool);
                        self.fail(Failure::SendBuffers(PoolError::Register(e)));
                        return Err(Ended);
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
            self.writer_woken().await;
        }
    }

    /// Post `len` bytes of `chunk` as a data (or, `control`, a control) message. A failed
    /// post ends the connection.
    pub(super) fn post_data(&self, chunk: ChunkId, len: usize, control: bool) -> Result<(), Ended> {
        self.tx.posted.borrow_mut().push(chunk);
        if let Err(e) = self.post_send(WrKind::Send, chunk, len, control) {
            self.tx.posted.borrow_mut().retain(|&c| c != chunk);
            self.device.pool.borrow_mut().free_send(chunk);
            self.device.send_buffer_freed();
            self.fail(Failure::Post(Posting::Data, e));
            return Err(Ended);
        }
        Ok(())
    }

    /// `Connection::send`: straight out when the connection is idle, else queued for the
    /// writer task. Cancel-safe: a frame is queued whole or not at all.
    pub(super) async fn send_frame(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> Result<(), TransportError> {
        if self.is_ended() {
            return Err(self.ended_error());
        }
        if let Some(sent) = self.try_send_now(header, &payload, &attachment) {
            return sent;
        }
        self.tx
            .out
            .push_frame(&self.tx.encoder, &self.stats, header, payload, attachment)
            .await
    }

    /// Post a frame straight from the sending task, without the writer task's hop, when the
    /// connection is idle: nothing queued, owed or waiting (so nothing can be overtaken, and the
    /// writer holds no batch: its bytes count as queued until all are posted), no send in
    /// flight, a credit, a free send buffer, and the frame fits one message and is not
    /// large. A lone request or reply is then on the wire before its task yields, which is
    /// what a request/response round trip waits for (each hop costs a task poll, a lot
    /// under TCG: BENCHMARKS.md). With a send in flight the frame queues instead, so the
    /// writer packs what a busy connection produces into few messages. `None`: not idle,
    /// queue it.
    fn try_send_now(
        &self,
        header: &FrameHeader,
        payload: &Bytes,
        attachment: &Bytes,
    ) -> Option<Result<(), TransportError>> {
        if !self.idle() {
            return None;
        }
        if self.is_large(payload) || self.is_large(attachment) {
            return None;
        }
        let total =
            match self
                .tx
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
        let head = match self.tx.encoder.borrow_mut().encode_header(
            header,
            payload.len(),
            attachment.len(),
        ) {
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
        if self.post_data(chunk, total, false).is_err() {
            return Some(Err(self.ended_error()));
        }
        self.stats.add_out(total);
        self.shard.stats.borrow_mut().sends_inline += 1;
        Some(Ok(()))
    }

    /// Whether a frame may be posted from the sending task (see
    /// [`try_send_now`](Self::try_send_now)): running, nothing queued, owed or waiting, no send
    /// in flight, a credit.
    fn idle(&self) -> bool {
        // `has_room` also means nobody waits for admission: a newcomer never overtakes a
        // sender waiting in line.
        let out = &self.tx.out;
        if !self.life.borrow().is_running()
            || out.is_closed()
            || out.queued_bytes() > 0
            || !out.has_room()
            || self.large.owes_dones()
        {
            return false;
        }
        let flow = self.flow.borrow();
        flow.sends_outstanding() == 0 && flow.can_send_data()
    }

    /// `Connection::try_send_with`: on a busy connection the frame is written in place into
    /// the out queue's staging buffer (no buffer of its own; the writer copies it into
    /// registered chunks as it does every queued byte). On an idle one, `Ok(false)`: the
    /// ordinary `send` posts the frame from the sending task at once, where a queued frame
    /// would wait for the writer task's hop.
    pub(super) fn try_send_frame_with(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> Result<bool, TransportError> {
        if self.is_ended() {
            return Err(self.ended_error());
        }
        if self.idle() {
            return Ok(false);
        }
        self.tx.out.try_push_frame_with(
            &self.tx.encoder,
            &self.stats,
            header,
            payload_len,
            attachment,
            write,
        )
    }

    /// The writer's next batch of queued buffers; an empty one when "done"s are owed.
    async fn next_batch(&self) -> Option<Vec<Bytes>> {
        poll_fn(|cx| {
            if self.large.owes_dones() {
                return Poll::Ready(Some(Vec::new()));
            }
            self.large.control_waker.register(cx.waker());
            self.tx.out.poll_next_batch(cx, WRITE_BATCH)
        })
        .await
    }

    /// Packs `batch` into send buffers and posts them, large parts by descriptor.
    async fn write_batch(&self, batch: Vec<Bytes>) -> Result<(), Ended> {
        let chunk_size = self.peer_chunk;
        let mut current: Option<(ChunkId, usize)> = None;
        for buf in batch {
            if self.is_large(&buf) {
                // The stream bytes before it go first: the descriptor stands after them.
                if let Some((chunk, filled)) = current.take() {
                    self.post_data(chunk, filled, false)?;
                }
                if self.send_large(&buf).await? {
                    continue;
                }
                // Registration failed: by copy, below.
            }
            let mut data = &buf[..];
            while !data.is_empty() {
                let (chunk, filled) = match current.take() {
                    Some(c) => c,
                    None => (self.reserve_send().await?, 0),
                };
                let n = data.len().min(chunk_size - filled);
                self.device
                    .pool
                    .borrow_mut()
                    .write(chunk, filled, &data[..n]);
                data = &data[n..];
                if filled + n == chunk_size {
                    self.post_data(chunk, chunk_size, false)?;
                } else {
                    current = Some((chunk, filled + n));
                }
            }
        }
        if let Some((chunk, filled)) = current {
            self.post_data(chunk, filled, false)?;
        }
        Ok(())
    }
}

/// The writer task: packs queued buffers into registered chunks and posts them as SEND
/// messages, and the "done"s owed to the peer, until the connection is closed and flushed
/// (then disconnects) or ends (every error here has ended it, with its reason, so pending
/// and later sends and receives fail instead of waiting).
pub(super) async fn write_loop(conn: Rc<ConnCore>) {
    loop {
        if conn.send_dones().await.is_err() {
            return;
        }
        let Some(batch) = conn.next_batch().await else {
            break;
        };
        let total: usize = batch.iter().map(Bytes::len).sum();
        if conn.write_batch(batch).await.is_err() {
            return;
        }
        conn.tx.out.sent(total);
    }
    // Closed and flushed: wait for the last sends to complete and the peer to be done with
    // our large messages (it reads them from our memory), then disconnect.
    while (conn.flow.borrow().sends_outstanding() > 0 || conn.large.lent()) && !conn.is_ended() {
        let _awaiting = SendWait::new(&conn.device);
        conn.writer_woken().await;
    }
    conn.end(EndReason::Closed, false);
}
