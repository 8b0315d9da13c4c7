//! The receive path of an RDMA connection: receive completions become stream bytes (or
//! large-message control records), receive buffers are posted again or held back while the
//! reader is behind (the peer gets the grant back when it catches up), grants come from the
//! shard's budget with a shared receive queue, and `recv` decodes frames out of what
//! arrived. What to grant and when to hold back is [`Flow`]'s decision; this file posts.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;

use bytes::BytesMut;
use corewire_runtime::sync::Notify;
use corewire_runtime::RoundBudget;
use corewire_verbs::WorkCompletion;

use super::super::device::Device;
use super::super::flow::{Flow, Incoming};
use super::super::large::control::{self, CONTROL_IMM};
use super::super::large::incoming::AssemblyError;
use super::super::pool::ChunkId;
use super::super::wakeups::SendWait;
use super::super::wr_id::WrKind;
use super::super::RdmaConfig;
use super::lifecycle::{end_of_stream, Failure, Posting};
use super::ConnCore;
use crate::conn::TransportError;
use crate::frame::{Frame, FrameDecoder};

/// What the connection's one reader is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReaderState {
    /// No `recv` is running.
    Idle,
    /// A `recv` is running.
    Reading,
    /// It waits for the rest of a frame: grants go back at once (the reader is not behind),
    /// whatever is buffered; the frame limits bound it.
    WaitingForFrame,
}

/// The receive side's state.
pub(super) struct Receiver {
    /// Stream bytes received and not yet decoded.
    bytes: RefCell<BytesMut>,
    decoder: RefCell<FrameDecoder>,
    /// Wakes the reader: bytes, a large message, or the end arrived.
    pub(super) ready: Notify,
    state: Cell<ReaderState>,
    /// Receive buffers this connection owns (posted, or held back by backpressure), without
    /// a shared receive queue.
    own: RefCell<Vec<ChunkId>>,
    /// Own buffers held back while the reader is behind: each is a grant not yet given back.
    held: RefCell<Vec<ChunkId>>,
    /// This round's use of the fairness budget, charged by `recv`.
    pub(super) round: RefCell<RoundBudget>,
}

impl Receiver {
    pub(super) fn new(config: &RdmaConfig, own: Vec<ChunkId>) -> Receiver {
        Receiver {
            bytes: RefCell::new(BytesMut::new()),
            decoder: RefCell::new(FrameDecoder::new(config.limits)),
            ready: Notify::new(),
            state: Cell::new(ReaderState::Idle),
            own: RefCell::new(own),
            held: RefCell::new(Vec::new()),
            round: RefCell::new(RoundBudget::new(config.budget)),
        }
    }

    /// The connection ended and its queue pair is gone: its own buffers go back to the pool.
    pub(super) fn release_buffers(&self, device: &Device) {
        let mut pool = device.pool.borrow_mut();
        for c in self.own.borrow_mut().drain(..) {
            pool.free_recv(c);
        }
        drop(pool);
        self.held.borrow_mut().clear();
    }
}

/// Puts the reader back to idle when a `recv` ends or is dropped.
struct ReadingGuard<'a>(&'a Receiver);

impl Drop for ReadingGuard<'_> {
    fn drop(&mut self) {
        self.0.state.set(ReaderState::Idle);
    }
}

impl ConnCore {
    pub(super) fn post_recv(&self, chunk: ChunkId) -> corewire_verbs::Result<()> {
        let pool = self.device.pool.borrow();
        let sge = pool.sge(chunk, pool.chunk_size());
        self.qp_do(|qp| qp.post_recv(self.wr(WrKind::Recv, chunk), &[sge]))
            .unwrap_or(Ok(()))
    }

    pub(super) fn on_recv(&self, kind: WrKind, chunk: ChunkId, wc: &WorkCompletion) {
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
                .bytes
                .borrow_mut()
                .extend_from_slice(pool.read(chunk, len));
            drop(pool);
            self.large.incoming.borrow_mut().stream_bytes(len);
        }
        self.rx.ready.notify_one();
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
            self.rx.held.borrow_mut().push(chunk);
            return;
        }
        self.repost(chunk, 1);
    }

    fn reader_behind(&self) -> bool {
        Flow::hold_back(
            self.rx.bytes.borrow().len(),
            self.shard.config().max_rx_buffered,
            self.rx.state.get() == ReaderState::WaitingForFrame,
        )
    }

    /// Post `chunk` for receive again, granting `grants` withheld credits back to the peer.
    fn repost(&self, chunk: ChunkId, grants: u32) {
        if let Err(e) = self.post_recv(chunk) {
            self.fail(Failure::Post(Posting::Repost, e));
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
        if self.rx.held.borrow().is_empty() || self.reader_behind() {
            return;
        }
        let held: Vec<ChunkId> = self.rx.held.borrow_mut().drain(..).collect();
        for chunk in held {
            self.repost(chunk, 1);
        }
    }

    /// `Connection::recv`. Cancel-safe: every received byte stays buffered in the
    /// connection (the frame decoder and its input live there, not in the future), and a
    /// frame is taken out only in the poll that returns it, so dropping this future loses
    /// nothing and the next call carries on.
    pub(super) async fn recv_frame(&self) -> Result<Option<Frame>, TransportError> {
        if self.rx.state.get() != ReaderState::Idle {
            return Err(TransportError::Busy);
        }
        self.rx.state.set(ReaderState::Reading);
        // Back to idle however this future ends, dropped mid-wait included.
        let _reading = ReadingGuard(&self.rx);
        // The fairness budget, charged here so no reader can forget it (see conn::budget).
        poll_fn(|cx| self.rx.round.borrow_mut().poll_proceed(cx)).await;
        loop {
            let decoded = self.large.incoming.borrow_mut().next_frame(
                &mut self.rx.decoder.borrow_mut(),
                &mut self.rx.bytes.borrow_mut(),
            );
            match decoded {
                Ok(Some(taken)) => {
                    let frame = taken.frame;
                    if !taken.done.is_empty() {
                        self.owe_dones(taken.done);
                    }
                    for d in taken.start {
                        self.start_read(d);
                    }
                    let len = frame.payload.len() + frame.attachment.len();
                    self.stats.add_in(len);
                    let in_round = {
                        let mut round = self.rx.round.borrow_mut();
                        round.charge(len);
                        u64::from(round.round_messages())
                    };
                    let mut st = self.shard.stats.borrow_mut();
                    st.max_round_frames = st.max_round_frames.max(in_round);
                    drop(st);
                    self.rx.state.set(ReaderState::Reading);
                    self.release_held();
                    break Ok(Some(frame));
                }
                Ok(None) => {}
                Err(AssemblyError::Frame(e)) => {
                    self.fail(Failure::Protocol(e.clone()));
                    break Err(TransportError::Protocol(e));
                }
                Err(e @ AssemblyError::Misplaced(_)) => {
                    let err = TransportError::other(e.to_string());
                    self.fail(Failure::Misplaced(e));
                    break Err(err);
                }
            }
            if let Some(reason) = self.life.borrow().reason() {
                break end_of_stream(reason, self.rx.bytes.borrow().len());
            }
            // Waiting for the rest of a frame: the held buffers are needed to receive it.
            self.rx.state.set(ReaderState::WaitingForFrame);
            self.release_held();
            // Waiting for the peer ends the budget's round.
            self.rx.round.borrow_mut().reset();
            // Waiting for our own RDMA READs is waiting for send-queue completions: they
            // must wake the shard (see `wakeups`).
            let _reads = self.large.reading().then(|| SendWait::new(&self.device));
            self.rx.ready.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reader_at_a_time_and_idle_again_when_it_ends() {
        let rx = Receiver::new(&RdmaConfig::default(), Vec::new());
        assert_eq!(rx.state.get(), ReaderState::Idle);
        {
            rx.state.set(ReaderState::WaitingForFrame);
            let _guard = ReadingGuard(&rx);
        }
        assert_eq!(rx.state.get(), ReaderState::Idle);
    }
}
