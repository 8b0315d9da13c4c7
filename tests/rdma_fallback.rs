//! TCP fallback on real rxe (the soft-RoCE VM): RDMA set-up refused (nothing listens for RDMA
//! on the port) or unreachable (no route to the address) makes a client with a fallback
//! connect over TCP, counted; a server that accepts RDMA gets RDMA, not counted. The host
//! without a device is `tcp_fallback`.

mod rdma_common;

use std::net::SocketAddr;

use corewire::transport::rdma::{self, RdmaOrTcp};
use corewire::transport::{Connection, TransportKind};
use corewire::{Client, ClientOptions, Runtime, Server, Service, TcpEndpoint};
use rdma_common::{polling, Echo};

/// An echo call from shard 0 with `tcp_fallback` set: the transport it went over.
fn call(rt: &Runtime, rdma_addr: SocketAddr, fallback: SocketAddr) -> TransportKind {
    let (kind, reply) = rt
        .run_on(0, move || async move {
            let options = {
                let mut o = ClientOptions::default();
                o.tcp_fallback = Some(fallback);
                o
            };
            let c = Client::<RdmaOrTcp>::connect_rdma_or_tcp(rdma_addr, options)
                .await
                .unwrap();
            let reply = c.call(Echo::ID, 0, "hello".into()).await.unwrap();
            (c.connection().kind(), reply)
        })
        .unwrap();
    assert_eq!(&reply[..], b"hello");
    kind
}

/// The RDMA error of connecting to `addr` with no fallback.
fn rdma_error(rt: &Runtime, addr: SocketAddr) -> String {
    rt.run_on(0, move || async move {
        let err = rdma::connect_or_tcp(addr, None).await.err();
        let err = err.expect("an RDMA connection to where none should be possible");
        assert!(err.tcp.is_none());
        err.rdma.to_string()
    })
    .unwrap()
}

fn tcp_echo(rt: &Runtime) -> corewire::ListenerHandle {
    Server::builder()
        .service(|_| Echo)
        .build()
        .serve(rt, TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap()
}

#[test]
fn rdma_refused_falls_back_to_tcp() {
    let rt = rdma_common::runtime(1, polling());
    let tcp = tcp_echo(&rt);
    // rxe answers a connection request to a port nobody listens on with a reject.
    let nobody = rdma_common::rdma_listen_addr();
    let why = rdma_error(&rt, nobody);
    assert!(why.contains("rejected"), "{why}");
    assert_eq!(call(&rt, nobody, tcp.local_addr()), TransportKind::Tcp);
    assert_eq!(rdma::tcp_fallbacks(&rt), vec![1]);
    tcp.stop();
}

#[test]
fn rdma_unreachable_falls_back_to_tcp() {
    let rt = rdma_common::runtime(1, polling());
    let tcp = tcp_echo(&rt);
    // TEST-NET-1: the VM has no route there, so address resolution fails.
    let unreachable: SocketAddr = "192.0.2.1:20000".parse().unwrap();
    let why = rdma_error(&rt, unreachable);
    assert!(why.contains("unreachable"), "{why}");
    assert_eq!(call(&rt, unreachable, tcp.local_addr()), TransportKind::Tcp);
    assert_eq!(rdma::tcp_fallbacks(&rt), vec![1]);
    tcp.stop();
}

#[test]
fn rdma_that_connects_is_used_and_not_counted() {
    let mut s = rdma_common::setup(1, polling());
    let tcp = tcp_echo(&s.rt);
    assert_eq!(call(&s.rt, s.addr, tcp.local_addr()), TransportKind::Rdma);
    assert_eq!(rdma::tcp_fallbacks(&s.rt), vec![0]);
    tcp.stop();
    s.server.take().unwrap().stop();
}
