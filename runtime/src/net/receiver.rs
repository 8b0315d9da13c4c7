//! A stream's receive side as futures: the next chunk ([`RecvChunk`]) or everything already
//! received ([`RecvAvailable`]). The state lives in the stream (`driver::recv::Receiver`),
//! not in a future: dropping a receive future leaves nothing behind, and the next receive
//! takes what arrived (cancel-safe).
//!
//! [`Receiver::poll_recv_available`] appends every chunk already received in one go, so a
//! request/response loop answers all the requests that arrived together with one send
//! instead of one send per chunk (see its docs).

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;

use crate::driver::buf_ring::RecvBuf;
use crate::driver::fd::SharedFd;
use crate::driver::recv;

pub(crate) struct Receiver {
    inner: recv::Receiver,
    /// An error met while taking chunks already received after others: reported by the
    /// next receive, after the bytes before it.
    failed: Cell<Option<io::Error>>,
}

impl Receiver {
    pub(crate) fn new() -> Receiver {
        Receiver {
            inner: recv::Receiver::new(),
            failed: Cell::new(None),
        }
    }

    /// Append the next chunk to `buf` (waiting for it), then every chunk already received
    /// behind it, up to [`AVAILABLE_LIMIT`] bytes appended: the bytes appended, `Ok(0)` once
    /// the peer closed its side (after the bytes before the end). Cancel-safe: bytes are
    /// taken only in the poll that returns them. Each chunk's buffer goes back to the ring
    /// at once.
    ///
    /// Why it exists: the shard's ring buffers are small (4 KiB by default) and a multishot
    /// receive delivers one completion per buffer, so requests that arrived together come
    /// out as several chunks; a loop that answered after each chunk would send one reply
    /// per chunk (one TCP segment each), and on loopback each segment costs the sender
    /// about as much kernel time as the bytes. (On epoll one receive takes up to 64 KiB
    /// straight into `buf`.)
    pub(crate) fn poll_recv_available(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.failed.take() {
            return Poll::Ready(Err(e));
        }
        if let Some(polled) = self.inner.poll_recv_into(fd, cx, buf) {
            return polled;
        }
        let mut appended = match std::task::ready!(self.inner.poll_recv(fd, cx)) {
            Ok(Some(chunk)) => {
                // Room for this chunk and the ones queued behind it (up to the limit) at
                // once: growing chunk by chunk re-copied what was there at every step (9 % of
                // the echo server's time at 4 KiB messages).
                let queued = self.inner.queued_bytes().min(AVAILABLE_LIMIT);
                buf.reserve(chunk.len() + queued);
                buf.extend_from_slice(&chunk);
                chunk.len()
            }
            Ok(None) => return Poll::Ready(Ok(0)),
            Err(e) => return Poll::Ready(Err(e)),
        };
        // What is already here, without registering for more: the task's waker stays with
        // the poll above, and the next receive registers it again if it must wait.
        let mut no_wake = Context::from_waker(Waker::noop());
        while appended < AVAILABLE_LIMIT && self.inner.has_queued() {
            match self.inner.poll_recv(fd, &mut no_wake) {
                Poll::Ready(Ok(Some(chunk))) => {
                    buf.extend_from_slice(&chunk);
                    appended += chunk.len();
                }
                // The end stays the stream's state: the next receive returns it.
                Poll::Ready(Ok(None)) | Poll::Pending => break,
                Poll::Ready(Err(e)) => {
                    self.failed.set(Some(e));
                    break;
                }
            }
        }
        Poll::Ready(Ok(appended))
    }

    /// The next chunk received: `Ok(None)` once the peer closed its side (and for every call
    /// after). Cancel-safe; one consumer at a time (a second one steals the first's waker).
    pub(crate) fn poll_recv(
        &self,
        fd: &SharedFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<RecvBuf>>> {
        if let Some(e) = self.failed.take() {
            return Poll::Ready(Err(e));
        }
        self.inner.poll_recv(fd, cx)
    }

    /// Hand the receive in flight back (cancelling it) before the descriptor closes.
    pub(crate) fn stop(&self) {
        self.inner.stop();
    }
}

/// The most bytes [`Receiver::poll_recv_available`] appends in one call (the first chunk
/// always goes in whole): what one connection copies out of the ring before its consumer
/// gets to the bytes.
pub(crate) const AVAILABLE_LIMIT: usize = 64 * 1024;

/// A receive of the next chunk ([`TcpStream::recv_chunk`](super::TcpStream::recv_chunk),
/// [`UnixStream::recv_chunk`](super::UnixStream::recv_chunk)). Cancel-safe: dropping it
/// loses nothing; the next receive delivers what arrived.
#[must_use = "futures do nothing unless awaited"]
pub struct RecvChunk<'a> {
    pub(super) rx: &'a Receiver,
    pub(super) fd: &'a SharedFd,
}

impl Future for RecvChunk<'_> {
    type Output = io::Result<Option<RecvBuf>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.rx.poll_recv(self.fd, cx)
    }
}

/// A receive of everything already received
/// ([`TcpStream::recv_available`](super::TcpStream::recv_available),
/// [`UnixStream::recv_available`](super::UnixStream::recv_available)): the bytes appended to
/// the buffer, `0` at end-of-stream. Cancel-safe.
#[must_use = "futures do nothing unless awaited"]
pub struct RecvAvailable<'a> {
    pub(super) rx: &'a Receiver,
    pub(super) fd: &'a SharedFd,
    pub(super) buf: &'a mut BytesMut,
}

impl Future for RecvAvailable<'_> {
    type Output = io::Result<usize>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.rx.poll_recv_available(this.fd, cx, this.buf)
    }
}
