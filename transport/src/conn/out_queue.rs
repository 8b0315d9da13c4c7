use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use super::{ConnStatsCells, TransportError};
use crate::frame::{FrameEncoder, FrameHeader};

/// The send side shared by every task writing to one connection and the one writer task that
/// drains it: buffers queue here and leave in batches (one `sendmsg` or one RDMA post list for
/// many replies).
///
/// **The limit is a true bound.** A frame is admitted only if it fits under `limit` with what
/// is already queued, or if the queue is empty (so one frame larger than the limit still goes
/// out, alone). Writers that do not fit wait in FIFO order, and only the oldest may take the
/// room that frees up, so queued bytes never exceed `max(limit, largest frame)` however many
/// tasks are waiting. A waiting writer that is dropped leaves the line and hands its turn on.
pub struct OutQueue {
    bufs: RefCell<VecDeque<Bytes>>,
    bytes: Cell<usize>,
    limit: usize,
    closed: Cell<bool>,
    writer: RefCell<Option<Waker>>,
    /// Writers waiting for room, oldest first: (ticket, waker).
    waiting: RefCell<VecDeque<(u64, Waker)>>,
    next_ticket: Cell<u64>,
    /// Tasks waiting in [`OutQueue::wait_for_room`] (readers applying backpressure).
    room_waiters: RefCell<Vec<Waker>>,
}

impl OutQueue {
    /// A queue that holds at most `limit` bytes.
    pub fn new(limit: usize) -> OutQueue {
        OutQueue {
            bufs: RefCell::new(VecDeque::new()),
            bytes: Cell::new(0),
            limit: limit.max(1),
            closed: Cell::new(false),
            writer: RefCell::new(None),
            waiting: RefCell::new(VecDeque::new()),
            next_ticket: Cell::new(0),
            room_waiters: RefCell::new(Vec::new()),
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
        self.bytes.get() < self.limit && self.waiting.borrow().is_empty()
    }

    /// Wait until [`has_room`](Self::has_room) (a reader calls this before reading more
    /// requests, so a peer that stops reading replies makes the server stop reading from it).
    /// Returns false if the queue closed. Cancel-safe.
    pub async fn wait_for_room(&self) -> bool {
        poll_fn(|cx| {
            if self.closed.get() {
                return Poll::Ready(false);
            }
            if self.has_room() {
                return Poll::Ready(true);
            }
            let mut w = self.room_waiters.borrow_mut();
            if !w.iter().any(|x| x.will_wake(cx.waker())) {
                w.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Wait until `len` more bytes may be queued (see the type's docs). Returns false if the
    /// queue closed. Cancel-safe: dropping it gives up its place in line.
    pub fn admit(&self, len: usize) -> Admit<'_> {
        Admit {
            queue: self,
            len,
            ticket: None,
        }
    }

    fn fits(&self, len: usize) -> bool {
        let queued = self.bytes.get();
        queued == 0 || queued.saturating_add(len) <= self.limit
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
        // Encoded first, so admission waits for the frame's exact size; a future dropped
        // while waiting just drops the encoded header.
        let head = encoder
            .borrow_mut()
            .encode_header(header, payload.len(), attachment.len())?;
        let total = head.len() + payload.len() + attachment.len();
        if !self.admit(total).await {
            return Err(TransportError::Closed);
        }
        self.push([head, payload, attachment]);
        stats.add_out(total);
        Ok(())
    }

    /// Queue buffers that must go out together and in order, without waiting: for frames
    /// already admitted, and for the few small control frames a transport must be able to
    /// queue from a context that cannot wait.
    pub fn push(&self, bufs: impl IntoIterator<Item = Bytes>) {
        let mut q = self.bufs.borrow_mut();
        for b in bufs {
            if !b.is_empty() {
                self.bytes.set(self.bytes.get() + b.len());
                q.push_back(b);
            }
        }
        drop(q);
        if let Some(w) = self.writer.borrow_mut().take() {
            w.wake();
        }
    }

    /// For the writer task: the next batch (at most `max_bufs` buffers), waiting for one if
    /// the queue is empty. `None` once the queue is closed and empty.
    pub async fn next_batch(&self, max_bufs: usize) -> Option<Vec<Bytes>> {
        poll_fn(|cx| {
            let mut q = self.bufs.borrow_mut();
            if q.is_empty() {
                if self.closed.get() {
                    return Poll::Ready(None);
                }
                *self.writer.borrow_mut() = Some(cx.waker().clone());
                return Poll::Pending;
            }
            let n = q.len().min(max_bufs.max(1));
            Poll::Ready(Some(q.drain(..n).collect()))
        })
        .await
    }

    /// For the writer task: `n` bytes of a batch left; let the next waiter in if it fits now.
    pub fn sent(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_sub(n));
        self.wake_next();
    }

    /// Wake whoever may proceed now: the oldest waiting writer, or, with nobody waiting and
    /// room below the limit, the tasks in `wait_for_room`.
    fn wake_next(&self) {
        let front = self.waiting.borrow().front().map(|(_, w)| w.clone());
        match front {
            Some(w) => w.wake(),
            None if self.bytes.get() < self.limit => self.wake_room_waiters(),
            None => {}
        }
    }

    fn wake_room_waiters(&self) {
        let waiters = std::mem::take(&mut *self.room_waiters.borrow_mut());
        for w in waiters {
            w.wake();
        }
    }

    /// No more buffers will be accepted; what is queued may still be flushed.
    pub fn close(&self) {
        self.closed.set(true);
        if let Some(w) = self.writer.borrow_mut().take() {
            w.wake();
        }
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        for (_, w) in waiting {
            w.wake();
        }
        self.wake_room_waiters();
    }

    /// Drop what is queued (after a send error nothing more can go out).
    pub fn discard(&self) {
        self.bufs.borrow_mut().clear();
        self.bytes.set(0);
        self.close();
    }
}

/// The future of [`OutQueue::admit`].
pub struct Admit<'a> {
    queue: &'a OutQueue,
    len: usize,
    /// Our place in line, once we had to wait.
    ticket: Option<u64>,
}

impl Future for Admit<'_> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let q = self.queue;
        if q.closed.get() {
            self.ticket = None;
            return Poll::Ready(false);
        }
        match self.ticket {
            None => {
                if q.waiting.borrow().is_empty() && q.fits(self.len) {
                    return Poll::Ready(true);
                }
                let ticket = q.next_ticket.get();
                q.next_ticket.set(ticket + 1);
                q.waiting
                    .borrow_mut()
                    .push_back((ticket, cx.waker().clone()));
                self.ticket = Some(ticket);
                Poll::Pending
            }
            Some(mine) => {
                let mut waiting = q.waiting.borrow_mut();
                let first = waiting.front().map(|(t, _)| *t) == Some(mine);
                if first && q.fits(self.len) {
                    waiting.pop_front();
                    drop(waiting);
                    self.ticket = None;
                    // The caller queues its frame before anyone else runs; then the next in
                    // line looks for itself whether it fits.
                    q.wake_next();
                    return Poll::Ready(true);
                }
                if let Some((_, w)) = waiting.iter_mut().find(|(t, _)| *t == mine) {
                    if !w.will_wake(cx.waker()) {
                        *w = cx.waker().clone();
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Admit<'_> {
    fn drop(&mut self) {
        let Some(mine) = self.ticket else { return };
        let mut waiting = self.queue.waiting.borrow_mut();
        let Some(pos) = waiting.iter().position(|(t, _)| *t == mine) else {
            return;
        };
        waiting.remove(pos);
        drop(waiting);
        if pos == 0 {
            // We were first in line: the turn passes on.
            self.queue.wake_next();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn flag() -> (Arc<Flag>, Waker) {
        let f = Arc::new(Flag(false.into()));
        (f.clone(), Waker::from(f))
    }

    fn woken(f: &Flag) -> bool {
        f.0.swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    fn poll_admit(a: Pin<&mut Admit<'_>>, w: &Waker) -> Poll<bool> {
        a.poll(&mut Context::from_waker(w))
    }

    fn bytes(n: usize) -> Bytes {
        Bytes::from(vec![0u8; n])
    }

    #[test]
    fn queued_bytes_never_exceed_the_limit_however_many_wait() {
        let q = OutQueue::new(100);
        q.push([bytes(60)]);
        let (fa, wa) = flag();
        let (fb, wb) = flag();
        let mut a = pin!(q.admit(60));
        let mut b = pin!(q.admit(60));
        assert!(poll_admit(a.as_mut(), &wa).is_pending());
        assert!(poll_admit(b.as_mut(), &wb).is_pending());
        // 60 bytes leave: only the first in line is woken, and it fits.
        q.sent(60);
        assert!(woken(&fa) && !woken(&fb));
        assert_eq!(poll_admit(a.as_mut(), &wa), Poll::Ready(true));
        q.push([bytes(60)]);
        // It handed the turn on; the next one does not fit yet.
        assert!(woken(&fb));
        assert!(poll_admit(b.as_mut(), &wb).is_pending());
        assert_eq!(q.queued_bytes(), 60);
        q.sent(60);
        assert_eq!(poll_admit(b.as_mut(), &wb), Poll::Ready(true));
    }

    #[test]
    fn an_oversized_frame_goes_alone() {
        let q = OutQueue::new(10);
        let (_f, w) = flag();
        assert_eq!(
            poll_admit(pin!(q.admit(1000)).as_mut(), &w),
            Poll::Ready(true)
        );
        q.push([bytes(1000)]);
        assert!(poll_admit(pin!(q.admit(1)).as_mut(), &w).is_pending());
    }

    #[test]
    fn newcomers_do_not_jump_the_line() {
        let q = OutQueue::new(100);
        q.push([bytes(50)]);
        let (_fa, wa) = flag();
        let mut big = pin!(q.admit(80));
        assert!(poll_admit(big.as_mut(), &wa).is_pending());
        // A small frame would fit, but someone is waiting: it queues behind.
        let mut small = pin!(q.admit(10));
        assert!(poll_admit(small.as_mut(), &wa).is_pending());
        assert!(!q.has_room());
    }

    #[test]
    fn a_dropped_waiter_hands_its_turn_on() {
        let q = OutQueue::new(100);
        q.push([bytes(100)]);
        let (_fa, wa) = flag();
        let (fb, wb) = flag();
        let mut a = Box::pin(q.admit(50));
        let mut b = pin!(q.admit(50));
        assert!(poll_admit(a.as_mut(), &wa).is_pending());
        assert!(poll_admit(b.as_mut(), &wb).is_pending());
        q.sent(100);
        drop(a);
        assert!(woken(&fb));
        assert_eq!(poll_admit(b.as_mut(), &wb), Poll::Ready(true));
        assert!(q.waiting.borrow().is_empty());
    }

    #[test]
    fn room_waiters_wake_when_the_line_is_empty_and_under_the_limit() {
        let q = OutQueue::new(100);
        q.push([bytes(100)]);
        let (f, w) = flag();
        let mut room = pin!(q.wait_for_room());
        assert!(room
            .as_mut()
            .poll(&mut Context::from_waker(&w))
            .is_pending());
        q.sent(1);
        assert!(woken(&f));
        assert_eq!(
            room.as_mut().poll(&mut Context::from_waker(&w)),
            Poll::Ready(true)
        );
    }

    #[test]
    fn close_releases_every_waiter() {
        let q = OutQueue::new(10);
        q.push([bytes(10)]);
        let (f, w) = flag();
        let mut a = pin!(q.admit(5));
        assert!(poll_admit(a.as_mut(), &w).is_pending());
        q.close();
        assert!(woken(&f));
        assert_eq!(poll_admit(a.as_mut(), &w), Poll::Ready(false));
    }
}
