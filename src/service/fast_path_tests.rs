//! The dispatch's fast path: a handler that answers on its first poll is run in the
//! connection's reader, with no task of its own; one that panics fails its call, not the
//! connection.

use bytes::{BufMut, Bytes};
use corewire_runtime::{spawn_local, with_local_stats};
use corewire_transport::frame::{FrameHeader, FrameKind};
use corewire_transport::mem::{pair, MemOptions};
use corewire_transport::Connection;

use super::tests::on_a_shard;
use super::{dispatch, service_id, Client, ClientError, ClientOptions, Request, Response};
use super::{CallNow, ReplyTo, Server, Service, Status};

struct Quick;
impl Service for Quick {
    const ID: u32 = service_id("quick");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        match req.method {
            0 => Ok(Response::new(req.payload)),
            _ => panic!("method {} panics", req.method),
        }
    }
}

fn serve_quick() -> corewire_transport::mem::MemConnection {
    let server = Server::builder().service(|_| Quick).build();
    let (ours, theirs) = pair(MemOptions::default());
    spawn_local(async move {
        let services = server.services_here();
        dispatch::serve(theirs, services, server.options(), None).await
    });
    ours
}

/// 512 pipelined requests cost fewer task polls than requests: the server's reader answers
/// them itself, a budget's worth per poll, instead of polling one task per request.
#[test]
fn handlers_that_answer_at_once_get_no_task() {
    const REQUESTS: u64 = 512;
    let polls = on_a_shard(|| async {
        let peer = serve_quick();
        let before = with_local_stats(|s| s.tasks_polled());
        for id in 0..REQUESTS {
            let h = FrameHeader::request(Quick::ID, 0, id);
            peer.send(&h, Bytes::from_static(b"x"), Bytes::new())
                .await
                .unwrap();
        }
        for id in 0..REQUESTS {
            let f = peer.recv().await.unwrap().unwrap();
            assert_eq!(f.header.kind, FrameKind::Response);
            assert_eq!(f.header.correlation_id, id, "answered in order");
        }
        with_local_stats(|s| s.tasks_polled()) - before
    });
    assert!(
        polls < REQUESTS,
        "{polls} task polls for {REQUESTS} requests: a task per request?"
    );
}

#[test]
fn a_panicking_handler_fails_its_call_and_the_connection_carries_on() {
    let (panicked, after) = on_a_shard(|| async {
        let client = Client::new(serve_quick(), ClientOptions::default());
        let panicked = client.call(Quick::ID, 1, Bytes::new()).await;
        let after = client.call(Quick::ID, 0, Bytes::from_static(b"ok")).await;
        (panicked, after)
    });
    assert_eq!(
        panicked,
        Err(ClientError::Status(Status::Internal(
            "the handler panicked".into()
        )))
    );
    assert_eq!(after.unwrap(), Bytes::from_static(b"ok"));
}

corewire_runtime::shard_local! {
    /// Requests [`Now`] answered in `call_now` and in `call`, on this shard.
    static ANSWERED: std::cell::Cell<(u32, u32)> = std::cell::Cell::new((0, 0));
}

/// Answers method 0 in `call_now`, hands method 1 on to `call`, panics in `call_now` for
/// method 2.
struct Now;
impl Service for Now {
    const ID: u32 = service_id("now");
    async fn call(&self, _req: Request) -> Result<Response, Status> {
        ANSWERED.with(|a| a.set((a.get().0, a.get().1 + 1)));
        Ok(Response::new(Bytes::from_static(b"later")))
    }
    fn call_now(&self, req: Request, reply: ReplyTo<'_>) -> CallNow {
        match req.method {
            0 => {
                ANSWERED.with(|a| a.set((a.get().0 + 1, a.get().1)));
                CallNow::Done(Ok(Response::new(req.payload)))
            }
            1 => CallNow::Later(req),
            // In place: the payload twice, written into the send buffer.
            3 => {
                let p = &req.payload;
                let written = reply.send_with(2 * p.len(), b"att", |buf| {
                    buf.put_slice(p);
                    buf.put_slice(p);
                });
                assert!(!reply.send_with(0, b"", |_| ()), "one reply per call");
                match written {
                    true => CallNow::Replied,
                    false => CallNow::Done(Ok(Response::new(Bytes::from_static(b"not in place")))),
                }
            }
            // Claims a reply it never wrote.
            4 => CallNow::Replied,
            // Replies in place, then panics: the reply stands.
            5 => {
                reply.send_with(2, b"", |buf| buf.put_slice(b"ok"));
                panic!("call_now panics after its reply");
            }
            // Writes the wrong length: not queued; replied the ordinary way.
            6 => {
                if reply.send_with(5, b"", |buf| buf.put_slice(b"four")) {
                    return CallNow::Replied;
                }
                CallNow::Done(Ok(Response::new(Bytes::from_static(b"fallback"))))
            }
            m => panic!("call_now of method {m} panics"),
        }
    }
}

/// A request answered in `call_now` never reaches `call`; one handed back does; a panic in
/// `call_now` fails its call as Internal and the connection carries on.
#[test]
fn call_now_answers_or_hands_the_request_to_call() {
    let (answered, panicked, after) = on_a_shard(|| async {
        let server = Server::builder().service(|_| Now).build();
        let (ours, theirs) = pair(MemOptions::default());
        let services = server.services_here();
        spawn_local(dispatch::serve(theirs, services, server.options(), None));
        let client = Client::new(ours, ClientOptions::default());
        for _ in 0..3 {
            let r = client.call(Now::ID, 0, Bytes::from_static(b"n")).await;
            assert_eq!(r.unwrap(), Bytes::from_static(b"n"));
        }
        let r = client.call(Now::ID, 1, Bytes::from_static(b"l")).await;
        assert_eq!(r.unwrap(), Bytes::from_static(b"later"));
        let panicked = client.call(Now::ID, 2, Bytes::new()).await;
        let after = client.call(Now::ID, 0, Bytes::from_static(b"ok")).await;
        (ANSWERED.with(|a| a.get()), panicked, after)
    });
    assert_eq!(answered, (4, 1), "(in call_now, in call)");
    assert_eq!(
        panicked,
        Err(ClientError::Status(Status::Internal(
            "the handler panicked".into()
        )))
    );
    assert_eq!(after.unwrap(), Bytes::from_static(b"ok"));
}

/// A reply written in place arrives as any other (payload and attachment), also when the
/// handler panics after writing it; a handler that claims a reply it never wrote fails its
/// call as Internal; one that writes the wrong length queues nothing and replies the
/// ordinary way; the connection carries on after each.
#[test]
fn replies_written_in_place() {
    on_a_shard(|| async {
        let server = Server::builder().service(|_| Now).build();
        let (ours, theirs) = pair(MemOptions::default());
        let services = server.services_here();
        spawn_local(dispatch::serve(theirs, services, server.options(), None));
        let client = Client::new(ours, ClientOptions::default());
        for size in [0, 1, 64, 4096, 40_000] {
            let payload = Bytes::from(vec![7u8; size]);
            let reply = client
                .request(Now::ID, 3)
                .payload(payload.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(
                reply.payload,
                [payload.clone(), payload].concat(),
                "{size} B"
            );
            assert_eq!(reply.attachment, Bytes::from_static(b"att"));
        }
        let claimed = client.call(Now::ID, 4, Bytes::new()).await;
        assert_eq!(
            claimed,
            Err(ClientError::Status(Status::Internal(
                "the handler returned no reply".into()
            )))
        );
        let r = client.call(Now::ID, 5, Bytes::new()).await;
        assert_eq!(r.unwrap(), Bytes::from_static(b"ok"));
        let r = client.call(Now::ID, 6, Bytes::new()).await;
        assert_eq!(r.unwrap(), Bytes::from_static(b"fallback"));
        let r = client.call(Now::ID, 0, Bytes::from_static(b"after")).await;
        assert_eq!(r.unwrap(), Bytes::from_static(b"after"));
    });
}
