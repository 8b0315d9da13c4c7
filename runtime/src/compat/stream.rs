use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};

use crate::net::{RecvBuf, SendFuture, TcpStream, UnixStream};

/// The most bytes a writer may have accepted but not yet handed to the kernel.
pub const WRITE_BUFFER: usize = 64 * 1024;

/// A byte stream [`Compat`] can wrap: [`TcpStream`] or [`UnixStream`]. Sealed: the adapter
/// relies on the stream's receive state living in the stream (cancel-safe chunks) and on
/// each send owning its buffer and a share of the descriptor.
pub trait Stream: sealed::Sealed + Unpin {
    /// The next chunk received (`Ok(None)` at end-of-stream), as
    /// [`TcpStream::poll_recv_chunk`].
    fn poll_recv_chunk(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<RecvBuf>>>;
    /// One send of (a prefix of) `buf`.
    fn send(&self, buf: Bytes) -> SendFuture;
    /// Stop sending; the peer reads end-of-stream.
    fn shutdown_write(&self) -> io::Result<()>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::net::TcpStream {}
    impl Sealed for crate::net::UnixStream {}
}

impl Stream for TcpStream {
    fn poll_recv_chunk(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<RecvBuf>>> {
        TcpStream::poll_recv_chunk(self, cx)
    }
    fn send(&self, buf: Bytes) -> SendFuture {
        TcpStream::send(self, buf)
    }
    fn shutdown_write(&self) -> io::Result<()> {
        TcpStream::shutdown_write(self)
    }
}

impl Stream for UnixStream {
    fn poll_recv_chunk(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<RecvBuf>>> {
        UnixStream::poll_recv_chunk(self, cx)
    }
    fn send(&self, buf: Bytes) -> SendFuture {
        UnixStream::send(self, buf)
    }
    fn shutdown_write(&self) -> io::Result<()> {
        UnixStream::shutdown_write(self)
    }
}

/// A corewire stream ([`TcpStream`] by default, or [`UnixStream`]) with poll-based reads and
/// writes (see the [module docs](super)). `!Send`, like the stream: it lives on its shard.
pub struct Compat<S: Stream = TcpStream> {
    /// The chunk being read and how much of it was consumed. Received through the stream's
    /// multishot receive into the shard's buffer ring (one armed receive per connection, no
    /// receive buffer while idle); the buffer goes back to the ring once consumed.
    chunk: Option<(RecvBuf, usize)>,
    eof: bool,
    // The send in flight holds its own share of the descriptor: dropping the `Compat`
    // cancels it and the socket closes once it has completed.
    send: Option<SendFuture>,
    /// Accepted from the writer, not yet sent.
    write_buf: BytesMut,
    /// Bytes owned by the send in flight.
    in_flight: usize,
    /// A send error not yet reported to the writer.
    write_error: Option<io::Error>,
    stream: S,
}

impl<S: Stream> Compat<S> {
    /// Wrap `stream`; nothing is read or written until the first poll.
    pub fn new(stream: S) -> Compat<S> {
        Compat {
            chunk: None,
            eof: false,
            send: None,
            write_buf: BytesMut::new(),
            in_flight: 0,
            write_error: None,
            stream,
        }
    }

    /// The wrapped stream (for addresses and socket options).
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// Bytes accepted from writers that the kernel has not taken yet (at most
    /// [`WRITE_BUFFER`]).
    pub fn pending_write(&self) -> usize {
        self.write_buf.len() + self.in_flight
    }

    /// Bytes of the current received chunk not yet read (at most one chunk of the shard's
    /// buffer ring).
    pub fn pending_read(&self) -> usize {
        self.chunk.as_ref().map_or(0, |(buf, pos)| buf.len() - pos)
    }

    /// Make sure received bytes are at hand (or end-of-stream / an error is known).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        loop {
            if self.pending_read() > 0 {
                let (buf, pos) = self.chunk.as_ref().expect("pending bytes");
                return Poll::Ready(Ok(&buf[*pos..]));
            }
            // The spent chunk goes back to the ring before the next is taken.
            self.chunk = None;
            if self.eof {
                return Poll::Ready(Ok(&[]));
            }
            match ready!(self.stream.poll_recv_chunk(cx)) {
                Ok(Some(buf)) => self.chunk = Some((buf, 0)),
                Ok(None) => self.eof = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Copy received bytes into `out` (after receiving some if none are at hand).
    pub fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let available = ready!(self.poll_fill(cx))?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Poll::Ready(Ok(n))
    }

    /// The received bytes at hand, receiving if there are none (`AsyncBufRead::poll_fill_buf`).
    pub fn poll_fill_buf(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        self.poll_fill(cx)
    }

    /// Mark `n` received bytes as read (`AsyncBufRead::consume`); a chunk read to its end
    /// goes back to the ring at once.
    pub fn consume(&mut self, n: usize) {
        if let Some((buf, pos)) = &mut self.chunk {
            *pos = (*pos + n).min(buf.len());
            if *pos == buf.len() {
                self.chunk = None;
            }
        }
    }

    /// Copy at most `max` received bytes out with `put`, then consume them: the
    /// `tokio::io` and `hyper::rt` reads.
    #[cfg(any(feature = "tokio-io", feature = "hyper"))]
    fn poll_read_with(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
        put: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<()>> {
        let available = ready!(self.poll_fill(cx))?;
        let n = available.len().min(max);
        put(&available[..n]);
        self.consume(n);
        Poll::Ready(Ok(()))
    }

    /// Drive the send in flight (re-sending what a partial send left). Ready when nothing is
    /// in flight.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(op) = &mut self.send {
            let (res, mut sent) = ready!(Pin::new(op).poll(cx));
            self.send = None;
            self.in_flight = 0;
            match res {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    sent.advance(n);
                    if !sent.is_empty() {
                        self.start_send(sent);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.start_send(sent),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(&mut self, bytes: Bytes) {
        self.in_flight = bytes.len();
        self.send = Some(self.stream.send(bytes));
    }

    /// Drive sends: ready when everything accepted is with the kernel; pending (waker
    /// registered) while a send is in flight.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Some(e) = self.write_error.take() {
                return Poll::Ready(Err(e));
            }
            ready!(self.poll_send(cx))?;
            if self.write_buf.is_empty() {
                return Poll::Ready(Ok(()));
            }
            let bytes = self.write_buf.split().freeze();
            self.start_send(bytes);
        }
    }

    /// Accept bytes into the write buffer, waiting while it is full, and keep a send going.
    pub fn poll_write_from(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // Progress on earlier bytes; a failure is reported now. Pending means a send is in
        // flight and will wake us.
        if let Poll::Ready(Err(e)) = self.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        let room = WRITE_BUFFER.saturating_sub(self.write_buf.len() + self.in_flight);
        if room == 0 {
            return Poll::Pending;
        }
        let n = room.min(data.len());
        self.write_buf.extend_from_slice(&data[..n]);
        if self.send.is_none() {
            let bytes = self.write_buf.split().freeze();
            self.start_send(bytes);
            // Registers the waker with the new send; an error is kept for the next call.
            if let Poll::Ready(Err(e)) = self.poll_send(cx) {
                self.write_error = Some(e);
            }
        }
        Poll::Ready(Ok(n))
    }

    /// Wait until every accepted byte is with the kernel.
    pub fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_drain(cx)
    }

    /// Flush, then shut the write side down (the peer reads end-of-stream).
    pub fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        match self.stream.shutdown_write() {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(feature = "futures-io")]
impl<S: Stream> futures_io::AsyncRead for Compat<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_read_into(cx, buf)
    }
}

#[cfg(feature = "futures-io")]
impl<S: Stream> futures_io::AsyncBufRead for Compat<S> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        self.get_mut().poll_fill_buf(cx)
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        self.get_mut().consume(amt)
    }
}

#[cfg(feature = "futures-io")]
impl<S: Stream> futures_io::AsyncWrite for Compat<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_from(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_shutdown(cx)
    }
}

#[cfg(feature = "tokio-io")]
impl<S: Stream> tokio::io::AsyncRead for Compat<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let max = buf.remaining();
        self.get_mut()
            .poll_read_with(cx, max, |bytes| buf.put_slice(bytes))
    }
}

#[cfg(feature = "tokio-io")]
impl<S: Stream> tokio::io::AsyncWrite for Compat<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_from(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_shutdown(cx)
    }
}

#[cfg(feature = "hyper")]
impl<S: Stream> ::hyper::rt::Read for Compat<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ::hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let max = buf.remaining();
        self.get_mut()
            .poll_read_with(cx, max, |bytes| buf.put_slice(bytes))
    }
}

#[cfg(feature = "hyper")]
impl<S: Stream> ::hyper::rt::Write for Compat<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_from(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_shutdown(cx)
    }
}
