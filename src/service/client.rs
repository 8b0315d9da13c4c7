//! A pipelining client: many calls in flight on one connection, replies matched by
//! correlation id, per-call deadlines, and every pending call failed (never left hanging)
//! when the connection goes away.
//!
//! Deadlines live in one place: the call table ([`ClientCalls`]) orders them, and the
//! connection's reader task keeps ONE timer armed for the earliest, expiring calls as it
//! fires (quinn's model). A call itself arms no timer.

use std::cell::RefCell;
use std::fmt;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire_runtime::sync::{Notify, SlotKey, Slots};
use corewire_runtime::{sleep_until, spawn_local, Sleep};
use corewire_transport::frame::{Frame, FrameHeader, FrameKind, FrameLimits, StatusCode};
use corewire_transport::rdma::{RdmaConnection, RdmaOrTcp, TcpFallback};
use corewire_transport::rpc::{
    request_header, ClientCalls, ReceiveCredit, ResponseError, Status, WindowFull, STREAM_WINDOW,
};
use corewire_transport::tcp::{ConnOptions, TcpConnection};
use corewire_transport::{Connection, TransportError};

use super::stream::{ReplyStream, StreamInbox};
use super::Response;

/// The error underneath a lost connection, shared by every call it failed.
pub type DisconnectCause = Arc<dyn std::error::Error + Send + Sync>;

/// Why a call failed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error status (the [`Status`] its service returned).
    Status(Status),
    /// The deadline passed before the reply arrived (the server was told to cancel).
    Timeout,
    /// The connection could not be made, or closed or failed before the reply arrived: the
    /// error underneath (a [`TransportError`], an [`RdmaError`](corewire_transport::rdma::RdmaError),
    /// ...), also given by [`source`](std::error::Error::source).
    Disconnected(DisconnectCause),
}

impl ClientError {
    /// A lost connection caused by `cause`.
    pub fn disconnected(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ClientError::Disconnected(Arc::from(cause.into()))
    }
}

/// Errors have no equality of their own: two `Disconnected` are equal when their causes read
/// the same.
impl PartialEq for ClientError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ClientError::Status(a), ClientError::Status(b)) => a == b,
            (ClientError::Timeout, ClientError::Timeout) => true,
            (ClientError::Disconnected(a), ClientError::Disconnected(b)) => {
                Arc::ptr_eq(a, b) || a.to_string() == b.to_string()
            }
            _ => false,
        }
    }
}

impl Eq for ClientError {}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Status(status) => write!(f, "server returned {status}"),
            ClientError::Timeout => f.write_str("call timed out"),
            ClientError::Disconnected(why) => write!(f, "connection lost: {why}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Status(status) => Some(status),
            ClientError::Disconnected(cause) => Some(&**cause),
            ClientError::Timeout => None,
        }
    }
}

impl ClientError {
    /// The wire code of a server's error status.
    pub fn code(&self) -> Option<StatusCode> {
        match self {
            ClientError::Status(status) => Some(status.code()),
            _ => None,
        }
    }
}

/// Settings of a [`Client`] (see [`Default`] for the values).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Calls in flight on the connection at once; callers beyond it wait (default 128).
    pub window: usize,
    /// Deadline of calls that set none (default: none).
    pub default_timeout: Option<Duration>,
    /// Frame size limits of the connection.
    pub limits: FrameLimits,
    /// Where [`Client::connect_rdma_or_tcp`] connects over TCP when RDMA set-up fails
    /// (default: nowhere, the RDMA error is returned).
    pub tcp_fallback: Option<SocketAddr>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            window: 128,
            default_timeout: None,
            limits: FrameLimits::default(),
            tcp_fallback: None,
        }
    }
}

type CallResult = Result<Response, ClientError>;

/// A call as it leaves: what it addresses, what it carries, how long it may take.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing<P = Bytes> {
    pub(crate) service: u32,
    pub(crate) method: u32,
    pub(crate) payload: P,
    pub(crate) attachment: Bytes,
    pub(crate) timeout: Option<Duration>,
}

/// A request's payload as it leaves: its bytes, or a message the connection may encode
/// straight into its send buffer once the call has its window slot.
pub(crate) trait Payload {
    /// Queue the request with this payload written in place if `conn` takes it now
    /// (`Ok(true)`; see [`Connection::try_send_with`]).
    fn try_send_in_place<C: Connection>(
        &self,
        conn: &C,
        header: &FrameHeader,
        attachment: &[u8],
    ) -> Result<bool, TransportError>;

    /// The payload's bytes, to send the ordinary way.
    fn into_bytes(self) -> Bytes;
}

impl Payload for Bytes {
    /// Bytes already: the send queue copies a small frame or queues it by reference.
    fn try_send_in_place<C: Connection>(
        &self,
        _: &C,
        _: &FrameHeader,
        _: &[u8],
    ) -> Result<bool, TransportError> {
        Ok(false)
    }

    fn into_bytes(self) -> Bytes {
        self
    }
}

/// What the call table keeps for a call: where its result goes, and what a Cancel names.
struct Waiting {
    reply: Waiter,
    service: u32,
    method: u32,
    /// The call carries a deadline (the server learns it too).
    timed: bool,
}

/// Where a call's result goes.
enum Waiter {
    /// A unary call: its slot in [`Inner::replies`].
    Reply(SlotKey),
    /// A server-streaming call: its buffer.
    Stream(Rc<StreamInbox>),
}

impl Waiting {
    /// Deliver the call's end.
    fn finish<C>(self, inner: &Inner<C>, result: CallResult) {
        match self.reply {
            // The caller may have stopped waiting (dropped its call): fine.
            Waiter::Reply(slot) => {
                let _ = inner.replies.fill(slot, result);
            }
            Waiter::Stream(inbox) => inbox.finish(result.map(drop)),
        }
    }
}

struct Inner<C> {
    conn: C,
    calls: RefCell<ClientCalls<Waiting>>,
    /// Each waiting call's result slot (no allocation per call): the reader fills it, the
    /// call's future takes it. A call dropped early frees its slot, and a result for it is
    /// refused rather than delivered to the slot's next call.
    replies: Slots<CallResult>,
    /// Signalled whenever a window slot frees up (or the connection ends).
    window: Notify,
    /// Signalled when a call's deadline became the earliest: the reader re-arms its timer.
    earliest_deadline: Notify,
    options: ClientOptions,
    /// Set once the reader has seen the end of the connection.
    gone: RefCell<Option<DisconnectCause>>,
}

struct Owner<C: Connection>(Rc<Inner<C>>);

impl<C: Connection> Drop for Owner<C> {
    fn drop(&mut self) {
        self.0.conn.close();
    }
}

/// An RPC client on one connection, owned by the shard that made it. Clones share the
/// connection; it closes when the last clone is dropped.
///
/// **Cancel safety:** [`call`](Client::call) and [`CallBuilder::send`] may be dropped at any
/// point (e.g. raced against a timer): the call gives its window slot back at once, a request
/// that was already sent is cancelled on the server (a `Cancel` frame, best effort), and a
/// reply arriving later is discarded. Other calls on the connection are unaffected.
pub struct Client<C: Connection = TcpConnection> {
    owner: Rc<Owner<C>>,
}

impl<C: Connection> Clone for Client<C> {
    fn clone(&self) -> Self {
        Client {
            owner: self.owner.clone(),
        }
    }
}

impl Client<TcpConnection> {
    /// Connect over TCP from the current shard.
    pub async fn connect_tcp(
        addr: SocketAddr,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let conn = TcpConnection::connect(addr, {
            let mut o = ConnOptions::default();
            o.limits = options.limits;
            o
        })
        .await
        .map_err(ClientError::disconnected)?;
        Ok(Client::new(conn, options))
    }
}

impl Client<RdmaConnection> {
    /// Connect over RDMA from the current shard (the RDMA transport must be installed).
    pub async fn connect_rdma(
        addr: SocketAddr,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let conn = corewire_transport::rdma::connect(addr)
            .await
            .map_err(ClientError::disconnected)?;
        Ok(Client::new(conn, options))
    }
}

impl Client<RdmaOrTcp> {
    /// Connect over RDMA from the current shard; when that fails and
    /// [`ClientOptions::tcp_fallback`] is set, connect there over TCP instead (counted in
    /// [`rdma::tcp_fallbacks`](corewire_transport::rdma::tcp_fallbacks), with a warning).
    /// The client works the same either way; `Connection::kind` tells which it got.
    pub async fn connect_rdma_or_tcp(
        addr: SocketAddr,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let fallback = options.tcp_fallback.map(|addr| {
            let mut fallback = TcpFallback::new(addr);
            fallback.options.limits = options.limits;
            fallback
        });
        let conn = corewire_transport::rdma::connect_or_tcp(addr, fallback.as_ref())
            .await
            .map_err(ClientError::disconnected)?;
        Ok(Client::new(conn, options))
    }
}

impl<C: Connection> Client<C> {
    /// Use an established connection of any transport.
    pub fn new(conn: C, options: ClientOptions) -> Client<C> {
        let inner = Rc::new(Inner {
            conn,
            calls: RefCell::new(ClientCalls::new(options.window)),
            replies: Slots::with_capacity(options.window.clamp(1, 1024)),
            window: Notify::new(),
            earliest_deadline: Notify::new(),
            options,
            gone: RefCell::new(None),
        });
        spawn_local(read_replies(inner.clone()));
        Client {
            owner: Rc::new(Owner(inner)),
        }
    }

    fn inner(&self) -> &Rc<Inner<C>> {
        &self.owner.0
    }

    /// Call `method` of `service` with `payload`; the reply's payload.
    pub fn call(
        &self,
        service: u32,
        method: u32,
        payload: Bytes,
    ) -> impl Future<Output = Result<Bytes, ClientError>> + '_ {
        // The call future itself, with no `async` layer around it: each layer copies the
        // whole future (most of a KiB) once more per call.
        let call = Outgoing {
            service,
            method,
            payload,
            attachment: Bytes::new(),
            timeout: self.inner().options.default_timeout,
        };
        self.start_call(call, |r| Ok(r.payload))
    }

    /// A call with more options (attachment, timeout).
    pub fn request(&self, service: u32, method: u32) -> CallBuilder<'_, C> {
        CallBuilder {
            client: self,
            call: Outgoing {
                service,
                method,
                payload: Bytes::new(),
                attachment: Bytes::new(),
                timeout: self.inner().options.default_timeout,
            },
        }
    }

    /// Call server-streaming `method` of `service` with `payload`: the stream of its replies
    /// (the call's deadline, if any, covers the whole stream).
    pub async fn call_streaming(
        &self,
        service: u32,
        method: u32,
        payload: Bytes,
    ) -> Result<ReplyStream<C>, ClientError> {
        self.start_stream(Outgoing {
            service,
            method,
            payload,
            attachment: Bytes::new(),
            timeout: self.inner().options.default_timeout,
        })
        .await
    }

    pub(crate) async fn start_stream(&self, call: Outgoing) -> Result<ReplyStream<C>, ClientError> {
        let (service, method) = (call.service, call.method);
        let inbox = Rc::new(StreamInbox::default());
        let waiter = Waiter::Stream(inbox.clone());
        let mut pending = send_request(self.inner(), waiter, call).await?;
        // From here the stream owns the call (and cancels it when dropped early).
        let id = pending.id.take();
        Ok(ReplyStream {
            client: self.clone(),
            id: std::cell::Cell::new(id),
            service,
            method,
            inbox,
            credit: ReceiveCredit::default(),
            owed: 0,
        })
    }

    /// The deadline of calls that set none ([`ClientOptions::default_timeout`]).
    pub(crate) fn default_timeout(&self) -> Option<Duration> {
        self.inner().options.default_timeout
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.inner().calls.borrow().in_flight()
    }

    /// Whether the connection is closed (calls fail with `Disconnected`).
    pub fn is_closed(&self) -> bool {
        self.inner().gone.borrow().is_some() || self.inner().conn.is_closed()
    }

    /// The connection the client runs on.
    pub fn connection(&self) -> &C {
        &self.inner().conn
    }

    /// One call; `finish` takes what the caller wants from the reply, or fails the call (a
    /// typed reply that does not decode): no wrapper future.
    pub(crate) async fn start_call<R, P: Payload>(
        &self,
        call: Outgoing<P>,
        finish: fn(Response) -> Result<R, ClientError>,
    ) -> Result<R, ClientError> {
        let reply = self.inner().replies.reserve();
        let waiter = Waiter::Reply(reply.key());
        // The call holds a window slot: `pending` gives it back if this future is dropped
        // before the reply arrives (and tells the server, the request being sent).
        let mut pending = send_request(self.inner(), waiter, call).await?;
        // The reader fills the slot (a reply, `Timeout` when the deadline passes, or
        // `Disconnected` when the connection ends).
        let result = reply.await;
        // Resolved: the reader already removed the call (and cancelled it if it expired).
        pending.id = None;
        result.and_then(finish)
    }
}

/// Take a window slot for `token`'s call, waiting for one while the window is full.
async fn start<C: Connection>(
    inner: &Inner<C>,
    mut token: Waiting,
    deadline: Option<Instant>,
) -> Result<u64, ClientError> {
    loop {
        if let Some(why) = inner.gone.borrow().as_ref() {
            return Err(ClientError::Disconnected(why.clone()));
        }
        let started = inner.calls.borrow_mut().try_start(token, deadline);
        match started {
            Ok(id) => {
                if deadline.is_some() && inner.calls.borrow().next_deadline() == deadline {
                    inner.earliest_deadline.notify_one();
                }
                return Ok(id);
            }
            Err(WindowFull(back)) => {
                token = back;
                inner.window.notified().await;
            }
        }
    }
}

/// Take a window slot for a call whose result goes to `reply` and send its request: the
/// call, pending (dropped before its end, it frees the slot and cancels the request).
async fn send_request<'a, C: Connection, P: Payload>(
    inner: &'a Rc<Inner<C>>,
    reply: Waiter,
    call: Outgoing<P>,
) -> Result<PendingCall<'a, C>, ClientError> {
    let Outgoing {
        service,
        method,
        payload,
        attachment,
        timeout,
    } = call;
    // The clock is read only for a call with a deadline (a read per call shows in the
    // profile of a small-message load).
    let now = timeout.map(|_| Instant::now());
    let deadline = now.zip(timeout).map(|(now, t)| now + t);
    let token = Waiting {
        reply,
        service,
        method,
        timed: deadline.is_some(),
    };
    let id = start(inner, token, deadline).await?;
    let mut pending = PendingCall {
        inner,
        id: Some(id),
        service,
        method,
        sent: false,
    };
    let header = match now {
        Some(now) => request_header(service, method, id, deadline, now),
        None => FrameHeader::request(service, method, id),
    };
    let sent = match payload.try_send_in_place(&inner.conn, &header, &attachment) {
        Ok(true) => Ok(()),
        Ok(false) => {
            (inner.conn)
                .send(&header, payload.into_bytes(), attachment)
                .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = sent {
        return Err(ClientError::disconnected(e));
    }
    pending.sent = true;
    Ok(pending)
}

/// Give up call `id` of `client` (a stream dropped before its end): free its slot and cancel
/// it on the server.
pub(crate) fn forget_call<C: Connection>(client: &Client<C>, id: u64, service: u32, method: u32) {
    let inner = client.inner();
    if inner.calls.borrow_mut().cancel(id).is_none() {
        return;
    }
    wake_window(inner);
    send_cancels(&inner.conn, vec![(service, method, id)]);
}

/// A call that holds a window slot. Dropped before the reply: the slot is freed, and a
/// request already sent is cancelled on the server (best effort, from a small task, since a
/// destructor cannot wait for room in the send queue).
struct PendingCall<'a, C: Connection> {
    inner: &'a Rc<Inner<C>>,
    id: Option<u64>,
    service: u32,
    method: u32,
    sent: bool,
}

impl<C: Connection> Drop for PendingCall<'_, C> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        if self.inner.calls.borrow_mut().cancel(id).is_none() {
            return;
        }
        wake_window(self.inner);
        if self.sent {
            send_cancels(&self.inner.conn, vec![(self.service, self.method, id)]);
        }
    }
}

/// Tell the server to stop working on calls nobody waits for any more. From a small task:
/// neither a destructor nor the reader may wait for room in the send queue (the reader
/// waiting on a peer that waits for us to read would deadlock).
fn send_cancels<C: Connection>(conn: &C, calls: Vec<(u32, u32, u64)>) {
    if calls.is_empty() || conn.is_closed() {
        return;
    }
    let conn = conn.clone();
    spawn_local(async move {
        for (service, method, id) in calls {
            let cancel = FrameHeader::cancel(service, method, id);
            if conn
                .send(&cancel, Bytes::new(), Bytes::new())
                .await
                .is_err()
            {
                return;
            }
        }
    });
}

fn wake_window<C>(inner: &Inner<C>) {
    inner.window.notify_waiters();
}

/// What woke the reader.
enum Wake {
    Frame(Result<Option<Frame>, TransportError>),
    Deadline,
    Rearm,
}

/// Fail every call whose deadline has passed with `Timeout` and cancel it on the server.
fn expire<C: Connection>(inner: &Inner<C>) {
    let expired = inner.calls.borrow_mut().expire(Instant::now());
    if expired.is_empty() {
        return;
    }
    let mut cancels = Vec::with_capacity(expired.len());
    for c in expired {
        cancels.push((c.token.service, c.token.method, c.correlation_id));
        c.token.finish(inner, Err(ClientError::Timeout));
    }
    wake_window(inner);
    send_cancels(&inner.conn, cancels);
}

async fn read_replies<C: Connection>(inner: Rc<Inner<C>>) {
    // The connection's one timer, armed for the earliest deadline in the call table.
    let mut timer: Option<Sleep> = None;
    let why: DisconnectCause = loop {
        match inner.calls.borrow().next_deadline() {
            None => timer = None,
            Some(at) => match timer.as_mut() {
                Some(t) if t.deadline() == at => {}
                Some(t) => t.reset(at),
                None => timer = Some(sleep_until(at)),
            },
        }
        let mut recv = pin!(inner.conn.recv());
        let mut rearm = pin!(inner.earliest_deadline.notified());
        // `recv` is cancel-safe: leaving it for the timer loses nothing.
        let wake = poll_fn(|cx| {
            if let Poll::Ready(r) = recv.as_mut().poll(cx) {
                return Poll::Ready(Wake::Frame(r));
            }
            if let Some(t) = timer.as_mut() {
                if Pin::new(t).poll(cx).is_ready() {
                    return Poll::Ready(Wake::Deadline);
                }
            }
            if rearm.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Rearm);
            }
            Poll::Pending
        })
        .await;
        let received = match wake {
            Wake::Deadline => {
                expire(&inner);
                continue;
            }
            Wake::Rearm => continue,
            Wake::Frame(r) => r,
        };
        match received {
            Ok(Some(frame)) if frame.header.kind == FrameKind::StreamItem => {
                if let Err(why) = stream_item(&inner, frame) {
                    corewire_runtime::report_protocol_error(
                        "rpc client",
                        inner.conn.peer_addr(),
                        &why,
                    );
                    inner.conn.close();
                    break lost(format!("protocol error: {why}"));
                }
            }
            Ok(Some(frame)) => {
                let done = inner.calls.borrow_mut().complete(&frame.header);
                match done {
                    Ok(c) => {
                        let result = match c.result {
                            Ok(()) => Ok(Response {
                                payload: frame.payload,
                                attachment: frame.attachment,
                            }),
                            // The server gave up at the deadline this call sent it: to the
                            // caller that is its own timeout, whichever timer fired first.
                            Err(Status::DeadlineExceeded) if c.token.timed => {
                                Err(ClientError::Timeout)
                            }
                            Err(status) => Err(ClientError::Status(status)),
                        };
                        c.token.finish(&inner, result);
                        wake_window(&inner);
                    }
                    // A late reply to a call that timed out or was cancelled.
                    Err(ResponseError::UnknownCorrelationId(id)) => {
                        tracing::debug!(correlation_id = id, "reply to a call no longer waiting")
                    }
                    Err(e) => {
                        corewire_runtime::report_protocol_error(
                            "rpc client",
                            inner.conn.peer_addr(),
                            &format_args!("unexpected frame: {e}"),
                        );
                        inner.conn.close();
                        break lost(format!("protocol error: {e}"));
                    }
                }
            }
            Ok(None) => break lost("closed by peer"),
            Err(TransportError::Closed) => break Arc::new(TransportError::Closed),
            Err(e) => {
                if matches!(
                    e,
                    TransportError::Protocol(_) | TransportError::Truncated { .. }
                ) {
                    corewire_runtime::report_protocol_error(
                        "rpc client",
                        inner.conn.peer_addr(),
                        &e,
                    );
                }
                inner.conn.close();
                break Arc::new(e);
            }
        }
    };
    *inner.gone.borrow_mut() = Some(why.clone());
    let failed = inner.calls.borrow_mut().fail_all(Status::Cancelled);
    for c in failed {
        c.token
            .finish(&inner, Err(ClientError::Disconnected(why.clone())));
    }
    wake_window(&inner);
}

/// A StreamItem frame: into its stream's buffer. A late item of a stream given up on is
/// dropped; one for a unary call fails that call (a peer that streams where it should not);
/// one past the stream's credit is a protocol error (`Err`: the connection closes).
fn stream_item<C: Connection>(inner: &Inner<C>, frame: Frame) -> Result<(), String> {
    let header = &frame.header;
    let calls = inner.calls.borrow();
    let inbox = match calls.stream_item(header) {
        Ok(Waiting {
            reply: Waiter::Stream(inbox),
            ..
        }) => inbox.clone(),
        Ok(Waiting {
            service, method, ..
        }) => {
            let (service, method) = (*service, *method);
            drop(calls);
            let id = header.correlation_id;
            if let Some(token) = inner.calls.borrow_mut().cancel(id) {
                let why = Status::Internal("the server streamed a reply to a unary call".into());
                token.finish(inner, Err(ClientError::Status(why)));
            }
            wake_window(inner);
            send_cancels(&inner.conn, vec![(service, method, id)]);
            return Ok(());
        }
        Err(ResponseError::UnknownCorrelationId(id)) => {
            tracing::debug!(
                correlation_id = id,
                "stream item of a call no longer waiting"
            );
            return Ok(());
        }
        Err(e) => return Err(e.to_string()),
    };
    drop(calls);
    inbox
        .push(Response {
            payload: frame.payload,
            attachment: frame.attachment,
        })
        .map_err(|_| {
            format!(
                "stream {} sent more than its credit of {STREAM_WINDOW} messages",
                header.correlation_id
            )
        })
}

/// Builds one call.
pub struct CallBuilder<'a, C: Connection> {
    client: &'a Client<C>,
    call: Outgoing,
}

impl<'a, C: Connection> CallBuilder<'a, C> {
    /// The request's payload.
    pub fn payload(mut self, payload: impl Into<Bytes>) -> Self {
        self.call.payload = payload.into();
        self
    }

    /// The request's attachment (sent after the payload, without a copy where the transport can).
    pub fn attachment(mut self, attachment: impl Into<Bytes>) -> Self {
        self.call.attachment = attachment.into();
        self
    }

    /// The call's deadline (the client's `default_timeout` otherwise).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.call.timeout = Some(timeout);
        self
    }

    /// Send it as a server-streaming call: the stream of replies.
    pub async fn send_streaming(self) -> Result<ReplyStream<C>, ClientError> {
        self.client.start_stream(self.call).await
    }

    /// Send the call and wait for its reply.
    pub fn send(self) -> impl Future<Output = Result<Response, ClientError>> + 'a {
        // The call future itself (see `Client::call`).
        self.client.start_call(self.call, Ok)
    }
}

/// A lost connection that has only a message to say why (a protocol error, a clean close).
fn lost(why: impl Into<String>) -> DisconnectCause {
    Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(why.into()))
}
