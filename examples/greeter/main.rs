//! gRPC's helloworld.Greeter and a streaming greeter (`hellostreams.MultiGreeter`), defined in
//! `.proto` files (examples/greeter/proto), implemented once (examples/greeter/src/lib.rs) and
//! served over gRPC for any gRPC client, and over corewire's framing on TCP and RDMA:
//!
//!     cargo run --release --example greeter -- --grpc 127.0.0.1:50051 --native 127.0.0.1:7100 \
//!         [--rdma 10.77.0.1:7200] [--metrics 127.0.0.1:9464] [--shards N]
//!
//! Every flag is optional; a listener not asked for is not started. Stops on Ctrl-C.

use std::net::SocketAddr;

use corewire::runtime::metrics::MetricsServer;
use corewire::transport::rdma::{self, RdmaConfig, RdmaEndpoint};
use corewire::{Runtime, TcpEndpoint};

#[derive(clap::Parser)]
#[command(
    name = "greeter",
    about = "helloworld.Greeter and hellostreams.MultiGreeter over gRPC, TCP and RDMA",
    after_help = "Every listener is optional; one not asked for is not started."
)]
struct Cli {
    /// gRPC (HTTP/2) listener.
    #[arg(long, value_name = "ADDR")]
    grpc: Option<SocketAddr>,
    /// corewire's framing over TCP.
    #[arg(long, value_name = "ADDR")]
    native: Option<SocketAddr>,
    /// corewire's framing over RDMA.
    #[arg(long, value_name = "ADDR")]
    rdma: Option<SocketAddr>,
    /// The runtime's counters in Prometheus text format.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Shards (default: one per CPU).
    #[arg(long, value_name = "N")]
    shards: Option<usize>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = <Cli as clap::Parser>::parse();
    let mut builder = Runtime::builder();
    if let Some(n) = cli.shards {
        builder = builder.shards(n);
    }
    let rt = builder.build()?;
    let server = corewire_greeter::server();
    let mut listeners = Vec::new();
    if let Some(a) = cli.grpc {
        let l = server.serve_grpc(&rt, TcpEndpoint::bind(a))?;
        println!("gRPC (HTTP/2)        on {}", l.local_addr());
        listeners.push(l);
    }
    if let Some(a) = cli.native {
        let l = server.serve(&rt, TcpEndpoint::bind(a))?;
        println!("corewire over TCP    on {}", l.local_addr());
        listeners.push(l);
    }
    if let Some(a) = cli.rdma {
        rdma::install(&rt, RdmaConfig::default())?;
        let l = server.serve(&rt, RdmaEndpoint::bind(a))?;
        println!("corewire over RDMA   on {}", l.local_addr());
        listeners.push(l);
    }
    let metrics = match cli.metrics {
        Some(a) => {
            let m = MetricsServer::serve(&rt, 0, a)?;
            println!("Prometheus metrics   on http://{}/metrics", m.local_addr());
            Some(m)
        }
        None => None,
    };
    if listeners.is_empty() {
        return Err("nothing to serve: give --grpc, --native and/or --rdma ADDR".into());
    }
    println!("{} shards; Ctrl-C stops", rt.shard_count());
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])?;
    signals.forever().next();
    for l in listeners {
        l.stop();
    }
    drop(metrics);
    rt.shutdown();
    Ok(())
}
