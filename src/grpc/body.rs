//! The body of a gRPC reply: its messages, then the trailers with the call's status.

use std::convert::Infallible;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes};
use corewire_runtime::sync::mpsc;
use corewire_runtime::Sleep;
use corewire_transport::grpc::{compress_gzip, encode_prefix, Encoding, PREFIX_LEN};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::headers::trailers;
use crate::service::dispatch::poll_guarded;
use crate::service::registry::StreamFuture;
use crate::Status;

/// One gRPC message on the wire: its 5-byte prefix and its bytes, sent without copying them
/// together.
#[derive(Debug)]
pub struct Chunk {
    prefix: [u8; PREFIX_LEN],
    at: usize,
    payload: Bytes,
}

impl Chunk {
    /// `payload` as a message of a reply in `encoding`.
    pub(super) fn message(payload: Bytes, encoding: Encoding) -> Chunk {
        let (compressed, payload) = match encoding {
            Encoding::Gzip => (true, compress_gzip(&payload)),
            // Identity, and any encoding this server does not compress with.
            _ => (false, payload),
        };
        Chunk {
            prefix: encode_prefix(compressed, payload.len() as u32),
            at: 0,
            payload,
        }
    }
}

impl Buf for Chunk {
    fn remaining(&self) -> usize {
        PREFIX_LEN - self.at + self.payload.len()
    }

    fn chunk(&self) -> &[u8] {
        if self.at < PREFIX_LEN {
            &self.prefix[self.at..]
        } else {
            &self.payload
        }
    }

    fn advance(&mut self, mut n: usize) {
        let in_prefix = (PREFIX_LEN - self.at).min(n);
        self.at += in_prefix;
        n -= in_prefix;
        self.payload.advance(n);
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        if self.at < PREFIX_LEN && n < dst.len() {
            dst[n] = IoSlice::new(&self.prefix[self.at..]);
            n += 1;
        }
        if !self.payload.is_empty() && n < dst.len() {
            dst[n] = IoSlice::new(&self.payload);
            n += 1;
        }
        n
    }
}

/// A reply body.
pub struct GrpcBody {
    kind: Kind,
}

enum Kind {
    /// Nothing: the status went out in the headers (a trailers-only reply), or an HTTP error.
    Empty,
    /// One message, then the trailers.
    Unary {
        message: Option<Chunk>,
        trailers: Option<HeaderMap>,
    },
    Stream(Box<StreamBody>),
}

impl GrpcBody {
    pub(super) fn empty() -> GrpcBody {
        GrpcBody { kind: Kind::Empty }
    }

    pub(super) fn unary(message: Chunk) -> GrpcBody {
        GrpcBody {
            kind: Kind::Unary {
                message: Some(message),
                trailers: Some(trailers(&Ok(()))),
            },
        }
    }

    pub(super) fn stream(body: StreamBody) -> GrpcBody {
        GrpcBody {
            kind: Kind::Stream(Box::new(body)),
        }
    }
}

impl Body for GrpcBody {
    type Data = Chunk;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Chunk>, Infallible>>> {
        let frame = match &mut self.get_mut().kind {
            Kind::Empty => None,
            Kind::Unary { message, trailers } => match message.take() {
                Some(m) => Some(Frame::data(m)),
                None => trailers.take().map(Frame::trailers),
            },
            Kind::Stream(body) => return body.poll_frame(cx).map(|f| f.map(Ok)),
        };
        Poll::Ready(frame.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Unary { message, trailers } => message.is_none() && trailers.is_none(),
            Kind::Stream(body) => body.finished,
        }
    }

    fn size_hint(&self) -> SizeHint {
        // Never exact: hyper would add a content-length, which gRPC does not use.
        SizeHint::default()
    }
}

/// What a streaming handler did next.
pub(super) enum Event {
    Message(crate::Response),
    End(Result<(), Status>),
}

/// A server-streaming call: the handler runs here, polled by the body, so it runs only as
/// fast as HTTP/2's flow control lets the body send (hyper polls a body for its next frame
/// only once the last one had room). Dropped (the client reset the stream, the connection
/// went away) it drops the handler.
pub(super) struct StreamBody {
    call: Option<StreamFuture>,
    replies: mpsc::Receiver<crate::Response>,
    done: Option<Result<(), Status>>,
    timer: Option<Sleep>,
    encoding: Encoding,
    /// The first message, taken before the headers were sent (its metadata went with them).
    pub(super) first: Option<crate::Response>,
    finished: bool,
}

impl StreamBody {
    pub(super) fn new(
        call: StreamFuture,
        replies: mpsc::Receiver<crate::Response>,
        deadline: Option<Instant>,
        encoding: Encoding,
    ) -> StreamBody {
        StreamBody {
            call: Some(call),
            replies,
            done: None,
            timer: deadline.map(corewire_runtime::sleep_until),
            encoding,
            first: None,
            finished: false,
        }
    }

    /// The handler's next message, or how its stream ended.
    pub(super) fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if self.done.is_none() {
            if let Some(timer) = self.timer.as_mut() {
                if Pin::new(timer).poll(cx).is_ready() {
                    // Past the deadline nothing more is sent: the handler goes now.
                    self.call = None;
                    self.done = Some(Err(Status::DeadlineExceeded));
                    return Poll::Ready(Event::End(Err(Status::DeadlineExceeded)));
                }
            }
            if let Some(call) = self.call.as_mut() {
                if let Poll::Ready(result) = poll_guarded(call.as_mut(), cx) {
                    self.call = None;
                    self.done = Some(result);
                }
            }
        }
        match self.replies.poll_recv(cx) {
            Poll::Ready(Some(reply)) => Poll::Ready(Event::Message(reply)),
            // Messages sent before the handler returned go first; then the end.
            _ => match &self.done {
                Some(result) => Poll::Ready(Event::End(result.clone())),
                None => Poll::Pending,
            },
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Frame<Chunk>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Frame::data(Chunk::message(
                first.payload,
                self.encoding,
            ))));
        }
        Poll::Ready(Some(match std::task::ready!(self.poll_event(cx)) {
            Event::Message(reply) => Frame::data(Chunk::message(reply.payload, self.encoding)),
            Event::End(result) => {
                self.finished = true;
                self.call = None;
                Frame::trailers(trailers(&result))
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_its_prefix_then_its_payload() {
        let mut c = Chunk::message(Bytes::from_static(b"hello"), Encoding::Identity);
        assert_eq!(c.remaining(), 10);
        let mut slices = [IoSlice::new(&[]); 4];
        assert_eq!(c.chunks_vectored(&mut slices), 2);
        let all = c.copy_to_bytes(10);
        assert_eq!(&all[..], b"\0\0\0\0\x05hello");
        let mut c = Chunk::message(Bytes::from_static(b"hello"), Encoding::Identity);
        c.advance(3);
        assert_eq!(c.chunk(), b"\0\x05");
        c.advance(4);
        assert_eq!(c.chunk(), b"llo");
    }

    #[test]
    fn a_gzip_chunk_sets_the_flag() {
        let c = Chunk::message(Bytes::from(vec![b'a'; 1000]), Encoding::Gzip);
        assert_eq!(c.prefix[0], 1);
        assert!(c.remaining() < 100);
    }
}
