//! The dispatch loop and the client over an in-memory connection pair: no sockets, the same
//! framing, bounds and backpressure as a real transport.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use corewire_runtime::{sleep, spawn_local, timeout, Runtime};
use corewire_transport::frame::{FrameHeader, FrameKind};
use corewire_transport::mem::{pair, MemConnection, MemOptions};
use corewire_transport::Connection;

use super::{dispatch, service_id, Client, ClientError, ClientOptions, Request, Response};
use super::{Server, ServerOptions, Service, Status};

corewire_runtime::shard_local! {
    static STARTED: Cell<u64> = Cell::new(0);
    static DROPPED: Cell<u64> = Cell::new(0);
}

struct Abandoned;
impl Drop for Abandoned {
    fn drop(&mut self) {
        DROPPED.with(|d| d.set(d.get() + 1));
    }
}

pub(super) struct Test;
impl Service for Test {
    const ID: u32 = service_id("test");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        STARTED.with(|s| s.set(s.get() + 1));
        match req.method {
            0 => Ok(Response::new(req.payload).with_attachment(req.attachment)),
            1 => Err(Status::BadRequest("no".into())),
            _ => {
                let guard = Abandoned;
                std::future::pending::<()>().await;
                drop(guard);
                unreachable!()
            }
        }
    }
}

/// Serve `Test` on one end of a fresh pair; the other end is returned.
fn serve(server_options: ServerOptions, mem: MemOptions) -> MemConnection {
    let server = Server::builder()
        .service(|_| Test)
        .options(server_options)
        .build();
    let (ours, theirs) = pair(mem);
    spawn_local(async move {
        dispatch::serve(theirs, server.services_here(), server.options(), None).await
    });
    ours
}

pub(super) fn on_a_shard<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    rt.run_on(0, f).unwrap()
}

#[test]
fn calls_and_typed_errors_over_a_memory_pair() {
    let (echo, bad, unknown) = on_a_shard(|| async {
        let conn = serve(ServerOptions::default(), MemOptions::default());
        let client = Client::new(conn, ClientOptions::default());
        let echo = client
            .request(Test::ID, 0)
            .payload("p")
            .attachment("a")
            .send()
            .await
            .unwrap();
        let bad = client.call(Test::ID, 1, Bytes::new()).await.unwrap_err();
        let unknown = client.call(7, 0, Bytes::new()).await.unwrap_err();
        (echo, bad, unknown)
    });
    assert_eq!(
        echo,
        Response::new("p").with_attachment(Bytes::from_static(b"a"))
    );
    assert_eq!(bad, ClientError::Status(Status::BadRequest("no".into())));
    assert_eq!(unknown, ClientError::Status(Status::UnknownService(7)));
}

/// A peer that sends and never reads: the server runs at most the window's requests plus
/// what its reply queue holds, then reads nothing more, so the peer's own sends stall; once
/// the peer reads, every request is answered.
#[test]
fn a_peer_that_never_reads_is_bounded_by_the_window_and_the_queue() {
    const WINDOW: usize = 4;
    const QUEUE: usize = 256 << 10;
    const SIZE: usize = 64 << 10;
    const REQUESTS: u64 = 100;
    let (started, sent, answered) = on_a_shard(|| async {
        let peer = serve(
            ServerOptions {
                max_in_flight_per_conn: WINDOW,
                max_queued_bytes: QUEUE,
                ..ServerOptions::default()
            },
            {
                let mut o = MemOptions::default();
                o.max_queued_bytes = QUEUE;
                o
            },
        );
        let sent = Rc::new(Cell::new(0u64));
        let (p, s) = (peer.clone(), sent.clone());
        let writer = spawn_local(async move {
            let payload = Bytes::from(vec![1u8; SIZE]);
            for id in 0..REQUESTS {
                let h = FrameHeader::request(Test::ID, 0, id);
                p.send(&h, payload.clone(), Bytes::new()).await.unwrap();
                s.set(id + 1);
            }
        });
        sleep(Duration::from_millis(50)).await;
        let started = STARTED.with(Cell::get);
        let sent_before_reading = sent.get();
        let mut answered = 0;
        while answered < REQUESTS {
            let f = timeout(Duration::from_secs(10), peer.recv())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(f.header.kind, FrameKind::Response);
            answered += 1;
        }
        writer.await.unwrap();
        (started, sent_before_reading, answered)
    });
    // Window + what fits in the reply queue (+1 admitted when the queue was empty).
    let bound = (WINDOW + QUEUE / SIZE + 1) as u64;
    assert!(started <= bound, "{started} requests ran (bound {bound})");
    assert!(
        sent < REQUESTS,
        "the server kept reading a peer that never reads"
    );
    assert_eq!(answered, REQUESTS);
}

#[test]
fn a_dropped_call_is_cancelled_on_the_server() {
    let (gave_up, in_flight, dropped) = on_a_shard(|| async {
        let client = Client::new(
            serve(ServerOptions::default(), MemOptions::default()),
            ClientOptions::default(),
        );
        let gave_up = timeout(
            Duration::from_millis(10),
            client.call(Test::ID, 2, Bytes::new()),
        )
        .await
        .is_err();
        let in_flight = client.in_flight();
        // The Cancel frame reaches the server, which drops the handler.
        for _ in 0..5000 {
            if DROPPED.with(Cell::get) > 0 {
                break;
            }
            sleep(Duration::from_millis(1)).await;
        }
        (gave_up, in_flight, DROPPED.with(Cell::get))
    });
    assert!(gave_up);
    assert_eq!(in_flight, 0);
    assert_eq!(dropped, 1);
}

#[test]
fn bad_input_closes_the_connection_and_is_counted() {
    let (end, errors) = on_a_shard(|| async {
        let peer = serve(ServerOptions::default(), MemOptions::default());
        peer.send_raw(Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n"));
        let end = timeout(Duration::from_secs(10), peer.recv()).await.unwrap();
        let errors = corewire_runtime::with_local_stats(|s| s.protocol_errors());
        (end.map(|f| f.is_none()), errors)
    });
    assert!(matches!(end, Ok(true)), "server did not close: {end:?}");
    assert_eq!(errors, 1);
}

/// Deadlines are kept by the call table and ONE timer per connection: fifty pending calls
/// with deadlines arm a single timer; the earliest expires first, as `Timeout`, and the peer
/// is told to cancel it.
#[test]
fn one_timer_per_connection_drives_every_deadline() {
    let (timers_with_50, first, cancelled_id, timed_out_id, still_pending) = on_a_shard(|| async {
        let (ours, peer) = pair(MemOptions::default());
        let client = Client::new(ours, ClientOptions::default());
        let timers_before = corewire_runtime::with_local_stats(|s| s.timers_pending());
        let mut calls = Vec::new();
        for _ in 0..50 {
            let c = client.clone();
            calls.push(spawn_local(async move {
                c.request(Test::ID, 0)
                    .timeout(Duration::from_secs(3600))
                    .send()
                    .await
            }));
        }
        // Let the calls start and the reader arm its timer.
        for _ in 0..10 {
            corewire_runtime::yield_now().await;
        }
        let timers_with_50 =
            corewire_runtime::with_local_stats(|s| s.timers_pending()) - timers_before;
        // A call with an earlier deadline re-arms the one timer and expires first.
        let first = client
            .request(Test::ID, 0)
            .timeout(Duration::from_millis(20))
            .send()
            .await;
        // The peer saw 51 requests, then a Cancel for the expired one.
        let mut last_request = 0;
        let cancelled_id = loop {
            let f = peer.recv().await.unwrap().unwrap();
            match f.header.kind {
                FrameKind::Request => last_request = f.header.correlation_id,
                FrameKind::Cancel => break f.header.correlation_id,
                k => panic!("unexpected {k:?}"),
            }
        };
        let still_pending = client.in_flight();
        drop(calls);
        (
            timers_with_50,
            first,
            cancelled_id,
            last_request,
            still_pending,
        )
    });
    assert_eq!(
        timers_with_50, 1,
        "one timer for all the connection's deadlines"
    );
    assert_eq!(first, Err(ClientError::Timeout));
    assert_eq!(
        cancelled_id, timed_out_id,
        "the expired call is cancelled on the server"
    );
    assert_eq!(still_pending, 50);
}

/// The per-call result slots (`sync::Slots`) end to end, against a peer that answers by hand:
/// a call dropped after its request went out frees its slot, the next call takes that same
/// slot, and the late reply to the dropped call is discarded, never delivered to it; many
/// calls answered in reverse order each get their own reply, and every slot comes back.
#[test]
fn a_late_reply_to_a_dropped_call_never_reaches_the_call_after_it() {
    let (late_ignored, second, many, in_flight) = on_a_shard(|| async {
        let (ours, peer) = pair(MemOptions::default());
        // Window 1: every call uses the same slot.
        let client = Client::new(
            ours,
            ClientOptions {
                window: 1,
                ..ClientOptions::default()
            },
        );
        let first = {
            let client = client.clone();
            spawn_local(async move { client.call(Test::ID, 0, Bytes::from_static(b"first")).await })
        };
        let first_req = peer.recv().await.unwrap().unwrap();
        assert_eq!(first_req.header.kind, FrameKind::Request);
        first.abort();
        // The dropped call is cancelled on the server...
        let cancel = peer.recv().await.unwrap().unwrap();
        assert_eq!(cancel.header.kind, FrameKind::Cancel);
        assert_eq!(
            cancel.header.correlation_id,
            first_req.header.correlation_id
        );
        // ...and the next call takes its slot.
        let second = {
            let client = client.clone();
            spawn_local(async move {
                client
                    .call(Test::ID, 0, Bytes::from_static(b"second"))
                    .await
            })
        };
        let second_req = peer.recv().await.unwrap().unwrap();
        assert_ne!(
            second_req.header.correlation_id,
            first_req.header.correlation_id
        );
        // The late reply to the first call comes before the second's.
        let reply = |req: &FrameHeader| corewire_transport::rpc::response_header(req);
        peer.send(
            &reply(&first_req.header),
            Bytes::from_static(b"late"),
            Bytes::new(),
        )
        .await
        .unwrap();
        for _ in 0..10 {
            corewire_runtime::yield_now().await;
        }
        let late_ignored = !second.is_finished() && client.in_flight() == 1;
        peer.send(
            &reply(&second_req.header),
            Bytes::from_static(b"second"),
            Bytes::new(),
        )
        .await
        .unwrap();
        let second = second.await.unwrap();

        // Many calls on a wider client, answered in reverse order.
        let (ours, peer) = pair(MemOptions::default());
        let client = Client::new(ours, ClientOptions::default());
        let calls: Vec<_> = (0..100u32)
            .map(|i| {
                let client = client.clone();
                spawn_local(async move {
                    client
                        .call(Test::ID, 0, Bytes::from(i.to_be_bytes().to_vec()))
                        .await
                })
            })
            .collect();
        let mut requests = Vec::new();
        while requests.len() < calls.len() {
            requests.push(peer.recv().await.unwrap().unwrap());
        }
        for req in requests.iter().rev() {
            peer.send(&reply(&req.header), req.payload.clone(), Bytes::new())
                .await
                .unwrap();
        }
        let mut many = Vec::new();
        for call in calls {
            many.push(call.await.unwrap().unwrap());
        }
        (late_ignored, second, many, client.in_flight())
    });
    assert!(late_ignored, "the late reply completed the next call");
    assert_eq!(second.unwrap(), Bytes::from_static(b"second"));
    for (i, reply) in many.iter().enumerate() {
        assert_eq!(reply[..], (i as u32).to_be_bytes());
    }
    assert_eq!(in_flight, 0);
}

/// A connection that cannot be made keeps the transport's error: `source()` is the
/// `TransportError`, whose own source is the socket's `io::Error`.
#[test]
fn disconnected_keeps_the_error_underneath_as_source() {
    use corewire_transport::TransportError;
    use std::error::Error;

    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    // A port nobody listens on: bind one, note it, close it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = rt
        .run_on(0, move || async move {
            Client::connect_tcp(addr, ClientOptions::default())
                .await
                .err()
                .expect("nobody listens there")
        })
        .unwrap();
    assert!(matches!(err, ClientError::Disconnected(_)), "{err:?}");
    assert!(err.to_string().starts_with("connection lost: "), "{err}");
    let transport = err.source().unwrap().downcast_ref::<TransportError>();
    let Some(TransportError::Io(io)) = transport else {
        panic!("{:?}", err.source())
    };
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(err.source().unwrap().source().is_some());

    // Timeouts have nothing underneath; a status is its own error.
    assert!(ClientError::Timeout.source().is_none());
    let status = ClientError::Status(Status::BadRequest("no".into()));
    assert!(status.source().unwrap().is::<Status>());
}

/// The server gives up at the deadline a call sent it and answers DeadlineExceeded; when that
/// answer beats the client's own timer, the caller still sees its `Timeout`. A call without
/// a deadline gets the status as the server sent it.
#[test]
fn a_server_deadline_answer_is_the_callers_timeout() {
    let (timed, untimed) = on_a_shard(|| async {
        let (ours, peer) = pair(MemOptions::default());
        let client = Client::new(ours, ClientOptions::default());
        let answer = |req: &FrameHeader| {
            corewire_transport::rpc::error_header(
                req,
                corewire_transport::frame::StatusCode::DeadlineExceeded,
                "",
            )
        };
        let call = {
            let client = client.clone();
            spawn_local(async move {
                (client.request(Test::ID, 0))
                    .timeout(Duration::from_secs(3600))
                    .send()
                    .await
            })
        };
        let req = peer.recv().await.unwrap().unwrap();
        peer.send(&answer(&req.header), Bytes::new(), Bytes::new())
            .await
            .unwrap();
        let timed = call.await.unwrap();
        let call = {
            let client = client.clone();
            spawn_local(async move { client.call(Test::ID, 0, Bytes::new()).await })
        };
        let req = peer.recv().await.unwrap().unwrap();
        peer.send(&answer(&req.header), Bytes::new(), Bytes::new())
            .await
            .unwrap();
        (timed, call.await.unwrap())
    });
    assert_eq!(timed.unwrap_err(), ClientError::Timeout);
    assert_eq!(
        untimed.unwrap_err(),
        ClientError::Status(Status::DeadlineExceeded)
    );
}
