//! Sending on streams: one `send` (copying, or zero-copy at or above the shard's
//! `send_zc_threshold`), counted in the shard's `sends` and `send_buffers`, and the loops
//! that send all of one or several buffers (shared by every stream type and write half).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};

use crate::driver::fd::SharedFd;
use crate::driver::op::send::{send_now, Send};
use crate::driver::op::writev::Writev;
use crate::driver::op::Op;
use crate::driver::uring::zc_send::ZcSend;
use crate::shard::context;

/// A send in flight ([`TcpStream::send`](super::TcpStream::send),
/// [`UnixStream::send`](super::UnixStream::send)): `(bytes sent, buffer)`.
#[must_use = "futures do nothing unless awaited"]
pub struct SendFuture(Inner);

enum Inner {
    Copy(Op<Send>),
    ZeroCopy(ZcSend),
    /// epoll: sent at once, without an op.
    Sent(Option<(io::Result<usize>, Bytes)>),
}

/// Submit one send of `buf` on `fd`.
pub(crate) fn send(fd: &SharedFd, buf: Bytes) -> SendFuture {
    let ctx = context::current();
    ctx.remote.stats.sends.incr();
    ctx.remote.stats.send_buffers.incr();
    drop(ctx);
    if fd.epoll_token().is_some() {
        // epoll, a socket in the set: a send usually finds room, so try it now rather than
        // through an op's readiness check on the first poll (the op's path, taken when it
        // finds no room, registers the task and waits for the socket to become writable).
        match send_now(fd, &buf).map(|n| n as usize) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            sent => return SendFuture(Inner::Sent(Some((sent, buf)))),
        }
    }
    let zero_copy = context::with_driver(|d| d.send_zc_threshold()).is_some_and(|t| buf.len() >= t);
    SendFuture(if zero_copy {
        Inner::ZeroCopy(ZcSend::submit(fd, buf))
    } else {
        Inner::Copy(Op::submit(Send::new(fd.clone(), buf)))
    })
}

/// Send all of `buf`. Not cancel-safe: dropped midway, an unknown prefix was sent.
pub(crate) async fn send_all(fd: &SharedFd, mut buf: Bytes) -> io::Result<()> {
    while !buf.is_empty() {
        let (res, b) = send(fd, buf).await;
        buf = b;
        match res? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => buf.advance(n),
        }
    }
    Ok(())
}

/// Send all of several buffers, one `writev` per batch of at most 1024 (IOV_MAX) while the
/// socket takes them whole. Not cancel-safe, like [`send_all`].
pub(crate) async fn send_all_vectored(fd: &SharedFd, mut bufs: Vec<Bytes>) -> io::Result<()> {
    bufs.retain(|b| !b.is_empty());
    while !bufs.is_empty() {
        if bufs.len() == 1 {
            let b = bufs.pop().expect("one buffer");
            return send_all(fd, b).await;
        }
        let rest = bufs.split_off(bufs.len().min(1024));
        count_vectored(bufs.len());
        let (res, b) = Op::submit(Writev::new(fd.clone(), bufs)).await;
        bufs = b;
        bufs.extend(rest);
        let mut n = res?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        // Drop the buffers sent whole (at once: one by one from the front is quadratic in a
        // long batch), then what was sent of the next.
        let mut whole = 0;
        while whole < bufs.len() && n >= bufs[whole].len() {
            n -= bufs[whole].len();
            whole += 1;
        }
        bufs.drain(..whole);
        if let Some(first) = bufs.first_mut().filter(|_| n > 0) {
            first.advance(n.min(first.len()));
        }
    }
    Ok(())
}

/// Count one vectored send of `buffers` buffers.
fn count_vectored(buffers: usize) {
    let ctx = context::current();
    ctx.remote.stats.sends.incr();
    ctx.remote.stats.send_buffers.add(buffers as u64);
}

impl Future for SendFuture {
    type Output = (io::Result<usize>, Bytes);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            Inner::Copy(op) => Pin::new(op).poll(cx),
            Inner::ZeroCopy(op) => Pin::new(op).poll(cx),
            Inner::Sent(sent) => Poll::Ready(sent.take().expect("send polled after completion")),
        }
    }
}
