//! The cost of TLS per core: echo and RPC over TCP and over TLS, one server shard pinned to
//! one CPU and one client shard pinned to another, in the same process. For each of
//! echo-tcp, echo-tls, rpc-tcp, rpc-tls it reports requests/s and the server shard's CPU
//! per request (its thread's utime+stime), then the µs per request TLS adds.
//!
//! ```sh
//! cargo run --release --example tls_bench -- [--seconds 5] [--conns 64] [--depth 4] \
//!     [--size 64] [--server-cpu 0] [--client-cpu 1] [--only echo|rpc]
//! ```
//! Certificates are made at start (rcgen); the session is TLS 1.3 with AES-128-GCM (rustls's
//! first choice on this machine).

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use corewire::runtime::accept::Accepted;
use corewire::runtime::net::TcpStream;
use corewire::runtime::tls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use corewire::runtime::tls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use corewire::runtime::tls::{self, TlsAccepted, TlsStream};
use corewire::{
    service_id, Client, ClientOptions, Request, Response, Runtime, Server, Service, Status,
};
use corewire::{ListenerHandle, TcpEndpoint};
use corewire::{TlsAcceptor, TlsConnector, TlsEndpoint};

struct Echo;
impl Service for Echo {
    const ID: u32 = service_id("echo");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(Response::new(req.payload))
    }
}

#[derive(clap::Parser)]
#[command(
    name = "tls_bench",
    about = "RPC echo over TCP and over TLS, side by side"
)]
struct Args {
    /// Measured seconds per row.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Client connections.
    #[arg(long, default_value_t = 64)]
    conns: usize,
    /// Calls in flight per connection.
    #[arg(long, default_value_t = 4)]
    depth: usize,
    /// Payload bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// The server shard's CPU.
    #[arg(long, default_value_t = 0)]
    server_cpu: usize,
    /// The client shard's CPU.
    #[arg(long, default_value_t = 1)]
    client_cpu: usize,
    /// Only the rows of this kind.
    #[arg(long, value_name = "echo|rpc")]
    only: Option<String>,
}

fn args() -> Args {
    <Args as clap::Parser>::parse()
}

/// A self-signed certificate for "localhost", and configs that use and trust it.
fn configs() -> (ServerConfig, ClientConfig) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der: CertificateDer<'static> = cert.der().clone();
    let key = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let server = ServerConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der.clone()], key)
        .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(der).unwrap();
    let client = ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (server, client)
}

/// utime+stime of the server's shard thread (named "bench-srv-0"), in seconds.
fn server_cpu_seconds() -> f64 {
    let ticks = 100.0; // CLK_TCK on Linux
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim().starts_with("bench-srv") {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let f: Vec<&str> = after.split_whitespace().collect();
            let (u, s): (f64, f64) = (f[11].parse().unwrap(), f[12].parse().unwrap());
            return (u + s) / ticks;
        }
    }
    panic!("server shard thread not found");
}

/// An echo stream: TCP or TLS.
enum Stream {
    Tcp(TcpStream),
    Tls(TlsStream),
}

impl Stream {
    async fn recv(&self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.recv_available(buf).await,
            Stream::Tls(s) => s.recv_available(buf).await,
        }
    }
    async fn send(&self, bytes: Bytes) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.send_all(bytes).await,
            Stream::Tls(s) => s.send_all(bytes).await,
        }
    }
}

async fn echo(stream: Stream) {
    let mut buf = BytesMut::new();
    while let Ok(n) = stream.recv(&mut buf).await {
        if n == 0 || stream.send(buf.split().freeze()).await.is_err() {
            break;
        }
    }
}

fn serve(server_rt: &Runtime, kind: &str, acceptor: &TlsAcceptor) -> ListenerHandle {
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    match kind {
        "echo-tcp" => TcpEndpoint::bind(addr)
            .serve(server_rt, |a: Accepted| echo(Stream::Tcp(a.stream)))
            .unwrap(),
        "echo-tls" => TlsEndpoint::bind(addr, acceptor.clone())
            .serve(server_rt, |a: TlsAccepted| echo(Stream::Tls(a.stream)))
            .unwrap(),
        "rpc-tcp" => rpc_server()
            .serve(server_rt, TcpEndpoint::bind(addr))
            .unwrap(),
        "rpc-tls" => rpc_server()
            .serve(server_rt, TlsEndpoint::bind(addr, acceptor.clone()))
            .unwrap(),
        _ => unreachable!(),
    }
}

fn rpc_server() -> Server {
    Server::builder().service(|_| Echo).build()
}

/// Run the client side for `a.seconds`: the requests completed.
fn drive(
    client_rt: &Runtime,
    kind: &'static str,
    addr: SocketAddr,
    connector: TlsConnector,
    a: &Args,
) -> u64 {
    let (conns, depth, size, secs) = (a.conns, a.depth, a.size, a.seconds);
    client_rt
        .run_on(0, move || async move {
            let done = Rc::new(Cell::new(0u64));
            let stop = Instant::now() + Duration::from_secs(secs);
            let name = ServerName::try_from("localhost").unwrap();
            let mut tasks = Vec::new();
            for _ in 0..conns {
                let (done, connector, name) = (done.clone(), connector.clone(), name.clone());
                tasks.push(corewire::spawn_local(async move {
                    let payload = Bytes::from(vec![7u8; size]);
                    match kind {
                        "echo-tcp" | "echo-tls" => {
                            let tcp = TcpStream::connect(addr).await.unwrap();
                            let stream = if kind == "echo-tls" {
                                Stream::Tls(connector.connect(name, tcp).await.unwrap())
                            } else {
                                Stream::Tcp(tcp)
                            };
                            // `depth` messages in flight: send them, then one more per echo.
                            let batch: Vec<u8> = payload.repeat(depth);
                            stream.send(Bytes::from(batch)).await.unwrap();
                            let mut buf = BytesMut::new();
                            let mut owed = 0usize;
                            while Instant::now() < stop {
                                let n = stream.recv(&mut buf).await.unwrap();
                                assert!(n > 0);
                                owed += buf.len();
                                buf.clear();
                                let whole = owed / size;
                                owed %= size;
                                done.set(done.get() + whole as u64);
                                if whole > 0 {
                                    let more = payload.repeat(whole);
                                    stream.send(Bytes::from(more)).await.unwrap();
                                }
                            }
                        }
                        _ => {
                            let client = if kind == "rpc-tls" {
                                let c = Client::connect_tls(
                                    addr,
                                    &connector,
                                    name,
                                    ClientOptions::default(),
                                )
                                .await
                                .unwrap();
                                Err(c)
                            } else {
                                Ok(Client::connect_tcp(addr, ClientOptions::default())
                                    .await
                                    .unwrap())
                            };
                            let mut lanes = Vec::new();
                            for _ in 0..depth {
                                let (client, done, payload) =
                                    (client.clone(), done.clone(), payload.clone());
                                lanes.push(corewire::spawn_local(async move {
                                    while Instant::now() < stop {
                                        match &client {
                                            Ok(c) => {
                                                c.call(Echo::ID, 0, payload.clone()).await.unwrap()
                                            }
                                            Err(c) => {
                                                c.call(Echo::ID, 0, payload.clone()).await.unwrap()
                                            }
                                        };
                                        done.set(done.get() + 1);
                                    }
                                }));
                            }
                            for lane in lanes {
                                lane.await.unwrap();
                            }
                        }
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            done.get()
        })
        .unwrap()
}

fn main() {
    let a = args();
    let (server_config, client_config) = configs();
    let acceptor = TlsAcceptor::new(server_config);
    let connector = TlsConnector::new(Arc::new(client_config));
    println!(
        "| workload | conns x depth | size B | requests/s | server CPU µs/req |\n|---|---|---|---|---|"
    );
    let mut cpu_per_req = std::collections::HashMap::new();
    for kind in ["echo-tcp", "echo-tls", "rpc-tcp", "rpc-tls"] {
        if a.only.as_deref().is_some_and(|o| !kind.starts_with(o)) {
            continue;
        }
        let server_rt = Runtime::builder()
            .shards(1)
            .cpus(vec![a.server_cpu])
            .pin(true)
            .name("bench-srv")
            .build()
            .unwrap();
        let client_rt = Runtime::builder()
            .shards(1)
            .cpus(vec![a.client_cpu])
            .pin(true)
            .name("bench-cli")
            .build()
            .unwrap();
        let listener = serve(&server_rt, kind, &acceptor);
        let cpu_before = server_cpu_seconds();
        let started = Instant::now();
        let done = drive(
            &client_rt,
            kind,
            listener.local_addr(),
            connector.clone(),
            &a,
        );
        let elapsed = started.elapsed().as_secs_f64();
        let cpu = server_cpu_seconds() - cpu_before;
        let us = cpu * 1e6 / done.max(1) as f64;
        cpu_per_req.insert(kind, us);
        println!(
            "| {kind} | {} x {} | {} | {:.0} | {:.2} |",
            a.conns,
            a.depth,
            a.size,
            done as f64 / elapsed,
            us
        );
        listener.stop();
        drop(client_rt);
        drop(server_rt);
    }
    for (tls, tcp) in [("echo-tls", "echo-tcp"), ("rpc-tls", "rpc-tcp")] {
        if let (Some(t), Some(p)) = (cpu_per_req.get(tls), cpu_per_req.get(tcp)) {
            println!(
                "{tls}: TLS adds {:.2} µs of server CPU per request ({:.2}x)",
                t - p,
                t / p
            );
        }
    }
}
