//! The poll-based traits on [`TlsStream`] itself (no `Compat` wrapper: the TLS stream already
//! keeps its receive and send state in itself, cancel-safe and bounded). A read copies
//! plaintext out of rustls's buffer; a write is encrypted at once and sent write-behind.
//! A peer that ends the TCP connection without TLS's close_notify reads as
//! `UnexpectedEof` here (a possible truncation), as with tokio-rustls.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use crate::tls::TlsStream;

fn poll_read_into(
    stream: &TlsStream,
    cx: &mut Context<'_>,
    max: usize,
    put: impl FnOnce(&[u8]),
) -> Poll<io::Result<usize>> {
    if max == 0 {
        return Poll::Ready(Ok(0));
    }
    let n = ready!(stream.poll_read_with(cx, |plaintext| {
        let n = plaintext.len().min(max);
        put(&plaintext[..n]);
        n
    }))?;
    if n == 0 && !stream.peer_closed_cleanly() {
        return Poll::Ready(Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection without a TLS close_notify",
        )));
    }
    Poll::Ready(Ok(n))
}

#[cfg(feature = "futures-io")]
impl futures_io::AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let max = buf.len();
        poll_read_into(&self, cx, max, |b| buf[..b.len()].copy_from_slice(b))
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let max = buf.remaining();
        poll_read_into(&self, cx, max, |b| buf.put_slice(b)).map_ok(drop)
    }
}

#[cfg(feature = "hyper")]
impl ::hyper::rt::Read for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ::hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let max = buf.remaining();
        poll_read_into(&self, cx, max, |b| buf.put_slice(b)).map_ok(drop)
    }
}

/// futures-io's, tokio's and hyper's write traits have the same methods, but for the name of
/// the one that closes and for `is_write_vectored`, which futures-io lacks.
macro_rules! write_trait {
    ($feature:literal, $trait:path, $shutdown:ident $(, $vectored:ident)?) => {
        #[cfg(feature = $feature)]
        impl $trait for TlsStream {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                TlsStream::poll_write(&self, cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                TlsStream::poll_write_vectored(&self, cx, bufs)
            }

            $(
                fn $vectored(&self) -> bool {
                    true
                }
            )?

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                TlsStream::poll_flush(&self, cx)
            }

            fn $shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                TlsStream::poll_shutdown(&self, cx)
            }
        }
    };
}

write_trait!("futures-io", futures_io::AsyncWrite, poll_close);
write_trait!(
    "tokio-io",
    tokio::io::AsyncWrite,
    poll_shutdown,
    is_write_vectored
);
write_trait!(
    "hyper",
    ::hyper::rt::Write,
    poll_shutdown,
    is_write_vectored
);
