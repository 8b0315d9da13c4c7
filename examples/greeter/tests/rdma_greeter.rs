//! The generated corewire client calls the greeter over RDMA (runs in the soft-RoCE VM: test
//! targets named rdma* do): the same service instances that answer gRPC and TCP.

mod common;

use std::net::SocketAddr;

use corewire::transport::rdma::{self, RdmaConfig, RdmaEndpoint};
use corewire::transport::Connection as _;
use corewire::{ClientOptions, Runtime, TcpEndpoint};

const SLOWLY: &str = "/hellostreams.MultiGreeter/SayHelloSlowly";

#[test]
fn the_generated_client_over_rdma() {
    corewire_verbs::testing::require_device();
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    rdma::install(&rt, RdmaConfig::default()).expect("install the RDMA transport");
    let server = corewire_greeter::server();
    let port = 21_000 + (std::process::id() % 1000) as u16;
    let addr = SocketAddr::new(corewire_verbs::testing::rdma_addr(), port);
    let over_rdma = server.serve(&rt, RdmaEndpoint::bind(addr)).unwrap();
    // gRPC beside it, on the same instances.
    let grpc = server
        .serve_grpc(&rt, TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let exporter =
        corewire::runtime::metrics::MetricsServer::serve(&rt, 0, "127.0.0.1:0".parse().unwrap())
            .unwrap();
    rt.run_on(1, move || async move {
        let client = corewire::Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        assert_eq!(
            client.connection().kind(),
            corewire::transport::TransportKind::Rdma
        );
        common::typed_calls(client).await;
    })
    .unwrap();
    assert_eq!(
        common::wait_for_count(exporter.local_addr(), SLOWLY, "ALL", 2),
        2
    );
    over_rdma.stop();
    grpc.stop();
}
