//! The greeter served over TCP on a two-shard runtime, called in-process and by the `greet`
//! binary (`#[corewire::main]`); then RDMA asked for where rdma-core may be missing.

use std::net::SocketAddr;
use std::process::Command;

use corewire::transport::rdma::{self, RdmaConfig};
use corewire::{Client, Runtime, Server, Service as _, TcpEndpoint};
use corewire_downstream::Greeter;

fn greet_in_process(rt: &Runtime, addr: SocketAddr, name: &'static str) -> String {
    let reply = rt.run_on(1, move || async move {
        let client = Client::connect_tcp(addr, Default::default()).await?;
        client
            .call(Greeter::ID, Greeter::GREET, name.as_bytes().into())
            .await
    });
    let bytes = reply
        .expect("shard 1 ran the call")
        .expect("the greeter answered");
    String::from_utf8(bytes.to_vec()).expect("UTF-8 reply")
}

#[test]
fn a_tcp_service_works_and_rdma_says_what_is_missing() {
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    let server = Server::builder()
        .service(|_shard| Greeter::default())
        .build();
    let tcp = server
        .serve(&rt, TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let addr = tcp.local_addr();

    assert_eq!(greet_in_process(&rt, addr, "shard"), "hello, shard");

    let out = Command::new(env!("CARGO_BIN_EXE_greet"))
        .args([addr.to_string(), "binary".into()])
        .output()
        .expect("running greet");
    assert!(
        out.status.success(),
        "greet failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello, binary\n");

    // RDMA is one call away; where rdma-core is not installed that call says so, and the
    // rest of the program goes on.
    let installed = rdma::install(&rt, RdmaConfig::default());
    if std::env::var("COREWIRE_DOWNSTREAM_NO_RDMA_CORE").as_deref() == Ok("1") {
        let err = match installed {
            Ok(()) => panic!("rdma::install succeeded although rdma-core is hidden"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("libibverbs.so.1"), "{err}");
        assert!(
            err.contains("apt-get install libibverbs1 librdmacm1 ibverbs-providers"),
            "{err}"
        );
    }
    assert_eq!(greet_in_process(&rt, addr, "again"), "hello, again");
    tcp.stop();
    rt.shutdown();
}
