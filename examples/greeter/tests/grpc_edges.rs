//! The gRPC server against a bare HTTP/2 client (h2), for what well-behaved gRPC clients never
//! do: a deadline with no timer of the client's own, malformed messages and protobufs
//! (the call fails, is counted, the connection's other calls go on), an encoding nobody
//! speaks, gzip replies checked on the wire, and a stream whose reader stops reading (the
//! handler stops within a window).

mod common;

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use corewire::transport::grpc::{compress_gzip, decompress_gzip, encode_prefix};
use corewire::typed::{Request, Response, ServerStream};
use corewire::{Runtime, Server, Status, TcpEndpoint};
use corewire_greeter::hellostreams::multi_greeter_server::{MultiGreeter, MultiGreeterServer};
use corewire_greeter::hellostreams::{FailRequest, ManyHellosRequest, SlowHelloRequest};
use corewire_greeter::helloworld::{HelloReply, HelloRequest};
use h2::client::SendRequest;
use prost::Message as _;

type H2 = SendRequest<Bytes>;

async fn connect(addr: SocketAddr, window: u32) -> H2 {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::Builder::new()
        .initial_window_size(window)
        .handshake(tcp)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

fn framed(message: &impl prost::Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut out = BytesMut::from(&encode_prefix(false, body.len() as u32)[..]);
    out.extend_from_slice(&body);
    out.freeze()
}

struct Reply {
    headers: http::HeaderMap,
    body: Bytes,
    trailers: http::HeaderMap,
}

impl Reply {
    /// The status: from the trailers, or the headers of a trailers-only reply.
    fn status(&self) -> &str {
        self.trailers
            .get("grpc-status")
            .or_else(|| self.headers.get("grpc-status"))
            .expect("a grpc-status")
            .to_str()
            .unwrap()
    }
}

/// Send one request (`body`, then the end of the stream); its response, to come.
async fn send(
    h2: &H2,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> h2::client::ResponseFuture {
    let mut request = http::Request::post(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let mut client = h2.clone().ready().await.unwrap();
    let (response, mut stream) = client
        .send_request(request.body(()).unwrap(), false)
        .unwrap();
    stream.send_data(body, true).unwrap();
    response
}

async fn call(h2: &mut H2, path: &str, headers: &[(&str, &str)], body: Bytes) -> Reply {
    let response = send(h2, path, headers, body).await;
    let (parts, mut recv) = response.await.unwrap().into_parts();
    let mut data = BytesMut::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.unwrap();
        recv.flow_control().release_capacity(chunk.len()).unwrap();
        data.extend_from_slice(&chunk);
    }
    let trailers = recv.trailers().await.unwrap().unwrap_or_default();
    Reply {
        headers: parts.headers,
        body: data.freeze(),
        trailers,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn protocol_errors(metrics: SocketAddr) -> u64 {
    common::scrape(metrics)
        .lines()
        .filter(|l| l.starts_with("corewire_protocol_errors_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

const SAY_HELLO: &str = "/helloworld.Greeter/SayHello";
const SLOWLY: &str = "/hellostreams.MultiGreeter/SayHelloSlowly";

#[test]
fn the_server_keeps_the_deadline_itself() {
    let g = common::start();
    runtime().block_on(async {
        let mut h2 = connect(g.grpc, 65_535).await;
        let started = Instant::now();
        let slow = SlowHelloRequest {
            name: "late".into(),
            delay_ms: 10_000,
        };
        let reply = call(&mut h2, SLOWLY, &[("grpc-timeout", "100m")], framed(&slow)).await;
        assert_eq!(reply.status(), "4");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(100),
            "answered early: {took:?}"
        );
        assert!(took < Duration::from_secs(5), "answered late: {took:?}");
        // A malformed grpc-timeout is refused.
        let reply = call(&mut h2, SLOWLY, &[("grpc-timeout", "soon")], framed(&slow)).await;
        assert_eq!(reply.status(), "3");
    });
}

#[test]
fn malformed_messages_fail_their_call_only() {
    let g = common::start();
    runtime().block_on(async {
        let mut h2 = connect(g.grpc, 65_535).await;
        let before = protocol_errors(g.metrics);
        for (what, body, status) in [
            ("a bad flag", &b"\x07\0\0\0\x01x"[..], "13"),
            ("a message cut short", b"\0\0\0\0\x09abc", "13"),
            (
                "a compressed message, no encoding named",
                b"\x01\0\0\0\x01x",
                "13",
            ),
            // A field 1 whose length runs past the end: no HelloRequest.
            (
                "bytes that are no HelloRequest",
                b"\0\0\0\0\x02\x0a\x7f",
                "3",
            ),
        ] {
            let reply = call(&mut h2, SAY_HELLO, &[], Bytes::from_static(body)).await;
            assert_eq!(reply.status(), status, "{what}");
        }
        assert_eq!(protocol_errors(g.metrics), before + 4, "each counted once");
        // The connection goes on.
        let reply = call(
            &mut h2,
            SAY_HELLO,
            &[],
            framed(&HelloRequest {
                name: "still".into(),
            }),
        )
        .await;
        assert_eq!(reply.status(), "0");
        let message = HelloReply::decode(&reply.body[5..]).unwrap();
        assert_eq!(message.message, "Hello still");
        // An encoding nobody here speaks.
        let reply = call(
            &mut h2,
            SAY_HELLO,
            &[("grpc-encoding", "snappy")],
            Bytes::new(),
        )
        .await;
        assert_eq!(reply.status(), "12");
        assert!(reply.headers.get("grpc-accept-encoding").is_some());
    });
}

#[test]
fn gzip_goes_both_ways_on_the_wire() {
    let g = common::start();
    runtime().block_on(async {
        let mut h2 = connect(g.grpc, 65_535).await;
        let name = "z".repeat(5000);
        let raw = HelloRequest { name: name.clone() }.encode_to_vec();
        let packed = compress_gzip(&raw);
        let mut body = BytesMut::from(&encode_prefix(true, packed.len() as u32)[..]);
        body.extend_from_slice(&packed);
        let reply = call(
            &mut h2,
            SAY_HELLO,
            &[("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")],
            body.freeze(),
        )
        .await;
        assert_eq!(reply.status(), "0");
        assert_eq!(reply.headers["grpc-encoding"], "gzip");
        let mut b = reply.body.clone();
        assert_eq!(b.get_u8(), 1, "the reply's message is compressed");
        let len = b.get_u32() as usize;
        assert!(len < 1000, "5000 z's compress");
        let message = HelloReply::decode(decompress_gzip(&b[..len], 1 << 20).unwrap()).unwrap();
        assert_eq!(message.message, format!("Hello {name}"));
        // A client that accepts only identity gets identity.
        let reply = call(
            &mut h2,
            SAY_HELLO,
            &[],
            framed(&HelloRequest {
                name: "plain".into(),
            }),
        )
        .await;
        assert_eq!(reply.body[0], 0);
        assert!(reply.headers.get("grpc-encoding").is_none());
    });
}

static SENT: AtomicU64 = AtomicU64::new(0);

/// Streams as many greetings as asked, counting each one sent.
#[derive(Default)]
struct Counting {
    streams: Cell<u64>,
}

impl MultiGreeter for Counting {
    async fn say_hellos(
        &self,
        request: Request<ManyHellosRequest>,
        mut replies: ServerStream<HelloReply>,
    ) -> Result<(), Status> {
        self.streams.set(self.streams.get() + 1);
        for i in 0..request.get_ref().count {
            replies
                .send(HelloReply {
                    message: format!("greeting number {i:>10}"),
                })
                .await?;
            SENT.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn say_hello_slowly(
        &self,
        _: Request<SlowHelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Err(Status::Unimplemented("not here".into()))
    }

    fn fail(&self, _: Request<FailRequest>) -> Result<Response<HelloReply>, Status> {
        Err(Status::Unimplemented("not here".into()))
    }
}

#[test]
fn a_stream_reader_that_stops_reading_stops_the_handler() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let server = Server::builder()
        .service(|_| MultiGreeterServer::new(Counting::default()))
        .build();
    let listener = server
        .serve_grpc(&rt, TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let addr = listener.local_addr();
    runtime().block_on(async {
        // A 4 KiB stream window, released only when we read.
        let h2 = connect(addr, 4096).await;
        let ask = ManyHellosRequest {
            name: String::new(),
            count: 20_000,
            interval_ms: 0,
        };
        let path = "/hellostreams.MultiGreeter/SayHellos";
        let response = send(&h2, path, &[], framed(&ask)).await;
        let mut body = response.await.unwrap().into_body();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle = SENT.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            SENT.load(Ordering::Relaxed),
            idle,
            "the handler went on sending"
        );
        // A message is 5 + 2 + 26 bytes: a 4 KiB window holds ~124 of them, plus the one in
        // hyper's hands and the one in the handler's channel.
        assert!(
            idle < 200,
            "{idle} messages sent to a reader that read none"
        );
        // Reading releases the window; the stream runs to its end.
        let mut bytes = 0;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            bytes += chunk.len();
            body.flow_control().release_capacity(chunk.len()).unwrap();
        }
        let trailers = body.trailers().await.unwrap().unwrap();
        assert_eq!(trailers["grpc-status"], "0");
        assert_eq!(bytes, 20_000 * 33);
    });
    assert_eq!(SENT.load(Ordering::Relaxed), 20_000);
    listener.stop();
}
