//! Frames over TCP on the shard's ring: one reader at a time decodes the chunks the stream
//! receives (multishot receive into the shard's buffer ring); one writer task per connection
//! drains the shared [`OutQueue`] with vectored sends.
//!
//! Receiving is cancel-safe: the stream keeps its receive armed and its undelivered chunks,
//! and the bytes of a partial frame belong to the connection, not to the `recv` future. A
//! connection waiting for its peer holds no receive buffer: chunks are copied into the
//! decode buffer and go back to the ring, and the decode buffer is freed when it is empty.

#![deny(missing_docs)]

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use corewire_runtime::accept::{Accepted, ListenerHandle, TcpEndpoint};
use corewire_runtime::net::TcpStream;
use corewire_runtime::{spawn_local, Budget, RoundBudget, Runtime};

use crate::conn::{
    poll_charged, ConnStats, ConnStatsCells, Connection, OutQueue, TransportError, TransportKind,
};
use crate::frame::{Frame, FrameDecoder, FrameEncoder, FrameError, FrameHeader, FrameLimits};
use crate::listen::{ConnSettings, Listener};

/// Settings of one frame connection.
#[derive(Debug, Clone, Copy)]
pub struct ConnOptions {
    /// Frame size limits the connection enforces.
    pub limits: FrameLimits,
    /// Bytes queued for sending before `send` waits (default 4 MiB).
    pub max_queued_bytes: usize,
    /// Fairness budget charged by `recv`.
    pub budget: Budget,
}

impl Default for ConnOptions {
    fn default() -> Self {
        ConnOptions {
            limits: FrameLimits::default(),
            max_queued_bytes: 4 << 20,
            budget: Budget::default(),
        }
    }
}

/// Buffers per sendmsg; Linux's IOV_MAX is 1024.
const MAX_IOVECS: usize = 1024;

struct Shared {
    read: RefCell<ReadSide>,
    /// A `recv` future is alive (a second concurrent one gets `Busy`).
    reading: Cell<bool>,
    /// This round's use of the connection's fairness budget, charged by `recv`.
    round: RefCell<RoundBudget>,
    stream: TcpStream,
    peer: Option<SocketAddr>,
    options: ConnOptions,
    out: OutQueue,
    encoder: RefCell<FrameEncoder>,
    stats: ConnStatsCells,
    failed: Cell<bool>,
}

/// The receive side: it outlives any one `recv` future.
struct ReadSide {
    decoder: FrameDecoder,
    /// Received bytes not yet decoded (empty and unallocated while waiting for the peer).
    buf: BytesMut,
    /// The body of the frame whose header was taken, when it had not all arrived with it.
    body: Option<Body>,
    /// The peer closed its side.
    eof: bool,
}

/// A frame body that spans several receive chunks, gathered in one buffer allocated once at
/// its full size, so received bytes are copied once: growing the receive buffer chunk by chunk
/// cost three or four allocations and a re-copy of the part already there, and copying the
/// first chunk's part into a body buffer of its own cost a second copy of it (BENCHMARKS.md,
/// issue 12, the 4 KiB RPC rows). The buffer is the receive buffer itself when that was sized
/// for the frame as its first bytes arrived.
struct Body {
    bytes: BytesMut,
    payload: usize,
    attachment: usize,
}

impl Body {
    fn missing(&self) -> usize {
        self.payload + self.attachment - self.bytes.len()
    }
}

impl ReadSide {
    /// The next frame, receiving as needed. Never loses bytes when the caller stops polling.
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
        stream: &TcpStream,
        stats: &ConnStatsCells,
    ) -> Poll<Result<Option<Frame>, TransportError>> {
        loop {
            match self.next_frame() {
                Ok(Some(frame)) => {
                    stats.add_in(frame.payload.len() + frame.attachment.len());
                    return Poll::Ready(Ok(Some(frame)));
                }
                Ok(None) => {}
                Err(e) => return Poll::Ready(Err(TransportError::Protocol(e))),
            }
            if self.eof {
                let buffered = self.buf.len() + self.body.as_ref().map_or(0, |b| b.bytes.len());
                return Poll::Ready(if buffered == 0 {
                    Ok(None)
                } else {
                    Err(TransportError::Truncated { buffered })
                });
            }
            match stream.poll_recv_chunk(cx) {
                Poll::Ready(Ok(Some(chunk))) => {
                    // A body being gathered takes what it misses; the rest is later frames.
                    let mut rest = &chunk[..];
                    if let Some(body) = &mut self.body {
                        let n = body.missing().min(rest.len());
                        body.bytes.extend_from_slice(&rest[..n]);
                        rest = &rest[n..];
                    }
                    if self.buf.is_empty() {
                        // A frame starts here: when it is longer than this chunk, allocate
                        // for all of it now, so its body can be gathered in this same
                        // buffer rather than copied into one of its own (`next_frame`).
                        if let Some(len) = self.decoder.peek_frame_len(rest) {
                            if len > rest.len() {
                                self.buf.reserve(len);
                            }
                        }
                    }
                    self.buf.extend_from_slice(rest);
                }
                Poll::Ready(Ok(None)) => self.eof = true,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(TransportError::Io(e))),
                Poll::Pending => {
                    if self.buf.is_empty() && self.buf.capacity() > 0 {
                        self.buf = BytesMut::new();
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// The next whole frame from what was received, `Ok(None)` until one is complete.
    fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.body.is_none() {
            let Some((payload, attachment)) = self.decoder.decode_header(&mut self.buf)? else {
                return Ok(None);
            };
            if self.buf.len() >= payload + attachment {
                // All here: the parts share the receive buffer's allocation.
                let p = self.buf.split_to(payload).freeze();
                let a = self.buf.split_to(attachment).freeze();
                return Ok(self.decoder.finish(p, a));
            }
            // Everything buffered belongs to this body; the rest is still on its way. When
            // the receive buffer was allocated for the whole frame (see `poll_frame`), the
            // body is gathered in it; otherwise in a buffer of its own.
            let bytes = if self.buf.capacity() >= payload + attachment {
                std::mem::take(&mut self.buf)
            } else {
                let mut bytes = BytesMut::with_capacity(payload + attachment);
                bytes.extend_from_slice(&self.buf);
                self.buf.clear();
                bytes
            };
            self.body = Some(Body {
                bytes,
                payload,
                attachment,
            });
        }
        match self.body.take_if(|b| b.missing() == 0) {
            // Split only when there is an attachment: a split makes the buffer shared, which
            // costs an allocation of its own.
            Some(body) if body.attachment == 0 => {
                Ok(self.decoder.finish(body.bytes.freeze(), Bytes::new()))
            }
            Some(mut body) => {
                let p = body.bytes.split_to(body.payload).freeze();
                Ok(self.decoder.finish(p, body.bytes.freeze()))
            }
            None => Ok(None),
        }
    }
}

/// Clears `reading` however the `recv` future ends (completed or dropped).
struct Reading<'a>(&'a Cell<bool>);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// Closes the connection when the last user handle goes away (the writer task holds only
/// `Shared`, so it cannot keep the connection open by itself).
struct Owner(Rc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.out.close();
    }
}

/// A frame connection over TCP.
#[derive(Clone)]
pub struct TcpConnection {
    owner: Rc<Owner>,
}

impl TcpConnection {
    /// Wrap a connected stream and start its writer task on the current shard.
    pub fn new(stream: TcpStream, options: ConnOptions) -> TcpConnection {
        let peer = stream.peer_addr().ok();
        let shared = Rc::new(Shared {
            read: RefCell::new(ReadSide {
                decoder: FrameDecoder::new(options.limits),
                body: None,
                buf: BytesMut::new(),
                eof: false,
            }),
            reading: Cell::new(false),
            round: RefCell::new(RoundBudget::new(options.budget)),
            stream,
            peer,
            options,
            out: OutQueue::new(options.max_queued_bytes),
            encoder: RefCell::new(FrameEncoder::new(options.limits)),
            stats: ConnStatsCells::default(),
            failed: Cell::new(false),
        });
        spawn_local(write_loop(shared.clone()));
        TcpConnection {
            owner: Rc::new(Owner(shared)),
        }
    }

    /// Connect to `addr` from the current shard.
    pub async fn connect(
        addr: SocketAddr,
        options: ConnOptions,
    ) -> Result<TcpConnection, TransportError> {
        let stream = TcpStream::connect(addr).await?;
        Ok(TcpConnection::new(stream, options))
    }

    fn shared(&self) -> &Rc<Shared> {
        &self.owner.0
    }

    /// Drop queued output and close at once (after a protocol error).
    pub fn abort(&self) {
        let s = self.shared();
        s.failed.set(true);
        s.out.discard();
        let _ = s.stream.shutdown_both();
    }
}

async fn write_loop(shared: Rc<Shared>) {
    while let Some(batch) = shared.out.next_batch(MAX_IOVECS).await {
        let n: usize = batch.iter().map(Bytes::len).sum();
        if let Err(e) = shared.stream.send_all_vectored(batch).await {
            tracing::debug!(peer = ?shared.peer, error = %e, "send failed; closing");
            shared.failed.set(true);
            shared.out.discard();
            break;
        }
        shared.out.sent(n);
    }
    // Flushed and closed: the peer reads end-of-stream, and a pending local recv returns.
    let _ = shared.stream.shutdown_both();
}

impl Connection for TcpConnection {
    fn send(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> impl Future<Output = Result<(), TransportError>> {
        // The queue's future itself, not wrapped in another: a wrapper copies it once more
        // per frame.
        let s = self.shared();
        s.out
            .push_frame(&s.encoder, &s.stats, header, payload, attachment)
    }

    async fn ready_to_send(&self) -> Result<(), TransportError> {
        let s = self.shared();
        if !s.failed.get() && s.out.wait_for_room().await {
            Ok(())
        } else {
            Err(TransportError::Closed)
        }
    }

    /// Cancel-safe (see the module docs).
    async fn recv(&self) -> Result<Option<Frame>, TransportError> {
        let s = self.shared();
        if s.reading.replace(true) {
            return Err(TransportError::Busy);
        }
        let _reading = Reading(&s.reading);
        let result = poll_fn(|cx| {
            if s.failed.get() {
                return Poll::Ready(Err(TransportError::Closed));
            }
            poll_charged(&mut s.round.borrow_mut(), cx, |cx| {
                s.read.borrow_mut().poll_frame(cx, &s.stream, &s.stats)
            })
        })
        .await;
        if result.is_err() {
            s.failed.set(true);
            s.out.close();
        }
        result
    }

    fn close(&self) {
        self.shared().out.close();
    }

    fn is_closed(&self) -> bool {
        let s = self.shared();
        s.failed.get() || s.out.is_closed()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared().peer
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }

    fn budget(&self) -> Budget {
        self.shared().options.budget
    }

    fn arrived_at(&self) -> u64 {
        self.shared().round.borrow().arrived_at()
    }

    fn stats(&self) -> ConnStats {
        let s = self.shared();
        s.stats.snapshot(s.out.queued_bytes())
    }
}

impl Listener for TcpEndpoint {
    type Conn = TcpConnection;
    type Error = std::io::Error;

    fn listen<H, Fut>(
        self,
        rt: &Runtime,
        settings: ConnSettings,
        handler: H,
    ) -> std::io::Result<ListenerHandle>
    where
        H: Fn(TcpConnection) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.serve(rt, move |accepted: Accepted| {
            let options = ConnOptions {
                limits: settings.limits,
                max_queued_bytes: settings.max_queued_bytes,
                budget: accepted.budget,
            };
            handler(TcpConnection::new(accepted.stream, options))
        })
    }
}
