//! An in-memory connection pair on one shard: the service dispatch and the client can be
//! tested without sockets, with the same framing, the same bounded send queues and the same
//! backpressure as a real transport.
//!
//! Each direction is one [`OutQueue`]: a side's `send` queues encoded frames there (waiting
//! while it is full), and the other side's `recv` takes them out, so the queue is also "the
//! network": a peer that never calls `recv` makes its partner's sends wait at the limit. No
//! task is involved.

#![deny(missing_docs)]

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use corewire_runtime::{Budget, RoundBudget};

use crate::conn::{
    poll_charged, ConnStats, ConnStatsCells, Connection, OutQueue, PayloadBuf, TransportError,
    TransportKind,
};
use crate::frame::{Frame, FrameDecoder, FrameEncoder, FrameHeader, FrameLimits};

/// Settings of both ends of a [`pair`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct MemOptions {
    /// Frame size limits both ends enforce.
    pub limits: FrameLimits,
    /// Bytes each direction holds before `send` waits (default 4 MiB).
    pub max_queued_bytes: usize,
    /// Fairness budget of each end's `recv`.
    pub budget: Budget,
}

impl Default for MemOptions {
    fn default() -> Self {
        MemOptions {
            limits: FrameLimits::default(),
            max_queued_bytes: 4 << 20,
            budget: Budget::default(),
        }
    }
}

/// Two connected ends.
pub fn pair(options: MemOptions) -> (MemConnection, MemConnection) {
    let a_to_b = Rc::new(OutQueue::new(options.max_queued_bytes));
    let b_to_a = Rc::new(OutQueue::new(options.max_queued_bytes));
    (
        MemConnection::new(a_to_b.clone(), b_to_a.clone(), options),
        MemConnection::new(b_to_a, a_to_b, options),
    )
}

struct End {
    out: Rc<OutQueue>,
    incoming: Rc<OutQueue>,
    options: MemOptions,
    encoder: RefCell<FrameEncoder>,
    decoder: RefCell<FrameDecoder>,
    rx: RefCell<BytesMut>,
    reading: Cell<bool>,
    round: RefCell<RoundBudget>,
    failed: Cell<bool>,
    stats: ConnStatsCells,
}

impl End {
    /// The next frame, moving bytes from the peer's queue into this end as needed.
    fn poll_frame(&self, cx: &mut Context<'_>) -> Poll<Result<Option<Frame>, TransportError>> {
        loop {
            if self.failed.get() {
                return Poll::Ready(Err(TransportError::Closed));
            }
            match self.decoder.borrow_mut().decode(&mut self.rx.borrow_mut()) {
                Ok(Some(frame)) => {
                    self.stats
                        .add_in(frame.payload.len() + frame.attachment.len());
                    return Poll::Ready(Ok(Some(frame)));
                }
                Ok(None) => {}
                Err(err) => return Poll::Ready(Err(TransportError::Protocol(err))),
            }
            let batch = match self.incoming.poll_next_batch(cx, usize::MAX) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(batch) => batch,
            };
            let Some(bufs) = batch else {
                // The peer closed and everything it sent was read.
                let buffered = self.rx.borrow().len();
                return Poll::Ready(if buffered == 0 {
                    Ok(None)
                } else {
                    Err(TransportError::Truncated { buffered })
                });
            };
            let mut rx = self.rx.borrow_mut();
            let mut n = 0;
            for b in bufs {
                n += b.len();
                rx.extend_from_slice(&b);
            }
            drop(rx);
            self.incoming.sent(n);
        }
    }

    fn close(&self) {
        // Our queued frames still reach the peer; it cannot send to us any more.
        self.out.close();
        self.incoming.close();
    }
}

struct Owner(Rc<End>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// One end of an in-memory connection.
#[derive(Clone)]
pub struct MemConnection {
    owner: Rc<Owner>,
}

impl MemConnection {
    fn new(out: Rc<OutQueue>, incoming: Rc<OutQueue>, options: MemOptions) -> MemConnection {
        MemConnection {
            owner: Rc::new(Owner(Rc::new(End {
                out,
                incoming,
                options,
                encoder: RefCell::new(FrameEncoder::new(options.limits)),
                decoder: RefCell::new(FrameDecoder::new(options.limits)),
                rx: RefCell::new(BytesMut::new()),
                reading: Cell::new(false),
                round: RefCell::new(RoundBudget::new(options.budget)),
                failed: Cell::new(false),
                stats: ConnStatsCells::default(),
            }))),
        }
    }

    fn end(&self) -> &End {
        &self.owner.0
    }

    /// Queue raw bytes for the peer, bypassing the encoder (to test bad input).
    pub fn send_raw(&self, bytes: Bytes) {
        self.end().out.push([bytes]);
    }
}

impl Connection for MemConnection {
    fn send(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> impl Future<Output = Result<(), TransportError>> {
        // The queue's future itself (see `TcpConnection::send`).
        let e = self.end();
        e.out
            .push_frame(&e.encoder, &e.stats, header, payload, attachment)
    }

    fn try_send_with(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> Result<bool, TransportError> {
        let e = self.end();
        // A failed connection's queue is closed: refused there, as `send` is.
        e.out
            .try_push_frame_with(&e.encoder, &e.stats, header, payload_len, attachment, write)
    }

    async fn ready_to_send(&self) -> Result<(), TransportError> {
        let e = self.end();
        if !e.failed.get() && e.out.wait_for_room().await {
            Ok(())
        } else {
            Err(TransportError::Closed)
        }
    }

    /// Cancel-safe: bytes move from the peer's queue into this end in the poll that takes
    /// them.
    async fn recv(&self) -> Result<Option<Frame>, TransportError> {
        let e = self.end();
        if e.reading.replace(true) {
            return Err(TransportError::Busy);
        }
        struct Reading<'a>(&'a Cell<bool>);
        impl Drop for Reading<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        let _reading = Reading(&e.reading);
        let result =
            poll_fn(|cx| poll_charged(&mut e.round.borrow_mut(), cx, |cx| e.poll_frame(cx))).await;
        if result.is_err() {
            e.failed.set(true);
            e.close();
        }
        result
    }

    fn close(&self) {
        self.end().close();
    }

    fn is_closed(&self) -> bool {
        let e = self.end();
        e.failed.get() || e.out.is_closed()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Memory
    }

    fn budget(&self) -> Budget {
        self.end().options.budget
    }

    fn arrived_at(&self) -> u64 {
        self.end().round.borrow().arrived_at()
    }

    fn stats(&self) -> ConnStats {
        let e = self.end();
        e.stats.snapshot(e.out.queued_bytes())
    }
}
