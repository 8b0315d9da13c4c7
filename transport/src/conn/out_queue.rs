use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Poll, Waker};

use bytes::Bytes;

use super::{ConnStatsCells, TransportError};
use crate::frame::{FrameEncoder, FrameHeader};

/// The send side shared by every task writing to one connection and the one writer task that
/// drains it: buffers queue here and leave in batches (one `sendmsg` or one RDMA post list for
/// many replies), and writers wait when more than `limit` bytes are queued.
pub struct OutQueue {
    bufs: RefCell<VecDeque<Bytes>>,
    bytes: Cell<usize>,
    limit: usize,
    closed: Cell<bool>,
    writer: RefCell<Option<Waker>>,
    waiting_for_room: RefCell<Vec<Waker>>,
}

impl OutQueue {
    pub fn new(limit: usize) -> OutQueue {
        OutQueue {
            bufs: RefCell::new(VecDeque::new()),
            bytes: Cell::new(0),
            limit: limit.max(1),
            closed: Cell::new(false),
            writer: RefCell::new(None),
            waiting_for_room: RefCell::new(Vec::new()),
        }
    }

    pub fn queued_bytes(&self) -> usize {
        self.bytes.get()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Wait until the queue is under its limit. Returns false if the queue closed.
    pub async fn wait_for_room(&self) -> bool {
        poll_fn(|cx| {
            if self.closed.get() {
                return Poll::Ready(false);
            }
            if self.bytes.get() < self.limit {
                return Poll::Ready(true);
            }
            let mut w = self.waiting_for_room.borrow_mut();
            if !w.iter().any(|x| x.will_wake(cx.waker())) {
                w.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Encode `header` and queue the frame (waiting for room first): the send path every
    /// transport shares.
    pub async fn push_frame(
        &self,
        encoder: &RefCell<FrameEncoder>,
        stats: &ConnStatsCells,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> Result<(), TransportError> {
        if !self.wait_for_room().await {
            return Err(TransportError::Closed);
        }
        let head = encoder
            .borrow_mut()
            .encode_header(header, payload.len(), attachment.len())?;
        let total = head.len() + payload.len() + attachment.len();
        self.push([head, payload, attachment]);
        stats.add_out(total);
        Ok(())
    }

    /// Queue buffers that must go out together and in order.
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

    /// For the writer task: `n` bytes of a batch left; wake writers if there is room now.
    pub fn sent(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_sub(n));
        if self.bytes.get() < self.limit {
            for w in self.waiting_for_room.borrow_mut().drain(..) {
                w.wake();
            }
        }
    }

    /// No more buffers will be accepted; what is queued may still be flushed.
    pub fn close(&self) {
        self.closed.set(true);
        if let Some(w) = self.writer.borrow_mut().take() {
            w.wake();
        }
        for w in self.waiting_for_room.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Drop what is queued (after a send error nothing more can go out).
    pub fn discard(&self) {
        self.bufs.borrow_mut().clear();
        self.bytes.set(0);
        self.close();
    }
}
