//! Frames over TCP on the shard's ring: one reader at a time decodes the chunks the stream
//! receives (multishot receive into the shard's buffer ring); one writer task per connection
//! drains the shared [`OutQueue`] with vectored sends. With the `tls` feature the same
//! connection runs over a [`TlsStream`](corewire_runtime::tls::TlsStream)
//! ([`TlsConnection`], served by a `TlsEndpoint`).
//!
//! Receiving is cancel-safe: the stream keeps its receive armed and its undelivered chunks,
//! and the bytes of a partial frame belong to the connection, not to the `recv` future. A
//! connection waiting for its peer between frames holds no receive buffer: chunks are copied
//! into the decode buffer and go back to the ring, and the decode buffer is let go when it is
//! empty.

#![deny(missing_docs)]

#[cfg(feature = "tls")]
mod tls;

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use corewire_runtime::accept::{Accepted, ListenerHandle, TcpEndpoint};
use corewire_runtime::net::TcpStream;
use corewire_runtime::{spawn_local, Budget, RoundBudget, Runtime};

use crate::conn::{
    poll_charged, ConnStats, ConnStatsCells, Connection, OutQueue, PayloadBuf, TransportError,
    TransportKind,
};
use crate::frame::{Frame, FrameDecoder, FrameEncoder, FrameHeader, FrameLimits};
use crate::listen::{ConnSettings, Listener};

/// Settings of one frame connection.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
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

impl ConnOptions {
    /// What a server's [`ConnSettings`] and a listener's budget ask of one connection.
    pub fn from_settings(settings: ConnSettings, budget: Budget) -> ConnOptions {
        ConnOptions {
            limits: settings.limits,
            max_queued_bytes: settings.max_queued_bytes,
            budget,
        }
    }
}

/// Buffers per sendmsg; Linux's IOV_MAX is 1024.
const MAX_IOVECS: usize = 1024;

/// The byte stream a frame connection runs over: a [`TcpStream`], or (feature `tls`) a
/// [`TlsStream`](corewire_runtime::tls::TlsStream) over one.
pub trait FrameStream: 'static {
    /// Which transport the connection reports.
    const KIND: TransportKind;
    /// Append what was received to `buf`, as `TcpStream::recv_available` (cancel-safe;
    /// `Ok(0)` at end of stream).
    fn poll_recv_available(
        &self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>>;
    /// Send every buffer, in order.
    fn send_all_vectored(&self, bufs: Vec<Bytes>) -> impl Future<Output = io::Result<()>>;
    /// After the last send: end the connection (the peer reads end-of-stream).
    fn finish(&self) -> impl Future<Output = ()>;
    /// Stop both directions at once (after a protocol error).
    fn shutdown_both(&self) -> io::Result<()>;
    /// The peer's address.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
}

impl FrameStream for TcpStream {
    const KIND: TransportKind = TransportKind::Tcp;

    fn poll_recv_available(
        &self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.recv_available(buf)).poll(cx)
    }

    fn send_all_vectored(&self, bufs: Vec<Bytes>) -> impl Future<Output = io::Result<()>> {
        TcpStream::send_all_vectored(self, bufs)
    }

    async fn finish(&self) {
        let _ = self.shutdown_both();
    }

    fn shutdown_both(&self) -> io::Result<()> {
        TcpStream::shutdown_both(self)
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        TcpStream::peer_addr(self)
    }
}

struct Shared<S> {
    read: RefCell<ReadSide>,
    /// A `recv` future is alive (a second concurrent one gets `Busy`).
    reading: Cell<bool>,
    /// This round's use of the connection's fairness budget, charged by `recv`.
    round: RefCell<RoundBudget>,
    stream: S,
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
    /// Received bytes not yet decoded (empty and unallocated while waiting for the peer
    /// between frames). Everything received together is copied into it at once and the
    /// frames are split off it, so the frames of one batch share one allocation, as the raw
    /// echo server's do: sizing a buffer per frame cost an allocation (and a free) per frame,
    /// which at 4 KiB was a good part of what the RPC path spent beyond the raw echo's
    /// (BENCHMARKS.md).
    buf: BytesMut,
    /// The peer closed its side.
    eof: bool,
}

impl ReadSide {
    /// The next frame, receiving as needed. Never loses bytes when the caller stops polling.
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
        stream: &impl FrameStream,
        stats: &ConnStatsCells,
    ) -> Poll<Result<Option<Frame>, TransportError>> {
        loop {
            // A body that has not all arrived makes the decoder reserve room for all of it,
            // so the rest lands behind it and no byte is copied twice.
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(frame)) => {
                    stats.add_in(frame.payload.len() + frame.attachment.len());
                    return Poll::Ready(Ok(Some(frame)));
                }
                Ok(None) => {}
                Err(e) => return Poll::Ready(Err(TransportError::Protocol(e))),
            }
            if self.eof {
                let buffered = self.buf.len();
                return Poll::Ready(if buffered == 0 && !self.decoder.in_frame() {
                    Ok(None)
                } else {
                    Err(TransportError::Truncated { buffered })
                });
            }
            // Every chunk already received, in one go: room for all of them is reserved at
            // once (in the room left behind the frames split off before, when it is enough).
            match stream.poll_recv_available(cx, &mut self.buf) {
                Poll::Ready(Ok(0)) => self.eof = true,
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(TransportError::Io(e))),
                Poll::Pending => {
                    // Between frames a waiting connection keeps no buffer (the frames split
                    // off it keep their part alive as long as they need it).
                    if self.buf.is_empty() && self.buf.capacity() > 0 && !self.decoder.in_frame() {
                        self.buf = BytesMut::new();
                    }
                    return Poll::Pending;
                }
            }
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
struct Owner<S>(Rc<Shared<S>>);

impl<S> Drop for Owner<S> {
    fn drop(&mut self) {
        self.0.out.close();
    }
}

/// A frame connection over TCP (or, as [`TlsConnection`], over TLS over TCP).
pub struct TcpConnection<S = TcpStream> {
    owner: Rc<Owner<S>>,
}

/// A frame connection over TLS.
#[cfg(feature = "tls")]
pub type TlsConnection = TcpConnection<corewire_runtime::tls::TlsStream>;

impl<S> Clone for TcpConnection<S> {
    fn clone(&self) -> Self {
        TcpConnection {
            owner: self.owner.clone(),
        }
    }
}

impl<S: FrameStream> TcpConnection<S> {
    /// Wrap a connected stream and start its writer task on the current shard.
    pub fn new(stream: S, options: ConnOptions) -> TcpConnection<S> {
        let peer = stream.peer_addr().ok();
        let shared = Rc::new(Shared {
            read: RefCell::new(ReadSide {
                decoder: FrameDecoder::new(options.limits),
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

    fn shared(&self) -> &Rc<Shared<S>> {
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

impl TcpConnection<TcpStream> {
    /// Connect to `addr` from the current shard.
    pub async fn connect(
        addr: SocketAddr,
        options: ConnOptions,
    ) -> Result<TcpConnection, TransportError> {
        let stream = TcpStream::connect(addr).await?;
        Ok(TcpConnection::new(stream, options))
    }
}

async fn write_loop<S: FrameStream>(shared: Rc<Shared<S>>) {
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
    shared.stream.finish().await;
}

impl<S: FrameStream> Connection for TcpConnection<S> {
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

    fn try_send_with(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> Result<bool, TransportError> {
        let s = self.shared();
        // A failed connection's queue is closed: refused there, as `send` is.
        s.out
            .try_push_frame_with(&s.encoder, &s.stats, header, payload_len, attachment, write)
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
        S::KIND
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
            let options = ConnOptions::from_settings(settings, accepted.budget);
            handler(TcpConnection::new(accepted.stream, options))
        })
    }
}
