//! tonic's client — a gRPC implementation we did not write — against the greeter's gRPC
//! listener: unary and streaming calls, metadata both ways, gzip, a deadline that expires, a
//! cancelled call, an unknown method, and every status code with its message.

mod common;

use std::time::Duration;

use corewire_greeter::hellostreams::{FailRequest, ManyHellosRequest, SlowHelloRequest};
use corewire_greeter::helloworld::{HelloReply, HelloRequest};
use http::uri::PathAndQuery;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_prost::ProstCodec;

const SAY_HELLO: &str = "/helloworld.Greeter/SayHello";
const SAY_HELLOS: &str = "/hellostreams.MultiGreeter/SayHellos";
const SLOWLY: &str = "/hellostreams.MultiGreeter/SayHelloSlowly";
const FAIL: &str = "/hellostreams.MultiGreeter/Fail";

type Grpc = tonic::client::Grpc<Channel>;

async fn client(addr: std::net::SocketAddr) -> Grpc {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic::client::Grpc::new(channel)
}

async fn unary<Q, R>(
    grpc: &mut Grpc,
    path: &'static str,
    request: Request<Q>,
) -> Result<tonic::Response<R>, Status>
where
    Q: prost::Message + Send + Sync + 'static,
    R: prost::Message + Default + Send + Sync + 'static,
{
    grpc.ready().await.unwrap();
    grpc.unary(
        request,
        PathAndQuery::from_static(path),
        ProstCodec::default(),
    )
    .await
}

/// `common::wait_for_count` that lets tokio run meanwhile (tonic's connection task sends the
/// client's RST_STREAM from there).
async fn wait_for_count(metrics: std::net::SocketAddr, method: &str, code: &str, n: u64) -> u64 {
    for _ in 0..250 {
        let got = common::count(&common::scrape(metrics), method, code);
        if got >= n {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    common::count(&common::scrape(metrics), method, code)
}

fn hello(name: &str) -> HelloRequest {
    HelloRequest { name: name.into() }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn tonic_calls_the_greeter() {
    let g = common::start();
    runtime().block_on(async {
        let mut grpc = client(g.grpc).await;

        let reply: tonic::Response<HelloReply> =
            unary(&mut grpc, SAY_HELLO, Request::new(hello("tonic")))
                .await
                .unwrap();
        assert_eq!(reply.get_ref().message, "Hello tonic");

        // Metadata in (x-echo) and out (the reply's headers).
        let mut request = Request::new(hello("meta"));
        request
            .metadata_mut()
            .insert("x-echo", "ping".parse().unwrap());
        let reply: tonic::Response<HelloReply> =
            unary(&mut grpc, SAY_HELLO, request).await.unwrap();
        assert_eq!(reply.metadata().get("x-echo").unwrap(), "ping");

        // gzip both ways.
        let mut zipped = grpc
            .clone()
            .send_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Gzip);
        let long = "x".repeat(10_000);
        let reply: tonic::Response<HelloReply> =
            unary(&mut zipped, SAY_HELLO, Request::new(hello(&long)))
                .await
                .unwrap();
        assert_eq!(reply.get_ref().message, format!("Hello {long}"));
        assert_eq!(reply.metadata().get("grpc-encoding").unwrap(), "gzip");
    });
}

#[test]
fn tonic_reads_a_stream() {
    let g = common::start();
    runtime().block_on(async {
        let mut grpc = client(g.grpc).await;
        grpc.ready().await.unwrap();
        let request = Request::new(ManyHellosRequest {
            name: "stream".into(),
            count: 50,
            interval_ms: 0,
        });
        let mut stream = grpc
            .server_streaming::<_, HelloReply, _>(
                request,
                PathAndQuery::from_static(SAY_HELLOS),
                ProstCodec::default(),
            )
            .await
            .unwrap()
            .into_inner();
        let mut got = Vec::new();
        while let Some(m) = stream.message().await.unwrap() {
            got.push(m.message);
        }
        let want: Vec<String> = (0..50).map(|i| format!("Hello stream #{i}")).collect();
        assert_eq!(got, want);
    });
}

#[test]
fn deadlines_cancellation_and_unknown_methods() {
    let g = common::start();
    runtime().block_on(async {
        let mut grpc = client(g.grpc).await;

        // A deadline that expires. tonic runs a timer of its own for it too, so whichever
        // side gives up first ends the call (DEADLINE_EXCEEDED from the server, CANCELLED
        // "Timeout expired" from tonic); either way the server stops the handler then, long
        // before it would have answered. (tests/grpc_edges.rs checks the server's own timer
        // with a client that has none.)
        let mut request = Request::new(SlowHelloRequest {
            name: "late".into(),
            delay_ms: 5_000,
        });
        request.set_timeout(Duration::from_millis(100));
        let started = std::time::Instant::now();
        let err = unary::<_, HelloReply>(&mut grpc, SLOWLY, request)
            .await
            .unwrap_err();
        assert!(
            matches!(err.code(), Code::DeadlineExceeded | Code::Cancelled),
            "{err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(
            wait_for_count(g.metrics, SLOWLY, "ALL", 1).await,
            1,
            "the server did not end the late call"
        );

        // A cancelled call: the client gives up (RST_STREAM); the server drops the handler.
        let call = unary::<_, HelloReply>(
            &mut grpc,
            SLOWLY,
            Request::new(SlowHelloRequest {
                name: "gone".into(),
                delay_ms: 60_000,
            }),
        );
        assert!(tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err());
        // (tonic's own timeout above may have been counted as a cancel too.)
        let cancelled = wait_for_count(g.metrics, SLOWLY, "CANCELLED", 1).await;
        assert!(cancelled >= 1, "the server kept running a cancelled call");

        // A cancelled stream.
        grpc.ready().await.unwrap();
        let mut stream = grpc
            .server_streaming::<_, HelloReply, _>(
                Request::new(ManyHellosRequest {
                    name: "forever".into(),
                    count: u32::MAX,
                    interval_ms: 1,
                }),
                PathAndQuery::from_static(SAY_HELLOS),
                ProstCodec::default(),
            )
            .await
            .unwrap()
            .into_inner();
        stream.message().await.unwrap().unwrap();
        drop(stream);
        assert_eq!(
            wait_for_count(g.metrics, SAY_HELLOS, "CANCELLED", 1).await,
            1,
            "the server kept streaming to a client that left"
        );

        // A method nobody serves.
        let err = unary::<_, HelloReply>(
            &mut grpc,
            "/helloworld.Greeter/SayGoodbye",
            Request::new(hello("x")),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
    });
}

#[test]
fn every_status_code_arrives_with_its_message() {
    let g = common::start();
    runtime().block_on(async {
        let mut grpc = client(g.grpc).await;
        for code in 1..=16 {
            let request = Request::new(FailRequest {
                code,
                message: format!("failure {code}: ünïcode & 100%"),
            });
            let err = unary::<_, HelloReply>(&mut grpc, FAIL, request)
                .await
                .unwrap_err();
            assert_eq!(err.code() as u32, code, "{err:?}");
            // The codes whose corewire status carries no text come with its description.
            let carries_text = ![1, 4, 8].contains(&code);
            if carries_text {
                assert_eq!(err.message(), format!("failure {code}: ünïcode & 100%"));
            }
        }
        let ok: tonic::Response<HelloReply> = unary(
            &mut grpc,
            FAIL,
            Request::new(FailRequest {
                code: 0,
                message: String::new(),
            }),
        )
        .await
        .unwrap();
        assert_eq!(ok.get_ref().message, "Hello, no failure");
    });
}
