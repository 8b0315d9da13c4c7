//! The greeter served in-process for the interop tests: gRPC and corewire's TCP framing on a
//! two-shard runtime, plus the Prometheus endpoint.

#![allow(dead_code)] // each test binary uses part of it

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use corewire::runtime::metrics::MetricsServer;
use corewire::{ListenerHandle, Runtime, TcpEndpoint};

pub struct Greeter {
    pub grpc: SocketAddr,
    pub native: SocketAddr,
    pub metrics: SocketAddr,
    // Dropped in this order: listeners and exporter, then the runtime.
    _listeners: Vec<ListenerHandle>,
    _exporter: MetricsServer,
    pub rt: Runtime,
}

pub fn start() -> Greeter {
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    let server = corewire_greeter::server();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let grpc = server.serve_grpc(&rt, TcpEndpoint::bind(any)).unwrap();
    let native = server.serve(&rt, TcpEndpoint::bind(any)).unwrap();
    let exporter = MetricsServer::serve(&rt, 0, any).unwrap();
    Greeter {
        grpc: grpc.local_addr(),
        native: native.local_addr(),
        metrics: exporter.local_addr(),
        _listeners: vec![grpc, native],
        _exporter: exporter,
        rt,
    }
}

/// The Prometheus text the greeter exports now.
pub fn scrape(metrics: SocketAddr) -> String {
    let mut s = TcpStream::connect(metrics).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Calls of `method` that ended with gRPC code `code` (a name: `CANCELLED`), over all shards.
pub fn count(text: &str, method: &str, code: &str) -> u64 {
    let (family, code_label) = if code == "ALL" {
        ("corewire_rpc_requests_total{", String::new())
    } else {
        ("corewire_rpc_errors_total{", format!(",code=\"{code}\""))
    };
    text.lines()
        .filter(|l| l.starts_with(family))
        .filter(|l| l.contains(&format!("method=\"{method}\"")))
        .filter(|l| code_label.is_empty() || l.contains(&code_label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Wait (up to 5 s) until `method` has at least `n` calls ended with `code`.
pub fn wait_for_count(metrics: SocketAddr, method: &str, code: &str, n: u64) -> u64 {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let got = count(&scrape(metrics), method, code);
        if got >= n || Instant::now() > until {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The generated corewire client over `client`'s connection (any transport), on a shard:
/// unary and streaming calls, metadata both ways, a deadline that expires, a call cancelled
/// by dropping it, every status code, an unknown method.
pub async fn typed_calls<C: corewire::transport::Connection>(client: corewire::Client<C>) {
    use corewire::transport::grpc::Code;
    use corewire::typed::Request;
    use corewire::ClientError;
    use corewire_greeter::hellostreams::multi_greeter_client::MultiGreeterClient;
    use corewire_greeter::hellostreams::{FailRequest, ManyHellosRequest, SlowHelloRequest};
    use corewire_greeter::helloworld::greeter_client::GreeterClient;
    use corewire_greeter::helloworld::HelloRequest;

    let greeter = GreeterClient::from_client(client.clone());
    let multi = MultiGreeterClient::from_client(client.clone());

    let reply = greeter
        .say_hello(HelloRequest {
            name: "corewire".into(),
        })
        .await
        .unwrap();
    assert_eq!(reply.get_ref().message, "Hello corewire");

    let mut request = Request::new(HelloRequest { name: "m".into() });
    request.metadata_mut().insert("x-echo", "pong");
    let reply = greeter.say_hello(request).await.unwrap();
    assert_eq!(reply.metadata().get("x-echo"), Some("pong"));

    let mut stream = multi
        .say_hellos(ManyHellosRequest {
            name: "s".into(),
            count: 100,
            interval_ms: 0,
        })
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(m) = stream.message().await.unwrap() {
        got.push(m.message);
    }
    let want: Vec<String> = (0..100).map(|i| format!("Hello s #{i}")).collect();
    assert_eq!(got, want);

    // A deadline that expires.
    let late = Request::new(SlowHelloRequest {
        name: "late".into(),
        delay_ms: 10_000,
    })
    .with_timeout(Duration::from_millis(100));
    let started = Instant::now();
    let err = multi.say_hello_slowly(late).await.unwrap_err();
    assert_eq!(err, ClientError::Timeout);
    assert!(started.elapsed() < Duration::from_secs(5));

    // Cancelled by dropping the call: the server drops its handler (the slow greeting never
    // finishes, so a later call on the same connection answering promptly shows the server
    // is not stuck behind it either).
    let gone = multi.say_hello_slowly(SlowHelloRequest {
        name: "gone".into(),
        delay_ms: 60_000,
    });
    assert!(corewire::timeout(Duration::from_millis(50), gone)
        .await
        .is_err());
    // A stream dropped early.
    let mut forever = multi
        .say_hellos(ManyHellosRequest {
            name: "f".into(),
            count: u32::MAX,
            interval_ms: 1,
        })
        .await
        .unwrap();
    forever.message().await.unwrap().unwrap();
    drop(forever);

    for code in 1..=16u32 {
        let message = format!("failure {code}");
        let err = multi
            .fail(FailRequest {
                code,
                message: message.clone(),
            })
            .await
            .unwrap_err();
        let want = Code::from_value(code).unwrap().to_status(message).unwrap();
        assert_eq!(err, ClientError::Status(want));
    }

    // A method the service does not have.
    let err = client
        .call(
            corewire::service_id("helloworld.Greeter"),
            corewire::service_id("/helloworld.Greeter/SayGoodbye"),
            bytes::Bytes::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        ClientError::Status(corewire::Status::UnknownMethod { .. })
    ));
}
