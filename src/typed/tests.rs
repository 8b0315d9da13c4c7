use std::pin::pin;
use std::task::{Context, Poll, Waker};

use super::*;
use crate::service::{MethodInfo, MethodKind};
use crate::Service as _;

struct One;
impl crate::Service for One {
    const ID: u32 = crate::service_id("t.One");
    const METHODS: &'static [MethodInfo] = &[MethodInfo::new("/t.One/Echo", MethodKind::Unary)];
    async fn call(&self, _: crate::Request) -> Result<crate::Response, Status> {
        unreachable!("only_unary is called directly")
    }
}

fn raw(method: u32, payload: Bytes) -> crate::Request {
    crate::Request {
        method,
        payload,
        attachment: Bytes::new(),
        deadline: None,
        peer: None,
        shard: 0,
    }
}

fn now<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("answers at once"),
    }
}

/// A service of one unary method: its method is served and counted, any other is unknown
/// (and not counted against it).
#[test]
fn only_unary_serves_its_method_and_refuses_others() {
    let stats = MethodStats::new(One::METHODS);
    let handler =
        |r: Request<String>| async move { Ok(Response::new(format!("{}!", r.into_inner()))) };
    let hello = encode(&"hello".to_owned());
    let reply = now(only_unary::<One, _, _, _>(
        &stats,
        raw(One::METHODS[0].id, hello),
        handler,
    ));
    assert_eq!(reply.unwrap().into_inner(), "hello!");
    let other = now(only_unary::<One, _, _, _>(
        &stats,
        raw(7, Bytes::new()),
        handler,
    ));
    assert_eq!(
        other,
        Err(Status::UnknownMethod {
            service_id: One::ID,
            method_id: 7
        })
    );
    assert_eq!(stats.count(0, Code::Ok), 1);
    assert_eq!(stats.count(0, Code::Unimplemented), 0);
}

/// A synchronous method is answered in `call_now` and counted by code; a request that does
/// not decode fails without running the handler; a panic in the handler unwinds (the
/// server fails the call as Internal) and is counted as Internal.
#[test]
fn unary_now_answers_and_counts_by_code() {
    let stats = MethodStats::new(One::METHODS);
    let answer = |raw| {
        unary_now(
            &stats,
            0,
            raw,
            crate::ReplyTo::none(),
            |r: Request<String>| match r.get_ref().as_str() {
                "boom" => panic!("the handler panics"),
                "no" => Err(Status::NotFound("no".into())),
                _ => Ok(Response::new(format!("{}!", r.into_inner()))),
            },
        )
    };
    let id = One::METHODS[0].id;
    let crate::CallNow::Done(Ok(reply)) = answer(raw(id, encode(&"hi".to_owned()))) else {
        panic!("answered at once");
    };
    assert_eq!(decode::<String>(&reply.payload).unwrap(), "hi!");
    assert!(matches!(
        answer(raw(id, encode(&"no".to_owned()))),
        crate::CallNow::Done(Err(Status::NotFound(_)))
    ));
    assert!(matches!(
        answer(raw(id, Bytes::from_static(b"\xff"))),
        crate::CallNow::Done(Err(Status::BadRequest(_)))
    ));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        answer(raw(id, encode(&"boom".to_owned())))
    }));
    assert!(panicked.is_err());
    assert_eq!(stats.count(0, Code::Ok), 1);
    assert_eq!(stats.count(0, Code::NotFound), 1);
    assert_eq!(stats.count(0, Code::InvalidArgument), 1);
    assert_eq!(stats.count(0, Code::Internal), 1);
    assert_eq!(stats.count(0, Code::Cancelled), 0);
}

/// Takes a reply written in place into `buf` while `room` says so.
struct Sink {
    room: bool,
    buf: std::cell::RefCell<BytesMut>,
}

impl crate::service::reply_to::ReplySink for Sink {
    fn send_with(
        &self,
        payload_len: usize,
        attachment: &[u8],
        write: &mut dyn FnMut(&mut corewire_transport::PayloadBuf<'_>),
    ) -> bool {
        if !self.room {
            return false;
        }
        let mut buf = self.buf.borrow_mut();
        let mut payload = corewire_transport::PayloadBuf::new(&mut buf);
        write(&mut payload);
        assert_eq!(payload.written(), payload_len);
        buf.extend_from_slice(attachment);
        true
    }
}

/// A synchronous method's reply is encoded straight into the connection's buffer when it
/// takes it (the message's bytes, then the metadata), and returned encoded when it does
/// not; counted alike.
#[test]
fn unary_now_writes_its_reply_in_place_when_it_can() {
    let stats = MethodStats::new(One::METHODS);
    let id = One::METHODS[0].id;
    let long = "x".repeat(5000);
    for (room, message) in [(true, "hi"), (true, long.as_str()), (false, "hi")] {
        let sink = Sink {
            room,
            buf: Default::default(),
        };
        let now = unary_now(
            &stats,
            0,
            raw(id, encode(&message.to_owned())),
            crate::ReplyTo::new(&sink),
            |r: Request<String>| {
                let mut reply = Response::new(r.into_inner());
                reply.metadata_mut().insert("k", "v");
                Ok(reply)
            },
        );
        let mut metadata = Metadata::new();
        metadata.insert("k", "v");
        let expected = [encode(&message.to_owned()), metadata.encode()].concat();
        match now {
            crate::CallNow::Replied => {
                assert!(room);
                assert_eq!(sink.buf.borrow().to_vec(), expected);
            }
            crate::CallNow::Done(Ok(reply)) => {
                assert!(!room && sink.buf.borrow().is_empty());
                assert_eq!([reply.payload, reply.attachment].concat(), expected);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(stats.count(0, Code::Ok), 3);
}

/// A handler that waits is polled again until it answers (and counted once); a request
/// that does not decode fails without running the handler, counted as malformed.
#[test]
fn a_waiting_handler_is_polled_to_its_end_and_bad_requests_fail() {
    let stats = MethodStats::new(One::METHODS);
    let handler = |r: Request<String>| async move {
        let mut waited = false;
        std::future::poll_fn(|cx| {
            if waited {
                return Poll::Ready(());
            }
            waited = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        })
        .await;
        Ok(Response::new(r.into_inner()))
    };
    let mut call = pin!(only_unary::<One, _, _, _>(
        &stats,
        raw(One::METHODS[0].id, encode(&"x".to_owned())),
        handler,
    ));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(call.as_mut().poll(&mut cx).is_pending());
    assert_eq!(stats.count(0, Code::Ok), 0, "not counted while it runs");
    let Poll::Ready(Ok(reply)) = call.as_mut().poll(&mut cx) else {
        panic!("answers on its second poll");
    };
    assert_eq!(reply.into_inner(), "x");
    assert_eq!(stats.count(0, Code::Ok), 1);
    let bad = now(only_unary::<One, _, _, _>(
        &stats,
        raw(One::METHODS[0].id, Bytes::from_static(b"\xff")),
        handler,
    ));
    assert!(matches!(bad, Err(Status::BadRequest(_))), "{bad:?}");
    assert_eq!(stats.count(0, Code::of(&bad.unwrap_err())), 1);
}

/// A typed client's requests of every size (written in place into the connection's send
/// buffer, or queued the ordinary way when it has no room) reach the server whole, with their
/// metadata, and in order: an echo hands each back.
#[test]
fn typed_requests_arrive_whole_at_every_size() {
    struct Echo;
    impl crate::Service for Echo {
        const ID: u32 = crate::service_id("t.Echo");
        fn call_now(&self, req: crate::Request, _: crate::ReplyTo<'_>) -> crate::CallNow {
            crate::CallNow::Done(Ok(
                crate::Response::new(req.payload).with_attachment(req.attachment)
            ))
        }
        async fn call(&self, _: crate::Request) -> Result<crate::Response, Status> {
            unreachable!("answered in call_now")
        }
    }
    let rt = corewire_runtime::Runtime::builder()
        .shards(1)
        .pin(false)
        .build()
        .unwrap();
    rt.run_on(0, || async {
        let server = crate::Server::builder().service(|_| Echo).build();
        // A queue of 64 KiB: the larger requests wait for room.
        let mut options = corewire_transport::mem::MemOptions::default();
        options.max_queued_bytes = 64 << 10;
        let (ours, theirs) = corewire_transport::mem::pair(options);
        let services = server.services_here();
        corewire_runtime::spawn_local(crate::service::dispatch::serve(
            theirs,
            services,
            server.options(),
            None,
        ));
        let client = crate::Client::new(ours, crate::ClientOptions::default());
        for size in [0, 1, 64, 1000, 4096, 20_000, 100_000] {
            let text = "y".repeat(size);
            let mut request = Request::new(text.clone());
            request.metadata_mut().insert("size", &size.to_string());
            let calls = (0..4)
                .map(|_| unary_call::<_, String, String>(&client, Echo::ID, 1, request.clone()));
            for reply in futures_util::future::join_all(calls).await {
                let reply = reply.unwrap();
                assert_eq!(reply.get_ref(), &text, "{size} B");
                assert_eq!(
                    reply.metadata().get("size"),
                    Some(size.to_string().as_str())
                );
            }
            // A `bytes` field held as `Bytes`: queued by reference from
            // `PayloadBuf::BY_REFERENCE_MIN` up, between the message's other bytes.
            let bytes = Bytes::from((0..size).map(|i| i as u8).collect::<Vec<_>>());
            let calls = (0..4).map(|_| {
                unary_call::<_, Bytes, Bytes>(&client, Echo::ID, 1, Request::new(bytes.clone()))
            });
            for reply in futures_util::future::join_all(calls).await {
                assert_eq!(reply.unwrap().get_ref(), &bytes, "{size} B");
            }
        }
    })
    .unwrap();
}

/// A typed reply ([`crate::EncodeReply`]) is encoded straight into the connection's buffer
/// when it takes it (the message's bytes, then the metadata); elsewhere it becomes the same
/// bytes as a [`crate::Response`].
#[test]
fn typed_replies_are_encoded_in_place_when_the_connection_takes_them() {
    use crate::EncodeReply as _;
    let long = "x".repeat(5000);
    for message in ["", "hi", long.as_str()] {
        let mut reply = Response::new(message.to_owned());
        reply.metadata_mut().insert("k", "v");
        let expected = [encode(&message.to_owned()), reply.metadata().encode()].concat();
        let room = Sink {
            room: true,
            buf: Default::default(),
        };
        assert!(reply.reply_in_place(crate::ReplyTo::new(&room)));
        assert_eq!(room.buf.borrow().to_vec(), expected);
        let full = Sink {
            room: false,
            buf: Default::default(),
        };
        assert!(!reply.reply_in_place(crate::ReplyTo::new(&full)));
        assert!(!reply.reply_in_place(crate::ReplyTo::none()));
        let bytes = reply.into_response();
        assert_eq!([bytes.payload, bytes.attachment].concat(), expected);
    }
}

/// An `async` typed handler's replies, through the server: answered on the first poll or
/// after waiting (in a task of its own), small or larger than the connection's queue (then
/// queued the ordinary way), they arrive whole with their metadata.
#[test]
fn async_handlers_replies_arrive_whole_at_every_size() {
    struct Echo {
        stats: MethodStats,
    }
    const METHODS: &[MethodInfo] = &[MethodInfo::new("/t.Echo/Echo", MethodKind::Unary)];
    async fn echo(r: Request<String>) -> Result<Response<String>, Status> {
        // Odd sizes wait once, so their replies are sent from the call's task.
        if r.get_ref().len() % 2 == 1 {
            corewire_runtime::yield_now().await;
        }
        let mut reply = Response::new(r.get_ref().clone());
        reply.metadata = r.metadata().clone();
        Ok(reply)
    }
    impl crate::Service for Echo {
        const ID: u32 = crate::service_id("t.Echo");
        const METHODS: &'static [MethodInfo] = METHODS;
        fn call(
            &self,
            request: crate::Request,
        ) -> impl Future<Output = Result<crate::Response, Status>> {
            encoded(only_unary::<Self, _, _, _>(&self.stats, request, echo))
        }
        fn call_in_place(
            &self,
            request: crate::Request,
        ) -> impl Future<Output = Result<impl crate::EncodeReply + use<>, Status>> {
            only_unary::<Self, _, _, _>(&self.stats, request, echo)
        }
    }
    let rt = corewire_runtime::Runtime::builder()
        .shards(1)
        .pin(false)
        .build()
        .unwrap();
    rt.run_on(0, || async {
        let server = crate::Server::builder()
            .service(|_| Echo {
                stats: MethodStats::new(METHODS),
            })
            .build();
        let mut options = corewire_transport::mem::MemOptions::default();
        options.max_queued_bytes = 64 << 10;
        let (ours, theirs) = corewire_transport::mem::pair(options);
        let services = server.services_here();
        corewire_runtime::spawn_local(crate::service::dispatch::serve(
            theirs,
            services,
            server.options(),
            None,
        ));
        let client = crate::Client::new(ours, crate::ClientOptions::default());
        let sizes = [0, 1, 64, 1001, 4096, 20_001, 100_000];
        for size in sizes {
            let text = "y".repeat(size);
            let mut request = Request::new(text.clone());
            request.metadata_mut().insert("size", &size.to_string());
            let calls = (0..4).map(|_| {
                unary_call::<_, String, String>(&client, Echo::ID, METHODS[0].id, request.clone())
            });
            for reply in futures_util::future::join_all(calls).await {
                let reply = reply.unwrap();
                assert_eq!(reply.get_ref(), &text, "{size} B");
                assert_eq!(
                    reply.metadata().get("size"),
                    Some(size.to_string().as_str())
                );
            }
        }
    })
    .unwrap();
}

/// Counts the spans named "rpc" made while it is the subscriber (in [`RPC_SPANS`]).
struct RpcSpans;

static RPC_SPANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl tracing::Subscriber for RpcSpans {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        if span.metadata().name() == "rpc" {
            RPC_SPANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A call runs in a span when a subscriber listens at INFO (which the check that skips the
/// span when nothing listens must not prevent).
#[test]
fn a_call_has_a_span_when_a_subscriber_listens() {
    let stats = MethodStats::new(One::METHODS);
    let id = One::METHODS[0].id;
    let call = || {
        unary_now(
            &stats,
            0,
            raw(id, encode(&"hi".to_owned())),
            crate::ReplyTo::none(),
            |r: Request<String>| Ok(Response::new(r.into_inner())),
        )
    };
    let spans = || RPC_SPANS.load(std::sync::atomic::Ordering::Relaxed);
    let before = spans();
    tracing::subscriber::with_default(RpcSpans, || {
        assert!(matches!(call(), crate::CallNow::Done(Ok(_))));
    });
    assert_eq!(spans() - before, 1, "one span for the call");
}
