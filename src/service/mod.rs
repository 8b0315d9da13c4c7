//! Shard-local services. A [`Service`] is written once; the server creates one instance per
//! shard (with that shard's state) and serves it over every transport that implements
//! [`Connection`](corewire_transport::Connection).

pub(crate) mod client;
#[cfg(feature = "tls")]
mod client_tls;
pub(crate) mod dispatch;
mod pool;
pub(crate) mod registry;
pub(crate) mod reply_to;
mod server;
mod stream;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use corewire_runtime::ShardId;

pub use client::{CallBuilder, Client, ClientError, ClientOptions, DisconnectCause};
pub use corewire_transport::rpc::Status;
pub use dispatch::serve_connection;
pub use pool::ClientPool;
pub(crate) use reply_to::ConnReply;
pub use reply_to::ReplyTo;
pub use server::{Server, ServerBuilder, ServerOptions};
pub use stream::{Replies, ReplyStream};

/// One call as a service sees it.
#[derive(Debug)]
pub struct Request {
    /// The method, within the service.
    pub method: u32,
    /// Over TCP, a view of the buffer the connection received it in, shared with the
    /// requests that arrived with it (up to the runtime's 64 KiB of one receive): a service
    /// that keeps a payload long after the call should copy it (`Bytes::copy_from_slice`)
    /// rather than keep that whole buffer alive.
    pub payload: Bytes,
    /// Bulk bytes carried beside the payload without being copied into it.
    pub attachment: Bytes,
    /// When the caller stops waiting; the server also enforces it.
    pub deadline: Option<Instant>,
    /// The caller's address, when the transport knows it.
    pub peer: Option<SocketAddr>,
    /// The shard running this call (and owning this service instance).
    pub shard: ShardId,
}

/// A successful reply: what a service returns and what a client receives.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Response {
    /// The reply's payload.
    pub payload: Bytes,
    /// The reply's attachment (may be empty).
    pub attachment: Bytes,
}

impl Response {
    /// A reply of `payload`, no attachment.
    pub fn new(payload: impl Into<Bytes>) -> Response {
        Response {
            payload: payload.into(),
            attachment: Bytes::new(),
        }
    }

    /// The reply with `attachment` too.
    pub fn with_attachment(mut self, attachment: impl Into<Bytes>) -> Response {
        self.attachment = attachment.into();
        self
    }
}

/// How a method answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MethodKind {
    /// One reply ([`Service::call`]).
    Unary,
    /// A stream of replies ([`Service::call_streaming`]).
    ServerStreaming,
}

/// A method as transports that address methods by name (gRPC) see it. Generated code lists
/// them in [`Service::METHODS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MethodInfo {
    /// The full gRPC name, `/package.Service/Method`.
    pub name: &'static str,
    /// The id corewire's framing carries: [`service_id`] of `name` (FNV-1a), so both ends
    /// derive it from the name alone, with no set-up exchange.
    pub id: u32,
    /// How the method answers (one reply or a stream).
    pub kind: MethodKind,
}

impl MethodInfo {
    /// A method of `kind` named `name` (`/package.Service/Method`), its id derived from the
    /// name.
    pub const fn new(name: &'static str, kind: MethodKind) -> MethodInfo {
        MethodInfo {
            name,
            id: service_id(name),
            kind,
        }
    }
}

/// A service: one instance per shard, called concurrently by every connection on that shard
/// (so its state lives in `Cell`/`RefCell`, no locks). Reach other shards' instances with
/// [`corewire_runtime::submit_to`].
///
/// This is the low-level layer: requests and replies are bytes. Services generated from a
/// `.proto` file (`corewire-build`) implement it for you, with typed messages on top and
/// [`NAME`](Service::NAME)/[`METHODS`](Service::METHODS) filled in so gRPC can reach them.
pub trait Service: 'static {
    /// The id clients address this service by; [`service_id`] derives one from a name.
    const ID: u32;

    /// The full name (`package.Service`); empty for a service only corewire's framing
    /// reaches.
    const NAME: &'static str = "";

    /// The methods, for transports that address them by name (gRPC) and for streaming
    /// methods on every transport; a method not listed is unary.
    const METHODS: &'static [MethodInfo] = &[];

    /// Answer one call.
    fn call(&self, request: Request) -> impl Future<Output = Result<Response, Status>>;

    /// A server-streaming method (one [`METHODS`](Service::METHODS) lists as
    /// [`MethodKind::ServerStreaming`]): send each reply with [`Replies::send`], which waits
    /// while the caller is not reading (the stream's buffering is bounded), then return how
    /// the stream ends. The default answers `Unimplemented`.
    fn call_streaming(
        &self,
        request: Request,
        replies: Replies,
    ) -> impl Future<Output = Result<(), Status>> {
        drop(replies);
        std::future::ready(Err(Status::Unimplemented(format!(
            "method {} does not stream",
            request.method
        ))))
    }

    /// [`call`](Service::call) as the server runs it over corewire's framing: the same call,
    /// its successful reply any [`EncodeReply`], so that a reply still to be encoded (a typed
    /// service's message) is encoded straight into the connection's send buffer when it is
    /// ready, as one answered in [`call_now`](Service::call_now) is through [`ReplyTo`],
    /// rather than into a buffer of its own that is then copied. The default is `call`'s
    /// future itself ([`Response`]'s bytes are queued as they are); the servers
    /// `corewire-build` generates override it. It must answer as `call` does: gRPC runs it too
    /// and takes the reply as bytes ([`EncodeReply::into_response`]).
    fn call_in_place(
        &self,
        request: Request,
    ) -> impl Future<Output = Result<impl EncodeReply + use<Self>, Status>> {
        self.call(request)
    }

    /// The fast path, for handlers that can answer without waiting: answer here
    /// ([`CallNow::Done`]; or write the reply in place with `reply`'s
    /// [`send_with`](ReplyTo::send_with), then [`CallNow::Replied`]) or hand the request back
    /// ([`CallNow::Later`]) to be served by [`call`](Service::call). The server asks this
    /// first; a request answered here costs no future (`call`'s is boxed, so the server can
    /// keep it if it has to wait) and no task. The default hands every request back.
    fn call_now(&self, request: Request, reply: ReplyTo<'_>) -> CallNow {
        let _ = reply;
        CallNow::Later(request)
    }
}

/// A successful reply of [`Service::call_in_place`]: written in place into the connection's
/// send buffer where the transport takes it at once, else queued as bytes.
pub trait EncodeReply {
    /// Queue the reply through `reply` ([`ReplyTo::send_with`]) if it can be written in
    /// place; true when it was (the call is answered). [`Response`], whose bytes exist
    /// already, never is: the transport queues them as they are.
    fn reply_in_place(&self, reply: ReplyTo<'_>) -> bool;

    /// The reply as bytes, where it was not written in place.
    fn into_response(self) -> Response;
}

impl EncodeReply for Response {
    #[inline]
    fn reply_in_place(&self, _: ReplyTo<'_>) -> bool {
        false
    }

    #[inline]
    fn into_response(self) -> Response {
        self
    }
}

/// What [`Service::call_now`] did with a request.
#[derive(Debug)]
#[non_exhaustive]
pub enum CallNow {
    /// Answered: the reply is queued at once.
    Done(Result<Response, Status>),
    /// Answered: the reply was queued in place by [`ReplyTo::send_with`]. (Returned without
    /// such a reply, the call fails as `Internal`.)
    Replied,
    /// Not answered here: the server calls [`Service::call`] with it.
    Later(Request),
}

/// A stable service id from a name (FNV-1a), usable in `const ID`.
pub const fn service_id(name: &str) -> u32 {
    let bytes = name.as_bytes();
    let mut hash: u32 = 0x811c_9dc5;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u32;
        hash = hash.wrapping_mul(0x0100_0193);
        i += 1;
    }
    hash
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod head_of_line_tests;

#[cfg(test)]
mod fast_path_tests;

#[cfg(test)]
mod stream_tests;

#[cfg(test)]
mod id_tests {
    use super::service_id;

    #[test]
    fn service_ids_are_stable_and_distinct() {
        assert_eq!(service_id("echo"), service_id("echo"));
        assert_ne!(service_id("echo"), service_id("counter"));
        // FNV-1a of the empty string is its offset basis.
        assert_eq!(service_id(""), 0x811c_9dc5);
    }
}
