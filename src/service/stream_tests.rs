//! Server streaming on corewire's framing over an in-memory pair: every reply arrives in
//! order, a reader that stops reading stops the handler within the stream's window, and a
//! dropped stream cancels the handler.

use std::cell::Cell;
use std::time::Duration;

use bytes::Bytes;
use corewire_runtime::{sleep, spawn_local, timeout};
use corewire_transport::mem::{pair, MemOptions};
use corewire_transport::rpc::STREAM_WINDOW;

use super::tests::on_a_shard;
use super::{dispatch, service_id, Client, ClientError, ClientOptions, MethodInfo, MethodKind};
use super::{Replies, Request, Response, Server, Service, Status};

corewire_runtime::shard_local! {
    static SENT: Cell<u64> = Cell::new(0);
    static ENDED: Cell<Option<bool>> = Cell::new(None);
}

struct Counting;

const COUNT: MethodInfo = MethodInfo::new("/test.Counting/Count", MethodKind::ServerStreaming);
const FAIL: MethodInfo = MethodInfo::new("/test.Counting/Fail", MethodKind::ServerStreaming);
const ECHO: MethodInfo = MethodInfo::new("/test.Counting/Echo", MethodKind::Unary);

impl Service for Counting {
    const ID: u32 = service_id("test.Counting");
    const NAME: &'static str = "test.Counting";
    const METHODS: &'static [MethodInfo] = &[COUNT, FAIL, ECHO];

    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(Response::new(req.payload))
    }

    async fn call_streaming(&self, req: Request, replies: Replies) -> Result<(), Status> {
        let n: u64 = std::str::from_utf8(&req.payload).unwrap().parse().unwrap();
        for i in 0..n {
            let sent = replies
                .send(Response::new(Bytes::from(i.to_string())))
                .await;
            if sent.is_err() {
                ENDED.with(|e| e.set(Some(false)));
                return Err(Status::Cancelled);
            }
            SENT.with(|s| s.set(s.get() + 1));
        }
        ENDED.with(|e| e.set(Some(true)));
        if req.method == FAIL.id {
            return Err(Status::NotFound("no more".into()));
        }
        Ok(())
    }
}

fn client() -> Client<corewire_transport::mem::MemConnection> {
    let server = Server::builder().service(|_| Counting).build();
    let (ours, theirs) = pair(MemOptions::default());
    spawn_local(async move {
        dispatch::serve(theirs, server.services_here(), server.options(), None).await
    });
    Client::new(ours, ClientOptions::default())
}

#[test]
fn every_reply_arrives_in_order_then_the_end() {
    let (got, failed, unary) = on_a_shard(|| async {
        let client = client();
        let mut stream = client
            .call_streaming(Counting::ID, COUNT.id, "100".into())
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some(r) = stream.message().await.unwrap() {
            got.push(String::from_utf8(r.payload.to_vec()).unwrap());
        }
        let mut stream = client
            .call_streaming(Counting::ID, FAIL.id, "3".into())
            .await
            .unwrap();
        let mut n = 0;
        let failed = loop {
            match stream.message().await {
                Ok(Some(_)) => n += 1,
                Ok(None) => panic!("should fail"),
                Err(e) => break (n, e),
            }
        };
        // A unary method of the same service still answers once.
        let unary = client
            .call(Counting::ID, ECHO.id, "x".into())
            .await
            .unwrap();
        (got, failed, unary)
    });
    let want: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    assert_eq!(got, want);
    assert_eq!(
        failed,
        (3, ClientError::Status(Status::NotFound("no more".into())))
    );
    assert_eq!(&unary[..], b"x");
}

#[test]
fn a_reader_that_stops_reading_stops_the_handler() {
    let (sent_while_idle, after) = on_a_shard(|| async {
        let client = client();
        let mut stream = client
            .call_streaming(Counting::ID, COUNT.id, "1000".into())
            .await
            .unwrap();
        // Take one reply, then read nothing for a while.
        stream.message().await.unwrap().unwrap();
        sleep(Duration::from_millis(50)).await;
        let idle = SENT.with(Cell::get);
        sleep(Duration::from_millis(50)).await;
        assert_eq!(SENT.with(Cell::get), idle, "the handler went on sending");
        // Reading again lets it finish.
        let mut n = 1;
        while stream.message().await.unwrap().is_some() {
            n += 1;
        }
        (idle, n)
    });
    // The window of messages the client may hold, the one in the handler's channel and
    // the one taken.
    assert!(
        sent_while_idle <= u64::from(STREAM_WINDOW) + 2,
        "{sent_while_idle} replies sent to a reader that read one"
    );
    assert_eq!(after, 1000);
}

#[test]
fn dropping_the_stream_cancels_the_handler() {
    let ended = on_a_shard(|| async {
        let client = client();
        let mut stream = client
            .call_streaming(Counting::ID, COUNT.id, "1000000".into())
            .await
            .unwrap();
        stream.message().await.unwrap().unwrap();
        drop(stream);
        // The Cancel reaches the server and the handler is dropped (it never returns).
        for _ in 0..100 {
            sleep(Duration::from_millis(5)).await;
            if client.in_flight() == 0 {
                break;
            }
        }
        let ended = ENDED.with(Cell::get);
        // The connection still works.
        let echo = timeout(
            Duration::from_secs(5),
            client.call(Counting::ID, ECHO.id, "y".into()),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(&echo[..], b"y");
        ended
    });
    assert_eq!(
        ended, None,
        "the handler ran to an end after its caller left"
    );
}

#[test]
fn a_deadline_covers_the_whole_stream() {
    let result = on_a_shard(|| async {
        let client = client();
        let mut stream = client
            .request(Counting::ID, COUNT.id)
            .payload("1000000")
            .timeout(Duration::from_millis(30))
            .send_streaming()
            .await
            .unwrap();
        loop {
            match stream.message().await {
                Ok(Some(_)) => sleep(Duration::from_millis(1)).await,
                other => break other,
            }
        }
    });
    assert_eq!(result, Err(ClientError::Timeout));
}

#[test]
fn services_or_methods_with_the_same_id_are_refused() {
    struct A;
    impl Service for A {
        const ID: u32 = service_id("t.ulArLnGV");
        const NAME: &'static str = "t.ulArLnGV";
        async fn call(&self, _: Request) -> Result<Response, Status> {
            Ok(Response::default())
        }
    }
    struct B;
    impl Service for B {
        // Another name, the same FNV-1a hash.
        const ID: u32 = service_id("t.XCSxcQuN");
        const NAME: &'static str = "t.XCSxcQuN";
        async fn call(&self, _: Request) -> Result<Response, Status> {
            Ok(Response::default())
        }
    }
    assert_eq!(A::ID, B::ID);
    let err = Server::builder()
        .service(|_| A)
        .service(|_| B)
        .try_build()
        .err()
        .unwrap();
    assert!(err.contains("same id"), "{err}");
    // The same service registered twice is fine: the later one serves.
    assert!(Server::builder()
        .service(|_| A)
        .service(|_| A)
        .try_build()
        .is_ok());

    struct C;
    impl Service for C {
        const ID: u32 = service_id("t.S");
        const NAME: &'static str = "t.S";
        const METHODS: &'static [MethodInfo] = &[
            MethodInfo::new("/t.S/VWncXijl", MethodKind::Unary),
            MethodInfo::new("/t.S/pdjWDAZQ", MethodKind::Unary),
        ];
        async fn call(&self, _: Request) -> Result<Response, Status> {
            Ok(Response::default())
        }
    }
    let err = Server::builder().service(|_| C).try_build().err().unwrap();
    assert!(err.contains("same id"), "{err}");
}
