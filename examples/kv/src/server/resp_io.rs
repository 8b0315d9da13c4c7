//! A RESP connection's byte stream, plain TCP, TLS or RDMA (a replica's link to the
//! `repl-rdma` endpoint, see `rdma_bytes`), with its one send in flight: what `resp_conn`
//! drives, the same way for all.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use corewire::runtime::accept::Accepted;
use corewire::runtime::net::{SendFuture, TcpStream, UnixStream};
use corewire::runtime::tls::{TlsAccepted, TlsStream};
use corewire::runtime::Budget;
use corewire::transport::rdma::RdmaAccepted;
use corewire::transport::Connection;

use super::rdma_bytes::RdmaBytes;

/// How long a refused connection may take to be told and closed.
const REFUSAL_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// A connection as the listener hands it over.
pub(crate) struct RespAccepted {
    pub stream: RespStream,
    pub peer: Option<SocketAddr>,
    pub budget: Budget,
}

impl From<Accepted> for RespAccepted {
    fn from(a: Accepted) -> Self {
        RespAccepted {
            stream: RespStream::Plain(Plain::Tcp(a.stream)),
            peer: a.peer,
            budget: a.budget,
        }
    }
}

impl From<TlsAccepted> for RespAccepted {
    fn from(a: TlsAccepted) -> Self {
        RespAccepted {
            stream: RespStream::Tls(a.stream),
            peer: a.peer,
            budget: a.budget,
        }
    }
}

impl From<RdmaAccepted> for RespAccepted {
    fn from(a: RdmaAccepted) -> Self {
        let budget = a.conn.budget();
        RespAccepted {
            stream: RespStream::Plain(Plain::Rdma(Box::new(RdmaBytes::new(a.conn)))),
            peer: a.peer,
            budget,
        }
    }
}

pub(crate) enum RespStream {
    Plain(Plain),
    Tls(TlsStream),
}

/// A stream without TLS. Its own enum: `RespStream`'s two variants then keep the niche
/// that spares it a tag (`resp_conn`'s size bounds).
pub(crate) enum Plain {
    Tcp(TcpStream),
    /// From the Unix socket (`unixsocket`): boxed, as few connections are.
    Unix(Box<UnixStream>),
    /// From the `repl-rdma` endpoint (a replica's link): boxed, as few connections are.
    Rdma(Box<RdmaBytes>),
}

/// `$body` with `$s` the TCP or the Unix stream (the same calls on both), `$rdma` with `$r`
/// the RDMA one.
macro_rules! plain {
    ($plain:expr, $s:ident => $body:expr, $r:ident => $rdma:expr) => {
        match $plain {
            Plain::Tcp($s) => $body,
            Plain::Unix($s) => $body,
            Plain::Rdma($r) => $rdma,
        }
    };
}

impl RespStream {
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            RespStream::Plain(Plain::Tcp(s)) => s.local_addr().ok(),
            RespStream::Plain(Plain::Unix(_)) => None,
            RespStream::Tls(s) => s.get_ref().local_addr().ok(),
            RespStream::Plain(Plain::Rdma(_)) => None,
        }
    }

    pub fn raw_fd(&self) -> i32 {
        match self {
            // No descriptor over RDMA: CLIENT LIST shows -1, as for a client without a socket.
            RespStream::Plain(plain) => plain!(plain, s => s.raw_fd(), _r => -1),
            RespStream::Tls(s) => s.get_ref().raw_fd(),
        }
    }

    /// A client on this host by construction (the Unix socket): protected mode lets it in.
    pub fn is_local(&self) -> bool {
        matches!(self, RespStream::Plain(Plain::Unix(_)))
    }

    /// Send `reply` (a refusal) and close: the write side first, then what the client sent
    /// meanwhile is read and dropped for a moment, so that the close does not turn into a
    /// reset that could destroy the reply before the client reads it.
    pub async fn refuse(self, reply: &'static [u8]) {
        let reply = Bytes::from_static(reply);
        let _ = corewire::runtime::timeout(REFUSAL_GRACE, async {
            match &self {
                RespStream::Plain(plain) => plain!(plain, s => {
                    s.send_all(reply).await?;
                    s.shutdown_write()?;
                    while s.recv_chunk().await?.is_some() {}
                },
                // Dropping the connection flushes what is queued, then closes.
                r => r.send_all(reply).await?),
                RespStream::Tls(s) => {
                    s.send_all(reply).await?;
                    s.shutdown().await?;
                    let mut sink = bytes::BytesMut::new();
                    while s.recv_available(&mut sink).await? > 0 {
                        sink.clear();
                    }
                }
            }
            Ok::<(), std::io::Error>(())
        })
        .await;
    }
}

/// The stream with its output side: one send on the ring at a time (over TLS: records
/// handed to rustls until they are all with the kernel), and the rest of a short send.
pub(crate) struct RespIo {
    stream: RespStream,
    send: Option<SendFuture>,
    /// TLS: records written and not yet all sent.
    tls_flushing: bool,
    /// The rest of a short send (or what rustls did not take yet).
    unsent: Option<Bytes>,
    failed: Option<std::io::Error>,
}

impl RespIo {
    pub fn new(stream: RespStream) -> RespIo {
        RespIo {
            stream,
            send: None,
            tls_flushing: false,
            unsent: None,
            failed: None,
        }
    }

    /// Collect the send in flight: `Ready(Ok)` once one finished (progress), `Ready(Err)`
    /// when the connection must close, `Pending` while none finished.
    pub fn poll_sent(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if let Some(error) = self.failed.take() {
            return Poll::Ready(Err(error));
        }
        match &mut self.stream {
            RespStream::Plain(Plain::Rdma(rdma)) => rdma.poll_sent(cx),
            RespStream::Plain(_) => {
                let Some(op) = self.send.as_mut() else {
                    return Poll::Pending;
                };
                let (result, mut buf) = std::task::ready!(Pin::new(op).poll(cx));
                self.send = None;
                match result {
                    Ok(n) if n > 0 && n < buf.len() => {
                        buf.advance(n);
                        self.unsent = Some(buf);
                        Poll::Ready(Ok(()))
                    }
                    Ok(n) if n > 0 => Poll::Ready(Ok(())),
                    Ok(_) => Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                    Err(error) => Poll::Ready(Err(error)),
                }
            }
            RespStream::Tls(tls) => {
                if !self.tls_flushing {
                    return Poll::Pending;
                }
                std::task::ready!(tls.poll_flush(cx))?;
                self.tls_flushing = false;
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Whether a send is in flight.
    pub fn sending(&self) -> bool {
        self.send.is_some()
            || self.tls_flushing
            || matches!(&self.stream, RespStream::Plain(Plain::Rdma(rdma)) if rdma.sending())
    }

    /// Nothing in flight and nothing left over.
    pub fn flushed(&self) -> bool {
        !self.sending() && self.unsent.is_none()
    }

    pub fn take_unsent(&mut self) -> Option<Bytes> {
        self.unsent.take()
    }

    /// Start sending `bytes` (nothing may be in flight).
    pub fn start_send(&mut self, cx: &mut Context<'_>, bytes: Bytes) {
        match &mut self.stream {
            RespStream::Plain(plain) => plain!(plain, s => self.send = Some(s.send(bytes)),
                // One frame at a time: the rest waits as a short send's would.
                r => self.unsent = r.start_send(bytes)),
            RespStream::Tls(tls) => {
                self.tls_flushing = true;
                match tls.poll_write(cx, &bytes) {
                    Poll::Ready(Ok(n)) if n < bytes.len() => self.unsent = Some(bytes.slice(n..)),
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(error)) => self.failed = Some(error),
                    // rustls's buffer is full: the send in flight wakes the flush.
                    Poll::Pending => self.unsent = Some(bytes),
                }
            }
        }
    }

    /// Receive: `feed` gets the next bytes (plaintext over TLS). `Ready(Ok(false))` at end of
    /// stream.
    pub fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        feed: impl FnOnce(&[u8]),
    ) -> Poll<std::io::Result<bool>> {
        match &self.stream {
            RespStream::Plain(plain) => {
                let chunk =
                    plain!(plain, s => s.poll_recv_chunk(cx), r => return r.poll_recv(cx, feed));
                match std::task::ready!(chunk) {
                    Ok(Some(chunk)) => {
                        feed(&chunk);
                        Poll::Ready(Ok(true))
                    }
                    Ok(None) => Poll::Ready(Ok(false)),
                    Err(error) => Poll::Ready(Err(error)),
                }
            }
            RespStream::Tls(tls) => {
                let n = std::task::ready!(tls.poll_read_with(cx, |plaintext| {
                    feed(plaintext);
                    plaintext.len()
                }))?;
                Poll::Ready(Ok(n > 0))
            }
        }
    }
}

use std::future::Future;
