use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use corewire_runtime::sync::{Notify, Semaphore, WakerCell};

use super::{ConnStatsCells, TransportError};
use crate::frame::{FrameEncoder, FrameHeader};

/// The send side shared by every task writing to one connection and the one writer task that
/// drains it: buffers queue here and leave in batches (one `sendmsg` or one RDMA post list for
/// many replies).
///
/// **The limit is a true bound.** Admission is a FIFO [`Semaphore`] with one permit per byte:
/// a frame takes as many permits as it has bytes (at most `limit`, so one frame larger than
/// the limit still goes out, alone, once the queue is empty), and gives them back as its
/// bytes are sent. Writers that do not fit wait in line and newcomers queue behind them, so
/// admitted bytes never exceed `max(limit, largest frame)` however many tasks are waiting. A
/// waiting writer that is dropped leaves the line and hands its turn on. Only the few small
/// control frames of [`push`](OutQueue::push) come on top.
///
/// **Small frames are copied together.** A frame of at most [`OutQueue::COPY_MAX`] bytes is
/// encoded straight into a staging buffer behind the last one, so the replies to a batch of
/// pipelined small requests leave as one buffer (one iovec), with no header allocation and no
/// reference counts per frame; larger frames keep their payload and attachment buffers (sent
/// vectored, never copied).
pub struct OutQueue {
    bufs: RefCell<VecDeque<Bytes>>,
    /// Small frames, queued after everything in `bufs`.
    staged: RefCell<BytesMut>,
    /// Frames up to this size are staged (0: none, for transports that copy anyway).
    copy_max: usize,
    bytes: Cell<usize>,
    /// Queued bytes that hold no permit: control frames, and the part of a frame beyond
    /// `limit`. Counted as sent first, which keeps permits held longer than their bytes,
    /// never shorter: the bound stays true.
    uncharged: Cell<usize>,
    limit: usize,
    closed: Cell<bool>,
    admission: Semaphore,
    /// The writer task, waiting for buffers.
    writer: WakerCell,
    /// Tasks waiting in [`OutQueue::wait_for_room`] (readers applying backpressure).
    room: Notify,
}

impl OutQueue {
    /// Frames up to this many bytes are copied into the staging buffer. Below it a copy costs
    /// less than the iovec, the header buffer and the reference counts it replaces (a 64 B
    /// echo's replies: BENCHMARKS.md); above it the copy would dominate.
    pub const COPY_MAX: usize = 1024;
    /// The staging buffer grows by at least this much (what an idle connection may keep).
    const STAGE_CHUNK: usize = 4096;

    /// A queue that holds at most `limit` bytes.
    pub fn new(limit: usize) -> OutQueue {
        Self::with_copy_max(limit, Self::COPY_MAX)
    }

    /// A queue that never copies frames together: for a transport whose writer copies every
    /// byte anyway (RDMA into registered chunks).
    pub fn without_copies(limit: usize) -> OutQueue {
        Self::with_copy_max(limit, 0)
    }

    fn with_copy_max(limit: usize, copy_max: usize) -> OutQueue {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        OutQueue {
            bufs: RefCell::new(VecDeque::new()),
            staged: RefCell::new(BytesMut::new()),
            copy_max,
            bytes: Cell::new(0),
            uncharged: Cell::new(0),
            limit,
            closed: Cell::new(false),
            admission: Semaphore::new(limit),
            writer: WakerCell::new(),
            room: Notify::new(),
        }
    }

    /// The most bytes the queue holds.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes queued and not yet sent.
    pub fn queued_bytes(&self) -> usize {
        self.bytes.get()
    }

    /// Whether the queue was closed (nothing more is accepted).
    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Under the limit with nobody waiting to queue: a new frame would be admitted at once.
    pub fn has_room(&self) -> bool {
        self.bytes.get() < self.limit && !self.admission.has_waiters()
    }

    /// Wait until [`has_room`](Self::has_room) (a reader calls this before reading more
    /// requests, so a peer that stops reading replies makes the server stop reading from it).
    /// Returns false if the queue closed. Cancel-safe.
    pub async fn wait_for_room(&self) -> bool {
        loop {
            // No await between the checks and `notified()`: no wake-up falls in between.
            if self.closed.get() {
                return false;
            }
            if self.has_room() {
                return true;
            }
            self.room.notified().await;
        }
    }

    /// Wait until `len` more bytes may be queued (see the type's docs), and take their
    /// permits: the caller must queue them with [`push_admitted`](Self::push_admitted) before
    /// it next awaits. Returns false if the queue closed. Cancel-safe: dropping it gives up
    /// its place in line.
    async fn admit(&self, len: usize) -> bool {
        match self.admission.acquire(len.min(self.limit)).await {
            Ok(permit) => {
                // Given back byte by byte in `sent`.
                permit.forget();
                true
            }
            Err(_closed) => false,
        }
    }

    /// Encode `header` and queue the frame once it is admitted: the send path every
    /// transport shares. All or nothing: dropped before it returns, nothing was queued.
    pub async fn push_frame(
        &self,
        encoder: &RefCell<FrameEncoder>,
        stats: &ConnStatsCells,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> Result<(), TransportError> {
        let total = encoder
            .borrow()
            .frame_len(header, payload.len(), attachment.len())?;
        if total <= self.copy_max {
            if !self.admit(total).await {
                return Err(TransportError::Closed);
            }
            // Encoded only once admitted: a future dropped while waiting queued nothing.
            let mut staged = self.staged.borrow_mut();
            if staged.capacity() - staged.len() < total {
                staged.reserve(total.max(Self::STAGE_CHUNK));
            }
            encoder
                .borrow_mut()
                .encode_frame(header, &payload, &attachment, &mut staged)?;
            drop(staged);
            // Its permits come back as its bytes are sent (only a part beyond the limit
            // holds none, as in `push_admitted`).
            self.bytes.set(self.bytes.get() + total);
            self.uncharged
                .set(self.uncharged.get() + total.saturating_sub(self.limit));
            self.writer.wake();
            stats.add_out(total);
            return Ok(());
        }
        // Encoded first, so admission waits for the frame's exact size; a future dropped
        // while waiting just drops the encoded header.
        let head = encoder
            .borrow_mut()
            .encode_header(header, payload.len(), attachment.len())?;
        if !self.admit(total).await {
            return Err(TransportError::Closed);
        }
        self.push_admitted([head, payload, attachment], total);
        stats.add_out(total);
        Ok(())
    }

    /// Queue a frame of `total` bytes whose permits [`admit`](Self::admit) took.
    fn push_admitted(&self, bufs: impl IntoIterator<Item = Bytes>, total: usize) {
        self.uncharged
            .set(self.uncharged.get() + total.saturating_sub(self.limit));
        self.enqueue(bufs);
    }

    /// Queue buffers that must go out together and in order, without waiting and without
    /// admission: for the few small control frames a transport must be able to queue from a
    /// context that cannot wait.
    pub fn push(&self, bufs: impl IntoIterator<Item = Bytes>) {
        let before = self.bytes.get();
        self.enqueue(bufs);
        self.uncharged
            .set(self.uncharged.get() + (self.bytes.get() - before));
    }

    fn enqueue(&self, bufs: impl IntoIterator<Item = Bytes>) {
        let mut q = self.bufs.borrow_mut();
        // Staged frames came first.
        self.unstage(&mut q);
        for b in bufs {
            if !b.is_empty() {
                self.bytes.set(self.bytes.get() + b.len());
                q.push_back(b);
            }
        }
        drop(q);
        self.writer.wake();
    }

    /// For the writer task: the next batch (at most `max_bufs` buffers), waiting for one if
    /// the queue is empty. `None` once the queue is closed and empty.
    pub async fn next_batch(&self, max_bufs: usize) -> Option<Vec<Bytes>> {
        poll_fn(|cx| self.poll_next_batch(cx, max_bufs)).await
    }

    /// [`next_batch`](Self::next_batch) for poll-based readers (the in-memory connection):
    /// the task stays registered between polls, no future need be kept.
    pub fn poll_next_batch(
        &self,
        cx: &mut Context<'_>,
        max_bufs: usize,
    ) -> Poll<Option<Vec<Bytes>>> {
        let mut q = self.bufs.borrow_mut();
        self.unstage(&mut q);
        if q.is_empty() {
            if self.closed.get() {
                return Poll::Ready(None);
            }
            self.writer.register(cx.waker());
            return Poll::Pending;
        }
        let n = q.len().min(max_bufs.max(1));
        Poll::Ready(Some(q.drain(..n).collect()))
    }

    /// Moves the staged frames to the end of the queue, as one buffer.
    fn unstage(&self, q: &mut VecDeque<Bytes>) {
        let mut staged = self.staged.borrow_mut();
        if !staged.is_empty() {
            q.push_back(staged.split().freeze());
        }
    }

    /// For the writer task: `n` bytes of a batch left; their permits go back (waking the
    /// writers in line that fit now), then the readers waiting for room if there is some.
    pub fn sent(&self, n: usize) {
        let n = n.min(self.bytes.get());
        self.bytes.set(self.bytes.get() - n);
        let free = n.min(self.uncharged.get());
        self.uncharged.set(self.uncharged.get() - free);
        if n > free {
            self.admission.add_permits(n - free);
        }
        if self.has_room() {
            self.room.notify_waiters();
        }
    }

    /// No more buffers will be accepted; what is queued may still be flushed.
    pub fn close(&self) {
        self.closed.set(true);
        self.admission.close();
        self.writer.wake();
        self.room.notify_waiters();
    }

    /// Drop what is queued (after a send error nothing more can go out).
    pub fn discard(&self) {
        self.bufs.borrow_mut().clear();
        *self.staged.borrow_mut() = BytesMut::new();
        self.bytes.set(0);
        self.uncharged.set(0);
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::{pin, Pin};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn flag() -> (Arc<Flag>, Waker) {
        let f = Arc::new(Flag(false.into()));
        (f.clone(), Waker::from(f))
    }

    fn woken(f: &Flag) -> bool {
        f.0.swap(false, Ordering::SeqCst)
    }

    fn poll_fut<F: Future>(f: Pin<&mut F>, w: &Waker) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(w))
    }

    fn bytes(n: usize) -> Bytes {
        Bytes::from(vec![0u8; n])
    }

    /// Admit and queue an `n`-byte frame that fits now, as `push_frame` does.
    fn queue_frame(q: &OutQueue, n: usize) {
        let (_f, w) = flag();
        assert_eq!(poll_fut(pin!(q.admit(n)), &w), Poll::Ready(true));
        q.push_admitted([bytes(n)], n);
    }

    #[test]
    fn queued_bytes_never_exceed_the_limit_however_many_wait() {
        let q = OutQueue::new(100);
        queue_frame(&q, 60);
        let (fa, wa) = flag();
        let (fb, wb) = flag();
        let mut a = pin!(q.admit(60));
        let mut b = pin!(q.admit(60));
        assert!(poll_fut(a.as_mut(), &wa).is_pending());
        assert!(poll_fut(b.as_mut(), &wb).is_pending());
        // 60 bytes leave: only the first in line is woken, and it fits.
        q.sent(60);
        assert!(woken(&fa) && !woken(&fb));
        assert_eq!(poll_fut(a.as_mut(), &wa), Poll::Ready(true));
        q.push_admitted([bytes(60)], 60);
        // The next one does not fit yet.
        assert!(poll_fut(b.as_mut(), &wb).is_pending());
        assert_eq!(q.queued_bytes(), 60);
        q.sent(60);
        assert!(woken(&fb));
        assert_eq!(poll_fut(b.as_mut(), &wb), Poll::Ready(true));
    }

    #[test]
    fn an_oversized_frame_goes_alone() {
        let q = OutQueue::new(10);
        queue_frame(&q, 1000);
        let (f, w) = flag();
        let mut small = pin!(q.admit(1));
        assert!(poll_fut(small.as_mut(), &w).is_pending());
        // Its bytes beyond the limit count as leaving first: no room yet.
        q.sent(990);
        assert!(!woken(&f));
        assert!(poll_fut(small.as_mut(), &w).is_pending());
        // 5 of its 10 charged bytes gone: 5 + 1 fits under the limit.
        q.sent(5);
        assert!(woken(&f));
        assert_eq!(poll_fut(small.as_mut(), &w), Poll::Ready(true));
    }

    #[test]
    fn control_frames_take_no_permits_and_hold_none_back() {
        let q = OutQueue::new(100);
        q.push([bytes(30)]);
        queue_frame(&q, 70);
        assert_eq!(q.queued_bytes(), 100);
        assert!(!q.has_room());
        q.sent(100);
        assert!(q.has_room());
        queue_frame(&q, 100);
    }

    #[test]
    fn small_frames_leave_together_and_everything_in_order() {
        use crate::frame::FrameLimits;

        let q = OutQueue::new(1 << 20);
        let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
        let stats = ConnStatsCells::default();
        let (_f, w) = flag();
        let expected = RefCell::new(BytesMut::new());
        let send = |id: u64, payload: Bytes| {
            let header = FrameHeader::request(1, 1, id);
            let mut reference = FrameEncoder::new(FrameLimits::default());
            reference
                .encode_frame(&header, &payload, b"", &mut expected.borrow_mut())
                .unwrap();
            let pushed = q.push_frame(&encoder, &stats, &header, payload, Bytes::new());
            assert!(matches!(poll_fut(pin!(pushed), &w), Poll::Ready(Ok(()))));
        };
        send(1, bytes(64));
        send(2, bytes(64));
        send(3, bytes(OutQueue::COPY_MAX)); // over COPY_MAX with its header: not copied
        q.push([Bytes::from_static(b"control")]);
        expected.borrow_mut().extend_from_slice(b"control");
        send(4, bytes(10));
        let expected = expected.into_inner();
        assert_eq!(q.queued_bytes(), expected.len());
        let batch = match q.poll_next_batch(&mut Context::from_waker(&w), usize::MAX) {
            Poll::Ready(Some(batch)) => batch,
            other => panic!("expected a batch, got {other:?}"),
        };
        // Frames 1 and 2 as one buffer; frame 3's header and payload; the control frame;
        // frame 4.
        let lens: Vec<usize> = batch.iter().map(Bytes::len).collect();
        assert_eq!(lens.len(), 5, "{lens:?}");
        assert_eq!(lens[3], b"control".len());
        assert_eq!(batch.concat(), expected.to_vec());
        q.sent(expected.len());
        assert_eq!(q.queued_bytes(), 0);
        assert!(q.has_room());
    }

    #[test]
    fn staged_frames_give_their_permits_back() {
        use crate::frame::FrameLimits;

        // A queue that holds ten small frames: a thousand pass through it one by one, so
        // every sent byte must have given its permit back.
        let q = OutQueue::new(1000);
        let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
        let stats = ConnStatsCells::default();
        let (_f, w) = flag();
        for id in 0..1000 {
            let header = FrameHeader::request(1, 1, id);
            let pushed = q.push_frame(&encoder, &stats, &header, bytes(20), Bytes::new());
            assert!(
                matches!(poll_fut(pin!(pushed), &w), Poll::Ready(Ok(()))),
                "frame {id} not admitted"
            );
            let batch = match q.poll_next_batch(&mut Context::from_waker(&w), usize::MAX) {
                Poll::Ready(Some(batch)) => batch,
                other => panic!("expected a batch, got {other:?}"),
            };
            q.sent(batch.iter().map(Bytes::len).sum());
        }
        assert_eq!(q.queued_bytes(), 0);
    }

    #[test]
    fn newcomers_do_not_jump_the_line() {
        let q = OutQueue::new(100);
        queue_frame(&q, 50);
        let (_fa, wa) = flag();
        let mut big = pin!(q.admit(80));
        assert!(poll_fut(big.as_mut(), &wa).is_pending());
        // A small frame would fit, but someone is waiting: it queues behind.
        let mut small = pin!(q.admit(10));
        assert!(poll_fut(small.as_mut(), &wa).is_pending());
        assert!(!q.has_room());
    }

    #[test]
    fn a_dropped_waiter_hands_its_turn_on() {
        let q = OutQueue::new(100);
        queue_frame(&q, 100);
        let (_fa, wa) = flag();
        let (fb, wb) = flag();
        let mut a = Box::pin(q.admit(60));
        let mut b = pin!(q.admit(50));
        assert!(poll_fut(a.as_mut(), &wa).is_pending());
        assert!(poll_fut(b.as_mut(), &wb).is_pending());
        q.sent(50);
        assert!(!woken(&fb));
        drop(a);
        assert!(woken(&fb));
        assert_eq!(poll_fut(b.as_mut(), &wb), Poll::Ready(true));
        assert!(!q.admission.has_waiters());
    }

    #[test]
    fn room_waiters_wake_when_the_line_is_empty_and_under_the_limit() {
        let q = OutQueue::new(100);
        queue_frame(&q, 100);
        let (f, w) = flag();
        let mut room = pin!(q.wait_for_room());
        assert!(poll_fut(room.as_mut(), &w).is_pending());
        q.sent(1);
        assert!(woken(&f));
        assert_eq!(poll_fut(room.as_mut(), &w), Poll::Ready(true));
    }

    #[test]
    fn a_dropped_room_waiter_does_not_keep_the_others_asleep() {
        let q = OutQueue::new(10);
        queue_frame(&q, 10);
        let (fa, wa) = flag();
        let (fb, wb) = flag();
        let mut a = Box::pin(q.wait_for_room());
        let mut b = pin!(q.wait_for_room());
        assert!(poll_fut(a.as_mut(), &wa).is_pending());
        assert!(poll_fut(b.as_mut(), &wb).is_pending());
        drop(a);
        q.sent(10);
        assert!(!woken(&fa) && woken(&fb));
        assert_eq!(poll_fut(b.as_mut(), &wb), Poll::Ready(true));
    }

    #[test]
    fn the_writer_stays_registered_between_polls() {
        // The in-memory connection polls `poll_next_batch` without keeping a future.
        let q = OutQueue::new(100);
        let (fw, w) = flag();
        let mut cx = Context::from_waker(&w);
        assert!(q.poll_next_batch(&mut cx, 8).is_pending());
        q.push([bytes(5)]);
        assert!(woken(&fw));
        match q.poll_next_batch(&mut cx, 8) {
            Poll::Ready(Some(batch)) => assert_eq!(batch.len(), 1),
            other => panic!(
                "expected the pushed buffer, got {:?}",
                other.map(|b| b.map(|b| b.len()))
            ),
        }
    }

    #[test]
    fn close_releases_every_waiter() {
        let q = OutQueue::new(10);
        queue_frame(&q, 10);
        let (f, w) = flag();
        let (fr, wr) = flag();
        let (fw, ww) = flag();
        let mut a = pin!(q.admit(5));
        let mut room = pin!(q.wait_for_room());
        assert!(poll_fut(a.as_mut(), &w).is_pending());
        assert!(poll_fut(room.as_mut(), &wr).is_pending());
        let mut writer = pin!(q.next_batch(8));
        assert!(poll_fut(writer.as_mut(), &ww).is_ready()); // the queued frame
        assert!(poll_fut(pin!(q.next_batch(8)), &ww).is_pending());
        q.close();
        assert!(woken(&f) && woken(&fr) && woken(&fw));
        assert_eq!(poll_fut(a.as_mut(), &w), Poll::Ready(false));
        assert_eq!(poll_fut(room.as_mut(), &wr), Poll::Ready(false));
        assert_eq!(poll_fut(pin!(q.next_batch(8)), &ww), Poll::Ready(None));
    }
}
