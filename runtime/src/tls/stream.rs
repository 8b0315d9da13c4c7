//! [`TlsStream`]: rustls's sans-I/O connection driven over a [`TcpStream`].
//!
//! Received chunks (the stream's multishot receive into the shard's buffer ring) are fed to
//! rustls with `read_tls` and `process_new_packets`; plaintext is handed out of rustls's own
//! buffer. Records rustls produces are drained with `write_tls` into an owned buffer that
//! one send on the ring carries. Every piece of state (the chunk being fed, the send in
//! flight) lives in the stream, never in a future, so dropping a read or write future loses
//! nothing and leaves no half-written record.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::io::{self, BufRead, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll, Wake, Waker};

use bytes::{Buf, Bytes, BytesMut};
use rustls::pki_types::CertificateDer;

use crate::net::{RecvBuf, SendFuture, TcpStream};

/// Most ciphertext rustls queues for sending before a writer waits (besides the one send in
/// flight): the bound of a TLS stream's send side.
pub const TLS_WRITE_BUFFER: usize = 64 * 1024;

/// Plaintext [`TlsStream::recv_available`] appends in one call at most (after the first
/// record, which always goes in whole).
const AVAILABLE_LIMIT: usize = 64 * 1024;

/// A TLS connection (server or client side) over a [`TcpStream`], after its handshake.
///
/// Methods take `&self`: one task may read while another writes (the frame transport's
/// reader and writer do). One reader and one writer at a time.
///
/// **Cancel-safe**: a dropped read future loses no plaintext (ciphertext not yet fed to
/// rustls stays in the stream, plaintext stays in rustls); a dropped write leaves the stream
/// consistent: what rustls encrypted is sent by the next write or flush, whole records only.
///
/// **Bounded**: received ciphertext is one ring chunk at a time plus rustls's record buffer
/// (a record is at most 16 KiB + overhead) and its plaintext buffer (16 KiB); sending,
/// [`TLS_WRITE_BUFFER`] bytes in rustls plus the send in flight.
///
/// **Idle cost**: the stream holds no receive buffer of its own while waiting; rustls keeps
/// its 4 KiB read buffer (trimmed back to that whenever the stream waits) and its key
/// schedule.
pub struct TlsStream {
    /// Boxed: rustls's connection is over a kilobyte, and streams are moved around (and
    /// kept in enums beside plain TCP streams).
    core: Box<RefCell<Core>>,
    /// Whoever waits on the send in flight: a reader may start a send (an alert, a key
    /// update) that the writer then waits on, or the other way round.
    send_wakers: Arc<SendWakers>,
    tcp: TcpStream,
}

struct Core {
    tls: rustls::Connection,
    /// Ciphertext received and not yet taken by rustls, with how much it took.
    incoming: Option<(RecvBuf, usize)>,
    /// Ciphertext went to rustls since it last had the chance to trim its read buffer: only
    /// then can a trim find anything to do (nothing else grows that buffer).
    untrimmed: bool,
    /// TCP end-of-stream was seen (and told to rustls).
    tcp_eof: bool,
    /// An error to report to the next reader (met after bytes were handed out).
    read_error: Option<io::Error>,
    /// rustls failed: every later operation fails with this.
    fatal: Option<(io::ErrorKind, String)>,
    send: Option<SendFuture>,
    /// A send error not yet reported to a writer.
    write_error: Option<io::Error>,
}

#[derive(Clone, Copy)]
enum Side {
    Read = 0,
    Write = 1,
}

#[derive(Default)]
struct SendWakers(Mutex<[Option<Waker>; 2]>);

impl SendWakers {
    fn register(&self, side: Side, waker: &Waker) {
        let mut slots = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let slot = &mut slots[side as usize];
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }
}

impl Wake for SendWakers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let woken = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for waker in woken.into_iter().flatten() {
            waker.wake();
        }
    }
}

/// A reader whose every read would block: `read_tls` with it lets rustls trim its read
/// buffer (it shrinks it to 4 KiB when nothing is buffered) without taking any bytes.
struct WouldBlock;

impl Read for WouldBlock {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

fn tls_error(error: &rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error.clone())
}

impl Core {
    fn fatal_error(&self) -> Option<io::Error> {
        self.fatal
            .as_ref()
            .map(|(kind, text)| io::Error::new(*kind, text.clone()))
    }

    fn fail(&mut self, error: &io::Error) {
        if self.fatal.is_none() {
            self.fatal = Some((error.kind(), error.to_string()));
        }
    }

    /// Give rustls the pending ciphertext (as much as it takes now) and process it. Errors
    /// are fatal (rustls queues the alert to send).
    fn feed(&mut self) -> io::Result<()> {
        let Some((chunk, pos)) = self.incoming.as_mut() else {
            return Ok(());
        };
        let taken = self.tls.read_tls(&mut &chunk[*pos..])?;
        self.untrimmed = true;
        *pos += taken;
        if *pos >= chunk.len() {
            // Back to the ring at once.
            self.incoming = None;
        }
        match self.tls.process_new_packets() {
            Ok(_) => Ok(()),
            Err(error) => Err(tls_error(&error)),
        }
    }

    /// Drive the send in flight and start sends of what rustls has queued: ready once
    /// nothing is queued or in flight. `side`'s waker is registered while a send is in
    /// flight.
    fn poll_send(
        &mut self,
        tcp: &TcpStream,
        wakers: &Arc<SendWakers>,
        side: Side,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if self.send.is_none() {
                if !self.tls.wants_write() {
                    return Poll::Ready(Ok(()));
                }
                let mut out = Vec::new();
                while self.tls.wants_write() {
                    // Writing into a Vec cannot fail.
                    self.tls.write_tls(&mut out)?;
                }
                self.send = Some(tcp.send(Bytes::from(out)));
            }
            wakers.register(side, cx.waker());
            let waker = Waker::from(wakers.clone());
            let op = self.send.as_mut().expect("a send in flight");
            let (result, mut sent) = ready!(Pin::new(op).poll(&mut Context::from_waker(&waker)));
            self.send = None;
            match result {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    sent.advance(n);
                    if !sent.is_empty() {
                        self.send = Some(tcp.send(sent));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    self.send = Some(tcp.send(sent))
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl TlsStream {
    /// Wrap `tcp` with a connection rustls has just made (nothing exchanged yet); the caller
    /// drives the handshake with [`TlsStream::handshake`].
    pub(crate) fn new(tcp: TcpStream, mut tls: rustls::Connection) -> TlsStream {
        tls.set_buffer_limit(Some(TLS_WRITE_BUFFER));
        TlsStream {
            core: Box::new(RefCell::new(Core {
                tls,
                incoming: None,
                untrimmed: false,
                tcp_eof: false,
                read_error: None,
                fatal: None,
                send: None,
                write_error: None,
            })),
            send_wakers: Arc::default(),
            tcp,
        }
    }

    /// Run the handshake to its end (with everything it produced sent). Cancel-safe in the
    /// sense that the stream stays consistent, but a stream whose handshake was abandoned is
    /// good for nothing but dropping.
    pub(crate) async fn handshake(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_handshake(cx)).await
    }

    fn poll_handshake(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut core = self.core.borrow_mut();
        loop {
            if let Some(e) = core.fatal_error() {
                return Poll::Ready(Err(e));
            }
            // Send what the handshake produced before waiting for the peer's answer to it.
            match core.poll_send(&self.tcp, &self.send_wakers, Side::Read, cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    core.fail(&e);
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
            if !core.tls.is_handshaking() {
                return Poll::Ready(Ok(()));
            }
            if core.incoming.is_some() {
                if let Err(e) = core.feed() {
                    core.fail(&e);
                    // The alert rustls queued goes out if the socket takes it now.
                    let _ = core.poll_send(&self.tcp, &self.send_wakers, Side::Read, cx);
                    return Poll::Ready(Err(e));
                }
                continue;
            }
            if core.tcp_eof {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake",
                );
                core.fail(&e);
                return Poll::Ready(Err(e));
            }
            match ready!(self.tcp.poll_recv_chunk(cx)) {
                Ok(Some(chunk)) => core.incoming = Some((chunk, 0)),
                Ok(None) => core.tcp_eof = true,
                Err(e) => {
                    core.fail(&e);
                    return Poll::Ready(Err(e));
                }
            }
        }
    }

    /// Hand received plaintext to `take`, which returns how many bytes it used (at least
    /// one): `Ok(n)` with the bytes taken, `Ok(0)` at end of stream (see
    /// [`peer_closed_cleanly`](Self::peer_closed_cleanly)). Receives and decrypts as
    /// needed. Cancel-safe.
    pub fn poll_read_with(
        &self,
        cx: &mut Context<'_>,
        take: impl FnOnce(&[u8]) -> usize,
    ) -> Poll<io::Result<usize>> {
        let mut core = self.core.borrow_mut();
        if let Some(e) = core.read_error.take() {
            return Poll::Ready(Err(e));
        }
        let mut take = Some(take);
        loop {
            let taken = match core.tls.reader().into_first_chunk() {
                Ok([]) => return Poll::Ready(Ok(0)),
                Ok(plaintext) => {
                    let take = take.take().expect("returns after the first plaintext");
                    Some(take(plaintext).min(plaintext.len()))
                }
                // No plaintext yet (the usual case: asked first).
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                // A TCP end without the peer's close_notify: the end all the same here
                // (RESP and corewire's frames delimit their messages themselves); the
                // poll-based adapters report it as `UnexpectedEof`, as tokio-rustls does.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(0)),
                Err(e) => return Poll::Ready(Err(e)),
            };
            if let Some(n) = taken {
                core.tls.reader().consume(n);
                return Poll::Ready(Ok(n));
            }
            if let Some(e) = core.fatal_error() {
                return Poll::Ready(Err(e));
            }
            if core.incoming.is_some() {
                let fed = core.feed();
                // Whatever processing produced (a key update, an alert) goes out; a writer
                // waiting on it is woken with this side.
                let sent = core.poll_send(&self.tcp, &self.send_wakers, Side::Read, cx);
                if let Poll::Ready(Err(e)) = sent {
                    core.write_error = Some(e);
                }
                if let Err(e) = fed {
                    core.fail(&e);
                    return Poll::Ready(Err(e));
                }
                continue;
            }
            if core.tcp_eof {
                return Poll::Ready(Ok(0));
            }
            match self.tcp.poll_recv_chunk(cx) {
                Poll::Ready(Ok(Some(chunk))) => core.incoming = Some((chunk, 0)),
                Poll::Ready(Ok(None)) => {
                    core.tcp_eof = true;
                    // An empty read tells rustls the transport ended.
                    let _ = core.tls.read_tls(&mut io::empty());
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    // Waiting: let rustls shrink its read buffer if a big record grew it
                    // (once per feeding: a reader polled again finds the same buffer).
                    if std::mem::take(&mut core.untrimmed) {
                        let _ = core.tls.read_tls(&mut WouldBlock);
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// Append the plaintext at hand to `buf` (waiting for some), with whatever more was
    /// already received behind it (up to 64 KiB): the bytes appended, `Ok(0)` at end of
    /// stream. Cancel-safe; as [`TcpStream::recv_available`] for request/response loops.
    pub fn poll_recv_available(
        &self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        let append = |buf: &mut BytesMut, bytes: &[u8]| {
            buf.extend_from_slice(bytes);
            bytes.len()
        };
        let mut appended = match ready!(self.poll_read_with(cx, |b| append(buf, b))) {
            Ok(0) => return Poll::Ready(Ok(0)),
            Ok(n) => n,
            Err(e) => return Poll::Ready(Err(e)),
        };
        // What is here already, without registering for more: the caller's waker stays with
        // the poll above (or with the receive this poll re-arms, which wakes it as well).
        let mut no_wake = Context::from_waker(Waker::noop());
        while appended < AVAILABLE_LIMIT {
            match self.poll_read_with(&mut no_wake, |b| append(buf, b)) {
                Poll::Ready(Ok(0)) => break,
                Poll::Ready(Ok(n)) => appended += n,
                Poll::Ready(Err(e)) => {
                    self.core.borrow_mut().read_error = Some(e);
                    break;
                }
                Poll::Pending => {
                    // The no-op waker is the one the receive holds now: register the
                    // caller's (this finds nothing new, or what arrived meanwhile, which
                    // stays for the next call).
                    if let Poll::Ready(Err(e)) = self.poll_read_with(cx, |_| 0) {
                        self.core.borrow_mut().read_error = Some(e);
                    }
                    break;
                }
            }
        }
        Poll::Ready(Ok(appended))
    }

    /// [`poll_recv_available`](Self::poll_recv_available) as a future.
    pub async fn recv_available(&self, buf: &mut BytesMut) -> io::Result<usize> {
        poll_fn(|cx| self.poll_recv_available(cx, buf)).await
    }

    /// Encrypt (a prefix of) `data` and keep a send going: `Ok(n)` once `n ≥ 1` bytes are
    /// with rustls (write-behind, like a `BufWriter`: a send error shows up in a later write
    /// or flush), pending while rustls's send buffer is full.
    pub fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(data)])
    }

    /// [`poll_write`](Self::poll_write) of several buffers: records span their boundaries.
    pub fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        data: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if data.iter().all(|b| b.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        let mut core = self.core.borrow_mut();
        if let Some(e) = core.fatal_error().or_else(|| core.write_error.take()) {
            return Poll::Ready(Err(e));
        }
        // Progress on earlier records (pending: a send is in flight and wakes us).
        if let Poll::Ready(Err(e)) = core.poll_send(&self.tcp, &self.send_wakers, Side::Write, cx) {
            return Poll::Ready(Err(e));
        }
        let n = core.tls.writer().write_vectored(data)?;
        // Start sending what was just encrypted; an error is kept for the next call.
        if let Poll::Ready(Err(e)) = core.poll_send(&self.tcp, &self.send_wakers, Side::Write, cx) {
            core.write_error = Some(e);
        }
        if n == 0 {
            // rustls's buffer is full: the send in flight wakes us.
            return Poll::Pending;
        }
        Poll::Ready(Ok(n))
    }

    /// Wait until everything written is with the kernel.
    pub fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut core = self.core.borrow_mut();
        if let Some(e) = core.write_error.take() {
            return Poll::Ready(Err(e));
        }
        core.poll_send(&self.tcp, &self.send_wakers, Side::Write, cx)
    }

    /// Send TLS's close_notify (once), flush, and shut the TCP write side: the peer reads
    /// end-of-stream. Receiving goes on.
    pub fn poll_shutdown(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        {
            let mut core = self.core.borrow_mut();
            if core.fatal.is_none() {
                core.tls.send_close_notify();
            }
        }
        ready!(self.poll_flush(cx))?;
        match self.tcp.shutdown_write() {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }

    /// Write all of `buf` and wait until the kernel has it. Dropped midway, the stream stays
    /// consistent: what was encrypted goes out with the next write or flush.
    pub async fn send_all(&self, buf: Bytes) -> io::Result<()> {
        self.send_all_vectored(vec![buf]).await
    }

    /// Write all of several buffers (records span their boundaries) and wait until the
    /// kernel has them. Cancel-consistent like [`send_all`](Self::send_all).
    pub async fn send_all_vectored(&self, mut bufs: Vec<Bytes>) -> io::Result<()> {
        bufs.retain(|b| !b.is_empty());
        let mut first = 0;
        while first < bufs.len() {
            let mut n = poll_fn(|cx| {
                let slices: Vec<IoSlice<'_>> =
                    bufs[first..].iter().map(|b| IoSlice::new(b)).collect();
                self.poll_write_vectored(cx, &slices)
            })
            .await?;
            while n > 0 {
                let head = &mut bufs[first];
                let used = n.min(head.len());
                head.advance(used);
                n -= used;
                if head.is_empty() {
                    first += 1;
                }
            }
        }
        poll_fn(|cx| self.poll_flush(cx)).await
    }

    /// Wait until everything written is with the kernel.
    pub async fn flush(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_flush(cx)).await
    }

    /// Close: close_notify, flush, shut down the write side (see
    /// [`poll_shutdown`](Self::poll_shutdown)).
    pub async fn shutdown(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_shutdown(cx)).await
    }

    /// Whether the peer ended with TLS's close_notify (`false` while it has not ended, or
    /// when only the TCP connection ended, which could be a truncation).
    pub fn peer_closed_cleanly(&self) -> bool {
        let mut core = self.core.borrow_mut();
        matches!(core.tls.reader().fill_buf(), Ok([]))
    }

    /// The underlying TCP stream (addresses, socket options). Reading or writing it
    /// directly would corrupt the TLS stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.tcp
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// Shut both TCP directions down at once (no close_notify), e.g. after a protocol error.
    pub fn shutdown_both(&self) -> io::Result<()> {
        self.tcp.shutdown_both()
    }

    /// Look at the rustls connection (negotiated version, cipher suite, ...).
    pub fn with_connection<R>(&self, f: impl FnOnce(&rustls::Connection) -> R) -> R {
        f(&self.core.borrow().tls)
    }

    /// The ALPN protocol the handshake agreed on.
    pub fn alpn_protocol(&self) -> Option<Vec<u8>> {
        self.with_connection(|c| c.alpn_protocol().map(<[u8]>::to_vec))
    }

    /// The server name the client sent (SNI), on the server side.
    pub fn server_name(&self) -> Option<String> {
        self.with_connection(|c| match c {
            rustls::Connection::Server(s) => s.server_name().map(str::to_owned),
            rustls::Connection::Client(_) => None,
        })
    }

    /// The peer's certificate chain (a client's, with mutual TLS), leaf first.
    pub fn peer_certificates(&self) -> Option<Vec<CertificateDer<'static>>> {
        self.with_connection(|c| {
            c.peer_certificates()
                .map(|chain| chain.iter().map(|c| c.clone().into_owned()).collect())
        })
    }

    /// TLS 1.2 or 1.3.
    pub fn protocol_version(&self) -> Option<rustls::ProtocolVersion> {
        self.with_connection(|c| c.protocol_version())
    }

    /// Whether the handshake resumed an earlier session (ticket or session id).
    pub fn handshake_kind(&self) -> Option<rustls::HandshakeKind> {
        self.with_connection(|c| c.handshake_kind())
    }
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("peer", &self.tcp.peer_addr().ok())
            .finish_non_exhaustive()
    }
}
