//! One gRPC call: from an HTTP/2 request to the service and back.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use corewire_runtime::report_bad_call;
use corewire_transport::grpc::{
    accepts, decompress_gzip, parse_timeout, Encoding, GrpcFrameError, MessageDecoder,
};
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, StatusCode};
use http_body::Body as _;
use hyper::body::Incoming;

use super::body::{Chunk, Event, GrpcBody, StreamBody};
use super::headers::{
    add_status, metadata_attachment, reply_headers, GRPC_ACCEPT_ENCODING, GRPC_ENCODING,
    GRPC_TIMEOUT,
};
use super::GrpcOptions;
use crate::service::dispatch::{call_now, guarded, poll_once, replied_nothing};
use crate::service::registry::{Entry, ServiceSet};
use crate::service::{CallNow, MethodKind, Replies, ReplyTo, Server};
use crate::typed::Metadata;
use crate::Status;

type Reply = http::Response<GrpcBody>;

/// What one connection's calls share.
struct Shared {
    server: Server,
    services: Rc<ServiceSet>,
    options: GrpcOptions,
    peer: Option<SocketAddr>,
}

/// hyper's service for one connection.
#[derive(Clone)]
pub(super) struct GrpcService {
    shared: Rc<Shared>,
}

impl GrpcService {
    pub(super) fn new(server: Server, peer: Option<SocketAddr>) -> GrpcService {
        GrpcService {
            shared: Rc::new(Shared {
                services: server.services_here(),
                options: server.options().grpc,
                server,
                peer,
            }),
        }
    }
}

impl hyper::service::Service<http::Request<Incoming>> for GrpcService {
    type Response = Reply;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Reply, Infallible>>>>;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move { Ok(handle(&shared, request).await) })
    }
}

/// A reply with no body: the status goes in the headers ("Trailers-Only").
fn trailers_only(result: Result<(), Status>) -> Reply {
    let mut reply = http::Response::new(GrpcBody::empty());
    let headers = reply.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    add_status(headers, &result);
    reply
}

fn http_error(status: StatusCode) -> Reply {
    let mut reply = http::Response::new(GrpcBody::empty());
    *reply.status_mut() = status;
    reply
}

fn is_grpc(content_type: Option<&HeaderValue>) -> bool {
    content_type.is_some_and(|v| {
        let v = v.as_bytes();
        v.starts_with(b"application/grpc") && matches!(v.get(16), None | Some(b'+' | b';'))
    })
}

async fn handle(shared: &Shared, request: http::Request<Incoming>) -> Reply {
    let (parts, body) = request.into_parts();
    if parts.method != Method::POST {
        return http_error(StatusCode::METHOD_NOT_ALLOWED);
    }
    if !is_grpc(parts.headers.get(CONTENT_TYPE)) {
        return http_error(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let path = parts.uri.path();
    let Some(route) = shared.server.route(path) else {
        return trailers_only(Err(Status::Unimplemented(format!("unknown method {path}"))));
    };
    let entry = shared
        .services
        .get(route.service)
        .expect("every route's service is in the server's set");
    let headers = &parts.headers;
    let encoding = match headers.get(GRPC_ENCODING) {
        None => Encoding::Identity,
        Some(v) => match Encoding::parse(v.as_bytes()) {
            Some(e) => e,
            None => {
                let mut reply = trailers_only(Err(Status::Unimplemented(format!(
                    "message encoding {:?} is not supported",
                    String::from_utf8_lossy(v.as_bytes())
                ))));
                reply.headers_mut().insert(
                    GRPC_ACCEPT_ENCODING,
                    HeaderValue::from_static(Encoding::ACCEPTED),
                );
                return reply;
            }
        },
    };
    let accepts_gzip = headers
        .get(GRPC_ACCEPT_ENCODING)
        .is_some_and(|v| accepts(v.as_bytes(), Encoding::Gzip));
    let reply_encoding =
        if accepts_gzip && (encoding == Encoding::Gzip || shared.options.compress_responses) {
            Encoding::Gzip
        } else {
            Encoding::Identity
        };
    let deadline = match headers.get(GRPC_TIMEOUT) {
        None => None,
        Some(v) => match parse_timeout(v.as_bytes()) {
            Some(budget) => Instant::now().checked_add(budget),
            None => {
                report_bad_call("grpc", shared.peer, &"malformed grpc-timeout");
                return trailers_only(Err(Status::BadRequest("malformed grpc-timeout".into())));
            }
        },
    };
    let attachment = match metadata_attachment(headers) {
        Ok(m) => m,
        Err(e) => {
            report_bad_call("grpc", shared.peer, &e);
            return trailers_only(Err(Status::BadRequest(e.0)));
        }
    };
    let read = read_message(body, shared.options.max_message_len, encoding, shared.peer);
    let payload = match deadline {
        Some(d) => {
            match corewire_runtime::timeout(d.saturating_duration_since(Instant::now()), read).await
            {
                Ok(read) => read,
                Err(_) => return trailers_only(Err(Status::DeadlineExceeded)),
            }
        }
        None => read.await,
    };
    let payload = match payload {
        Ok(p) => p,
        Err(status) => return trailers_only(Err(status)),
    };
    let request = crate::Request {
        method: route.method.id,
        payload,
        attachment,
        deadline,
        peer: shared.peer,
        shard: corewire_runtime::shard_id(),
    };
    match route.method.kind {
        MethodKind::Unary => match unary(entry, request, deadline).await {
            Ok(response) => {
                let meta = reply_metadata(&response.attachment);
                let mut reply = http::Response::new(GrpcBody::unary(Chunk::message(
                    response.payload,
                    reply_encoding,
                )));
                *reply.headers_mut() = reply_headers(reply_encoding, &meta);
                reply
            }
            Err(status) => trailers_only(Err(status)),
        },
        MethodKind::ServerStreaming => streaming(entry, request, deadline, reply_encoding).await,
    }
}

/// The metadata a service put in its reply's attachment (typed services always do; a raw
/// service's own attachment is not metadata and is not sent).
fn reply_metadata(attachment: &Bytes) -> Metadata {
    Metadata::decode(attachment).unwrap_or_default()
}

/// The one message of a request, decompressed.
async fn read_message(
    mut body: Incoming,
    limit: usize,
    encoding: Encoding,
    peer: Option<SocketAddr>,
) -> Result<Bytes, Status> {
    let bad = |e: &dyn std::fmt::Display| {
        report_bad_call("grpc", peer, e);
        Status::Internal(e.to_string())
    };
    let mut decoder = MessageDecoder::new(limit);
    let mut message = None;
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        // A body that fails is a stream the client reset or a connection gone: nobody hears
        // the answer.
        let frame = frame.map_err(|_| Status::Cancelled)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        decoder.push(data);
        while let Some(m) = decoder.next_message().map_err(|e| bad(&e))? {
            if message.replace(m).is_some() {
                return Err(bad(&"more than one message in a call that takes one"));
            }
        }
    }
    decoder.finish().map_err(|e: GrpcFrameError| bad(&e))?;
    let Some(m) = message else {
        return Err(bad(&"no request message"));
    };
    match (m.compressed, encoding) {
        (false, _) => Ok(m.data),
        (true, Encoding::Gzip) => decompress_gzip(&m.data, limit).map_err(|e| bad(&e)),
        (true, Encoding::Identity) => Err(bad(&"compressed message without a grpc-encoding")),
        (true, other) => Err(bad(&format_args!(
            "compressed with {other:?}, which this server does not decompress"
        ))),
    }
}

async fn unary(
    entry: &Entry,
    request: crate::Request,
    deadline: Option<Instant>,
) -> Result<crate::Response, Status> {
    // gRPC frames its replies itself: nothing is written in place.
    let request = match call_now(&*entry.instance, request, ReplyTo::none()) {
        CallNow::Done(result) => return result,
        CallNow::Later(request) => request,
        CallNow::Replied => return Err(replied_nothing()),
    };
    let mut call = match poll_once(entry.instance.clone(), request, ReplyTo::none()).await {
        Ok(result) => return result,
        Err(call) => call,
    };
    let call = poll_fn(move |cx| guarded(|| call.as_mut().poll_serve(cx, ReplyTo::none())));
    match deadline {
        Some(d) => corewire_runtime::timeout(d.saturating_duration_since(Instant::now()), call)
            .await
            .unwrap_or(Err(Status::DeadlineExceeded)),
        None => call.await,
    }
}

async fn streaming(
    entry: &Entry,
    request: crate::Request,
    deadline: Option<Instant>,
    encoding: Encoding,
) -> Reply {
    let (replies, rx) = Replies::channel();
    let call = entry.instance.clone().call_streaming(request, replies);
    let mut body = StreamBody::new(call, rx, deadline, encoding);
    // The headers wait for the first message (they carry its metadata) or the end (then the
    // reply is trailers-only).
    match poll_fn(|cx| body.poll_event(cx)).await {
        Event::End(result) => trailers_only(result),
        Event::Message(first) => {
            let meta = reply_metadata(&first.attachment);
            body.first = Some(first);
            let mut reply = http::Response::new(GrpcBody::stream(body));
            *reply.headers_mut() = reply_headers(encoding, &meta);
            reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types_are_recognised() {
        let ok = |s: &'static str| is_grpc(Some(&HeaderValue::from_static(s)));
        assert!(ok("application/grpc"));
        assert!(ok("application/grpc+proto"));
        assert!(ok("application/grpc; charset=utf-8"));
        assert!(!ok("application/grpc-web"));
        assert!(!ok("application/json"));
        assert!(!is_grpc(None));
    }
}
