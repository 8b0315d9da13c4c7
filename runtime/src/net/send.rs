//! Sending on streams: one `send` (copying, or zero-copy at or above the shard's
//! `send_zc_threshold`), counted in the shard's `sends` and `send_buffers`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::zc_send::ZcSend;
use crate::driver::fd::SharedFd;
use crate::driver::op::send::Send;
use crate::driver::op::Op;
use crate::shard::context;

/// A send in flight ([`TcpStream::send`](super::TcpStream::send),
/// [`UnixStream::send`](super::UnixStream::send)): `(bytes sent, buffer)`.
#[must_use = "futures do nothing unless awaited"]
pub struct SendFuture(Inner);

enum Inner {
    Copy(Op<Send>),
    ZeroCopy(ZcSend),
}

/// Submit one send of `buf` on `fd`.
pub(crate) fn send(fd: &SharedFd, buf: Bytes) -> SendFuture {
    let ctx = context::current();
    ctx.remote.stats.sends.incr();
    ctx.remote.stats.send_buffers.incr();
    let zero_copy = ctx
        .driver
        .borrow()
        .send_zc_threshold
        .is_some_and(|t| buf.len() >= t);
    drop(ctx);
    SendFuture(if zero_copy {
        Inner::ZeroCopy(ZcSend::submit(fd, buf))
    } else {
        Inner::Copy(Op::submit(Send::new(fd.clone(), buf)))
    })
}

/// Count one vectored send of `buffers` buffers.
pub(crate) fn count_vectored(buffers: usize) {
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
        }
    }
}
