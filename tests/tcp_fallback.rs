//! TCP fallback on a host without RDMA (CI's machines: no RDMA device, so the transport does
//! not install): a client asked to fall back connects over TCP and works as usual; one that
//! was not asked gets the RDMA error. The refused/unreachable cases on real rxe are in
//! `rdma_fallback` (VM).

use std::net::SocketAddr;

use corewire::transport::rdma::{self, RdmaConfig, RdmaOrTcp};
use corewire::transport::{Connection, TransportKind};
use corewire::{Client, ClientOptions, Runtime, Server, Service, TcpEndpoint};
use corewire::{Request, Response, Status};

struct Echo;
impl Service for Echo {
    const ID: u32 = corewire::service_id("echo");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(Response::new(req.payload))
    }
}

fn runtime() -> Runtime {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    // Without a device this fails, and the shard has no RDMA transport: connecting reports
    // that, which is a set-up failure like any other.
    let installed = rdma::install(&rt, RdmaConfig::default());
    assert!(
        installed.is_err() || corewire_verbs::list_devices().is_ok_and(|d| !d.is_empty()),
        "install succeeded without a device"
    );
    rt
}

fn rdma_addr() -> SocketAddr {
    // Nothing listens for RDMA here; with no device it is never even resolved.
    "127.0.0.1:1".parse().unwrap()
}

#[test]
fn without_rdma_the_client_falls_back_to_tcp_and_counts_it() {
    let rt = runtime();
    let tcp = Server::builder()
        .service(|_| Echo)
        .build()
        .serve(&rt, TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let fallback = tcp.local_addr();
    let (kind, reply) = rt
        .run_on(0, move || async move {
            let options = {
                let mut o = ClientOptions::default();
                o.tcp_fallback = Some(fallback);
                o
            };
            let c = Client::<RdmaOrTcp>::connect_rdma_or_tcp(rdma_addr(), options)
                .await
                .unwrap();
            let reply = c.call(Echo::ID, 0, "over tcp".into()).await.unwrap();
            (c.connection().kind(), reply)
        })
        .unwrap();
    assert_eq!(kind, TransportKind::Tcp);
    assert_eq!(&reply[..], b"over tcp");
    assert_eq!(rdma::tcp_fallbacks(&rt), vec![1]);
    tcp.stop();
}

#[test]
fn without_the_setting_there_is_no_fallback() {
    let rt = runtime();
    let err = rt
        .run_on(0, || async {
            Client::<RdmaOrTcp>::connect_rdma_or_tcp(rdma_addr(), ClientOptions::default())
                .await
                .err()
                .map(|e| e.to_string())
        })
        .unwrap();
    let err = err.expect("connected without RDMA and without a fallback");
    assert!(err.to_lowercase().contains("rdma"), "{err}");
    assert!(!err.contains("TCP fallback"), "{err}");
    assert_eq!(rdma::tcp_fallbacks(&rt), vec![0]);
}

#[test]
fn a_failed_fallback_reports_both_errors() {
    let rt = runtime();
    // A port nobody listens on (bound, then closed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = rt
        .run_on(0, move || async move {
            let fallback = rdma::TcpFallback::new(closed);
            rdma::connect_or_tcp(rdma_addr(), Some(&fallback))
                .await
                .err()
                .expect("connected to a closed port")
        })
        .unwrap();
    assert!(err.tcp.is_some(), "{err}");
    assert!(err.to_string().contains("TCP fallback failed"), "{err}");
    assert_eq!(rdma::tcp_fallbacks(&rt), vec![0]);
}
