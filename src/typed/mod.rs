//! Typed services: protobuf messages ([`prost`]) on top of the raw [`Service`] layer, for the
//! code `corewire-build` generates from `.proto` files.
//!
//! A generated server trait takes a [`Request<T>`] and answers a [`Response<T>`] (or, for a
//! server-streaming method, sends messages into a [`ServerStream<T>`]); the generated
//! `...Server` wrapper implements [`Service`] with the method table gRPC needs, so one
//! implementation answers gRPC over HTTP/2 ([`Server::serve_grpc`]) and corewire's framing
//! over TCP and RDMA ([`Server::serve`]). A generated client wraps a [`Client`] with one
//! method per RPC: [`Request::with_timeout`] sets a call's deadline, and dropping the call
//! (or the [`Streaming`] of a server-streaming call) cancels it on the server. A unary method
//! the build marks synchronous (`corewire_build::Builder::sync_methods`) is a plain `fn`,
//! answered in [`Service::call_now`](crate::Service::call_now) ([`unary_now`]): no future.
//!
//! Methods are identified by their full gRPC names (`/package.Service/Method`) on every
//! transport: gRPC sends the name; corewire's framing sends the 32-bit FNV-1a hash of the
//! service's name and of the method's ([`MethodInfo`]), which both ends compute from the
//! names alone, so calls need no set-up exchange on a new connection (an RDMA connection's
//! first call costs what every other costs) and a service id is a compile-time constant, as
//! the raw layer's are. Collisions are refused where they could do harm: two methods of one
//! service by `corewire-build` (the build fails) and by [`ServerBuilder::build`], two
//! services of one server by [`ServerBuilder::build`].
//!
//! [`Service`]: crate::Service
//! [`Client`]: crate::Client
//! [`Server::serve_grpc`]: crate::Server::serve_grpc
//! [`Server::serve`]: crate::Server::serve
//! [`ServerBuilder::build`]: crate::ServerBuilder::build
//! [`MethodInfo`]: crate::service::MethodInfo

mod metadata;
mod stats;

use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use corewire_runtime::ShardId;
use corewire_transport::grpc::Code;
use corewire_transport::Connection;
use tracing::Instrument;

use crate::service::client::{Outgoing, Payload};
use crate::service::{Client, ClientError, Replies, ReplyStream};
use crate::Status;

pub use metadata::{valid_key, InvalidMetadata, Metadata};
pub use prost;
pub use stats::{CallRecord, MethodStats};

/// A typed request: the message, its metadata, and (server side) when the caller stops
/// waiting; (client side) how long the call may take.
#[derive(Debug, Clone, Default)]
pub struct Request<T> {
    message: T,
    metadata: Metadata,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    peer: Option<SocketAddr>,
    shard: Option<ShardId>,
}

impl<T> Request<T> {
    /// A request of `message`, no metadata or timeout.
    pub fn new(message: T) -> Request<T> {
        Request {
            message,
            metadata: Metadata::new(),
            timeout: None,
            deadline: None,
            peer: None,
            shard: None,
        }
    }

    /// Client side: the call fails with `ClientError::Timeout` (and is cancelled on the
    /// server) if it has not finished within `timeout`; the server is told the deadline
    /// (`grpc-timeout` over gRPC) and stops working on it when it passes.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = Some(timeout);
    }

    /// [`set_timeout`](Request::set_timeout), by value.
    pub fn with_timeout(mut self, timeout: Duration) -> Request<T> {
        self.timeout = Some(timeout);
        self
    }

    /// The call's deadline, if set.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Server side: when the caller stops waiting (the server also enforces it).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Server side: the caller's address, when the transport knows it.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Server side: the shard running the call (and owning this service instance).
    pub fn shard(&self) -> Option<ShardId> {
        self.shard
    }
}

/// What a client call accepts: a message, or a [`Request`] with metadata or a timeout.
pub trait IntoRequest<T> {
    /// The request.
    fn into_request(self) -> Request<T>;
}

impl<T> IntoRequest<T> for T {
    fn into_request(self) -> Request<T> {
        Request::new(self)
    }
}

impl<T> IntoRequest<T> for Request<T> {
    fn into_request(self) -> Request<T> {
        self
    }
}

/// A typed reply: the message and the metadata sent with it (gRPC: response headers).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response<T> {
    message: T,
    metadata: Metadata,
}

impl<T> Response<T> {
    /// A reply of `message`, no metadata.
    pub fn new(message: T) -> Response<T> {
        Response {
            message,
            metadata: Metadata::new(),
        }
    }
}

/// A typed reply is encoded when it is sent: straight into the connection's send buffer where
/// the transport takes it at once, as [`unary_now`]'s are.
impl<T: prost::Message> crate::EncodeReply for Response<T> {
    #[inline]
    fn reply_in_place(&self, reply: crate::ReplyTo<'_>) -> bool {
        if !reply.in_place() {
            return false;
        }
        let message = &self.message;
        let attachment = self.metadata.encode();
        reply.send_with(message.encoded_len(), &attachment, |buf| {
            message.encode_raw(buf)
        })
    }

    fn into_response(self) -> crate::Response {
        crate::Response {
            payload: encode(&self.message),
            attachment: self.metadata.encode(),
        }
    }
}

/// The reply of one of two methods: a generated server with several unary methods answers
/// [`Service::call_in_place`](crate::Service::call_in_place) with these, nested (one type for
/// all its methods' replies).
#[derive(Debug)]
pub enum Either<A, B> {
    /// The first method's.
    Left(A),
    /// Another's.
    Right(B),
}

impl<A: crate::EncodeReply, B: crate::EncodeReply> crate::EncodeReply for Either<A, B> {
    #[inline]
    fn reply_in_place(&self, reply: crate::ReplyTo<'_>) -> bool {
        match self {
            Either::Left(a) => a.reply_in_place(reply),
            Either::Right(b) => b.reply_in_place(reply),
        }
    }

    fn into_response(self) -> crate::Response {
        match self {
            Either::Left(a) => a.into_response(),
            Either::Right(b) => b.into_response(),
        }
    }
}

/// The accessors of a message that travels with metadata ([`Request`], [`Response`]).
macro_rules! message_with_metadata {
    ($ty:ident) => {
        impl<T> $ty<T> {
            /// The message.
            pub fn get_ref(&self) -> &T {
                &self.message
            }

            /// The message, to change.
            pub fn get_mut(&mut self) -> &mut T {
                &mut self.message
            }

            /// The message, taken out.
            pub fn into_inner(self) -> T {
                self.message
            }

            /// The reply's metadata.
            pub fn metadata(&self) -> &Metadata {
                &self.metadata
            }

            /// The reply's metadata, to change.
            pub fn metadata_mut(&mut self) -> &mut Metadata {
                &mut self.metadata
            }
        }
    };
}

message_with_metadata!(Request);
message_with_metadata!(Response);

/// Where a server-streaming handler sends its messages. [`send`](ServerStream::send) waits
/// while the caller is not reading: buffering is bounded, whatever the caller does.
#[derive(Debug)]
pub struct ServerStream<T> {
    replies: Replies,
    metadata: Option<Metadata>,
    _message: PhantomData<fn(T)>,
}

impl<T: prost::Message> ServerStream<T> {
    /// Metadata sent before the first message (gRPC: the response headers). Set it before the
    /// first [`send`](ServerStream::send); later it is ignored.
    pub fn set_metadata(&mut self, metadata: Metadata) {
        self.metadata = Some(metadata);
    }

    /// Send one message. `Err(Cancelled)` once the caller is gone (it cancelled, its deadline
    /// passed, its connection closed): return then.
    pub async fn send(&mut self, message: T) -> Result<(), Status> {
        let attachment = self.metadata.take().map_or_else(Bytes::new, |m| m.encode());
        self.replies
            .send(crate::Response {
                payload: encode(&message),
                attachment,
            })
            .await
    }

    /// Whether the caller is gone (a send would fail).
    pub fn is_closed(&self) -> bool {
        self.replies.is_closed()
    }
}

/// The messages of a server-streaming call, as a client reads them. Dropping it before the
/// end cancels the call on the server.
pub struct Streaming<C: Connection, T> {
    inner: ReplyStream<C>,
    metadata: Option<Metadata>,
    _message: PhantomData<fn() -> T>,
}

impl<C: Connection, T: prost::Message + Default> Streaming<C, T> {
    /// The next message; `Ok(None)` when the stream ended well. Cancel-safe.
    pub async fn message(&mut self) -> Result<Option<T>, ClientError> {
        let Some(reply) = self.inner.message().await? else {
            return Ok(None);
        };
        if self.metadata.is_none() {
            self.metadata = Some(Metadata::decode(&reply.attachment).map_err(bad_reply)?);
        }
        decode::<T>(&reply.payload).map(Some).map_err(bad_reply)
    }

    /// The server's metadata, once the first message has arrived.
    pub fn metadata(&self) -> Option<&Metadata> {
        self.metadata.as_ref()
    }
}

fn bad_reply(e: impl std::fmt::Display) -> ClientError {
    ClientError::Status(Status::Internal(format!("bad reply: {e}")))
}

/// Messages up to this size are encoded into a shared per-thread chunk ([`ARENA_CHUNK`]) rather
/// than an allocation of their own: the transport copies a small frame into its send buffer
/// at once and drops the bytes, so the chunk is soon free again.
const ARENA_MAX: usize = 1024;
const ARENA_CHUNK: usize = 32 * 1024;

thread_local! {
    static ARENA: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// A message's protobuf bytes.
pub fn encode<T: prost::Message>(message: &T) -> Bytes {
    encode_len(message, message.encoded_len())
}

/// [`encode`] of a message whose encoded length is `len`.
fn encode_len<T: prost::Message>(message: &T, len: usize) -> Bytes {
    if len > ARENA_MAX {
        let mut buf = BytesMut::with_capacity(len);
        // Room for the whole message: encoding cannot run out of it.
        let _ = message.encode(&mut buf);
        return buf.freeze();
    }
    ARENA.with(|arena| {
        let mut arena = arena.borrow_mut();
        if arena.capacity() < len {
            // Reclaims the chunk when every message cut from it is gone, else starts a new one.
            arena.reserve(ARENA_CHUNK);
        }
        let _ = message.encode(&mut *arena);
        arena.split().freeze()
    })
}

/// The message in protobuf `bytes`.
pub fn decode<T: prost::Message + Default>(bytes: &Bytes) -> Result<T, prost::DecodeError> {
    T::decode(bytes.clone())
}

/// The typed request a raw one carries; `Err(BadRequest)` (counted and logged as a sample)
/// when its message or metadata do not decode.
fn typed_request<T: prost::Message + Default>(
    method: &str,
    raw: crate::Request,
) -> Result<Request<T>, Status> {
    let peer = raw.peer;
    // The payload itself, not a clone: its `bytes` fields are views of it either way.
    let message = T::decode(raw.payload).map_err(|e| bad_call(method, peer, &e))?;
    let metadata = Metadata::decode(&raw.attachment).map_err(|e| bad_call(method, peer, &e))?;
    Ok(Request {
        message,
        metadata,
        timeout: None,
        deadline: raw.deadline,
        peer,
        shard: Some(raw.shard),
    })
}

fn bad_call(method: &str, peer: Option<SocketAddr>, e: &dyn std::fmt::Display) -> Status {
    corewire_runtime::report_bad_call("protobuf", peer, &format_args!("{method}: {e}"));
    Status::BadRequest(format!("malformed request: {e}"))
}

/// The code a call ended with.
fn code_of<T>(result: &Result<T, Status>) -> Code {
    match result {
        Ok(_) => Code::Ok,
        Err(status) => Code::of(status),
    }
}

/// Serve one unary call of method `index` (generated code calls this): decode the request,
/// run `handler` in a span named for the method, count the call. The future yields the
/// typed reply, which the server encodes where it sends it ([`crate::EncodeReply`]);
/// [`encoded`] makes bytes of it.
///
/// The request is decoded before the returned future exists, so that future holds only the
/// handler's, in one layer (each `async` layer copies the future once more per call).
#[inline(always)]
pub fn unary<'a, Req, Resp, Fut>(
    stats: &'a MethodStats,
    index: usize,
    raw: crate::Request,
    handler: impl FnOnce(Request<Req>) -> Fut,
) -> UnaryCall<'a, Fut>
where
    Req: prost::Message + Default,
    Resp: prost::Message,
    Fut: Future<Output = Result<Response<Resp>, Status>> + 'a,
{
    serve_unary(stats, Ok(index), raw, handler)
}

/// [`unary`] for a service whose only method is unary method 0 (generated code calls this):
/// the call's future itself, with no layer around it to choose the method; a request for
/// another method fails as unknown.
#[inline(always)]
pub fn only_unary<'a, S, Req, Resp, Fut>(
    stats: &'a MethodStats,
    raw: crate::Request,
    handler: impl FnOnce(Request<Req>) -> Fut,
) -> UnaryCall<'a, Fut>
where
    S: crate::Service,
    Req: prost::Message + Default,
    Resp: prost::Message,
    Fut: Future<Output = Result<Response<Resp>, Status>> + 'a,
{
    let method = match S::METHODS.first() {
        Some(m) if m.id == raw.method => Ok(0),
        _ => Err(Status::UnknownMethod {
            service_id: S::ID,
            method_id: raw.method,
        }),
    };
    serve_unary(stats, method, raw, handler)
}

/// [`unary`] of method `index`, or the error a request for an unknown method gets. This and
/// the two above are always inlined, like [`unary_call`]: the call's future is then built
/// where it stays (the service's `call` future), not copied there from their frames.
#[inline(always)]
fn serve_unary<'a, Req, Resp, Fut>(
    stats: &'a MethodStats,
    index: Result<usize, Status>,
    raw: crate::Request,
    handler: impl FnOnce(Request<Req>) -> Fut,
) -> UnaryCall<'a, Fut>
where
    Req: prost::Message + Default,
    Resp: prost::Message,
    Fut: Future<Output = Result<Response<Resp>, Status>> + 'a,
{
    let index = match index {
        Ok(index) => index,
        Err(unknown) => return UnaryCall::failed(None, unknown),
    };
    let record = stats.start(index, raw.deadline);
    match typed_request::<Req>(stats.name(index), raw) {
        Ok(request) => UnaryCall {
            handler: Some(handler(request)),
            failed: None,
            span: span(stats, index),
            record: Some(record),
        },
        Err(bad) => UnaryCall::failed(Some(record), bad),
    }
}

/// Serve one call of synchronous unary method `index` in [`Service::call_now`] (generated
/// code calls this for the methods the build marked synchronous): decode the request, run
/// `handler` in a span named for the method, encode its reply, count the call. No future
/// exists at any point, so nothing is moved or boxed; the call is timed like one that answers
/// in the poll that received it (no clock read). A panic in `handler` unwinds to the server,
/// which fails the call as `Internal`; the call is counted so. The reply is encoded straight
/// into the connection's send buffer when `reply_to` takes it (no buffer of its own), else
/// returned encoded.
///
/// [`Service::call_now`]: crate::Service::call_now
pub fn unary_now<Req, Resp>(
    stats: &MethodStats,
    index: usize,
    raw: crate::Request,
    reply_to: crate::ReplyTo<'_>,
    handler: impl FnOnce(Request<Req>) -> Result<Response<Resp>, Status>,
) -> crate::CallNow
where
    Req: prost::Message + Default,
    Resp: prost::Message,
{
    let record = stats.start_at_once(index);
    let result = match typed_request::<Req>(stats.name(index), raw) {
        Ok(request) => match span(stats, index) {
            Some(span) => span.in_scope(|| handler(request)),
            None => handler(request),
        },
        Err(bad) => Err(bad),
    };
    record.finish(code_of(&result));
    let reply = match result {
        Ok(reply) => reply,
        Err(status) => return crate::CallNow::Done(Err(status)),
    };
    let message = &reply.message;
    let len = message.encoded_len();
    let attachment = reply.metadata.encode();
    if reply_to.send_with(len, &attachment, |buf| message.encode_raw(buf)) {
        return crate::CallNow::Replied;
    }
    crate::CallNow::Done(Ok(crate::Response {
        payload: encode_len(message, len),
        attachment,
    }))
}

pin_project_lite::pin_project! {
    /// One unary call being served: the handler's future, polled in the call's span, then the
    /// call counted; its typed reply is encoded where the server sends it. Written out rather than an `async` block, which
    /// would keep the handler's future twice (as its capture and as the awaited local) and
    /// so be twice as much to move per call.
    pub struct UnaryCall<'a, Fut> {
        #[pin]
        handler: Option<Fut>,
        // Why the call failed before its handler ran (no handler then).
        failed: Option<Status>,
        span: Option<tracing::Span>,
        record: Option<CallRecord<'a>>,
    }
}

impl<'a, Fut> UnaryCall<'a, Fut> {
    fn failed(record: Option<CallRecord<'a>>, why: Status) -> UnaryCall<'a, Fut> {
        UnaryCall {
            handler: None,
            failed: Some(why),
            span: None,
            record,
        }
    }
}

impl<Fut, Resp> Future for UnaryCall<'_, Fut>
where
    Fut: Future<Output = Result<Response<Resp>, Status>>,
    Resp: prost::Message,
{
    type Output = Result<Response<Resp>, Status>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let mut this = self.project();
        let result = match this.handler.as_mut().as_pin_mut() {
            Some(handler) => {
                let polled = match this.span.as_ref() {
                    Some(span) => span.in_scope(|| handler.poll(cx)),
                    None => handler.poll(cx),
                };
                let std::task::Poll::Ready(result) = polled else {
                    return std::task::Poll::Pending;
                };
                // Dropped now, as an `async` block drops what it awaited.
                this.handler.set(None);
                result
            }
            None => Err(this
                .failed
                .take()
                .expect("a unary call polled after it finished")),
        };
        if let Some(record) = this.record.take() {
            record.finish(code_of(&result));
        }
        std::task::Poll::Ready(result)
    }
}

pin_project_lite::pin_project! {
    /// A call's typed reply encoded into bytes: [`Service::call`](crate::Service::call) of a
    /// generated server, which [`Service::call_in_place`](crate::Service::call_in_place)
    /// (the server's path) answers with the typed reply itself.
    pub struct Encoded<F> {
        #[pin]
        call: F,
    }
}

/// `call`, its typed reply encoded into bytes (generated code calls this).
#[inline(always)]
pub fn encoded<F>(call: F) -> Encoded<F> {
    Encoded { call }
}

impl<F, R> Future for Encoded<F>
where
    F: Future<Output = Result<R, Status>>,
    R: crate::EncodeReply,
{
    type Output = Result<crate::Response, Status>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.project()
            .call
            .poll(cx)
            .map(|result| result.map(crate::EncodeReply::into_response))
    }
}

/// The call's span, `None` when nobody listens (then the handler's future is not wrapped).
#[inline]
fn span(stats: &MethodStats, index: usize) -> Option<tracing::Span> {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    // Nothing listens at INFO (no subscriber, or a quieter one): one load, no disabled span
    // made and dropped per call.
    if tracing::Level::INFO > STATIC_MAX_LEVEL || tracing::Level::INFO > LevelFilter::current() {
        return None;
    }
    let span = tracing::info_span!("rpc", method = stats.name(index));
    (!span.is_disabled()).then_some(span)
}

/// Serve one server-streaming call of method `index` (generated code calls this).
pub fn server_streaming<'a, Req, Resp, Fut>(
    stats: &'a MethodStats,
    index: usize,
    raw: crate::Request,
    replies: Replies,
    handler: impl FnOnce(Request<Req>, ServerStream<Resp>) -> Fut,
) -> impl Future<Output = Result<(), Status>> + 'a
where
    Req: prost::Message + Default,
    Resp: prost::Message,
    Fut: Future<Output = Result<(), Status>> + 'a,
{
    let record = stats.start(index, raw.deadline);
    let call = typed_request::<Req>(stats.name(index), raw).map(|r| {
        let stream = ServerStream {
            replies,
            metadata: None,
            _message: PhantomData,
        };
        (handler(r, stream), span(stats, index))
    });
    counted(record, call)
}

/// Run a handler's future (in its span, if any) and count how the call ended.
async fn counted<T>(
    record: CallRecord<'_>,
    call: Result<
        (
            impl Future<Output = Result<T, Status>>,
            Option<tracing::Span>,
        ),
        Status,
    >,
) -> Result<T, Status> {
    let result = match call {
        Ok((handler, None)) => handler.await,
        Ok((handler, Some(span))) => handler.instrument(span).await,
        Err(status) => Err(status),
    };
    record.finish(code_of(&result));
    result
}

/// What the raw client sends for `request` to `method` of `service`: its message, its
/// metadata, its deadline.
fn outgoing<C: Connection, T: prost::Message>(
    client: &Client<C>,
    service: u32,
    method: u32,
    request: &Request<T>,
) -> Outgoing {
    Outgoing {
        service,
        method,
        payload: encode(&request.message),
        attachment: request.metadata.encode(),
        timeout: request.timeout.or_else(|| client.default_timeout()),
    }
}

/// A request's message, encoded when the call has its window slot: straight into the
/// connection's send buffer when it takes the frame then, else into bytes of its own.
#[derive(Debug)]
struct Unencoded<T> {
    message: T,
    len: usize,
}

impl<T: prost::Message> Payload for Unencoded<T> {
    fn try_send_in_place<C: Connection>(
        &self,
        conn: &C,
        header: &corewire_transport::frame::FrameHeader,
        attachment: &[u8],
    ) -> Result<bool, corewire_transport::TransportError> {
        conn.try_send_with(header, self.len, attachment, |buf| {
            self.message.encode_raw(buf)
        })
    }

    fn into_bytes(self) -> Bytes {
        encode_len(&self.message, self.len)
    }
}

/// A unary call from a generated client: the raw call's own future (the request is encoded
/// when it is sent, into the connection's send buffer where it can be, and the reply decoded
/// as it resolves), with no wrapper around it, since each layer would copy the whole future
/// once more per call. Always inlined: a call out of line builds the future (most of a KiB)
/// in its own frame, which the caller then copies into its own state, twice (`IntoFuture`
/// and the `.await`); inlined, it is built where it stays.
#[inline(always)]
pub fn unary_call<'a, C, Req, Resp>(
    client: &'a Client<C>,
    service: u32,
    method: u32,
    request: Request<Req>,
) -> impl Future<Output = Result<Response<Resp>, ClientError>> + 'a
where
    C: Connection,
    Req: prost::Message + 'a,
    Resp: prost::Message + Default + 'a,
{
    let Request {
        message,
        metadata,
        timeout,
        ..
    } = request;
    let call = Outgoing {
        service,
        method,
        payload: Unencoded {
            len: message.encoded_len(),
            message,
        },
        attachment: metadata.encode(),
        timeout: timeout.or_else(|| client.default_timeout()),
    };
    client.start_call(call, typed_reply::<Resp>)
}

/// A unary call's typed reply.
fn typed_reply<T: prost::Message + Default>(
    reply: crate::Response,
) -> Result<Response<T>, ClientError> {
    Ok(Response {
        message: T::decode(reply.payload).map_err(bad_reply)?,
        metadata: Metadata::decode(&reply.attachment).map_err(bad_reply)?,
    })
}

/// A server-streaming call from a generated client.
pub async fn streaming_call<C, Req, Resp>(
    client: &Client<C>,
    service: u32,
    method: u32,
    request: Request<Req>,
) -> Result<Streaming<C, Resp>, ClientError>
where
    C: Connection,
    Req: prost::Message,
    Resp: prost::Message + Default,
{
    let stream = client
        .start_stream(outgoing(client, service, method, &request))
        .await?;
    Ok(Streaming {
        inner: stream,
        metadata: None,
        _message: PhantomData,
    })
}

#[cfg(test)]
mod tests;
