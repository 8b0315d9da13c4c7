//! RPC over TLS: a `Client` connected with `connect_tls` calling a `Server` served on a
//! `TlsEndpoint` (pipelined calls, large payloads and attachments, mutual TLS), and the abuse
//! a TLS port gets — garbage, half-open handshakes, a handshake that trickles in, a connect
//! storm past the per-shard handshake bound — after which the server still serves and its
//! descriptors are back to their baseline.

mod tls_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::runtime::tls::rustls::pki_types::ServerName;
use corewire::runtime::tls::rustls::ClientConnection;
use corewire::transport::{Connection, TransportKind};
use corewire::ListenerHandle;
use corewire::{
    service_id, Client, ClientOptions, Request, Response, Runtime, Server, Service, Status,
};
use corewire::{TlsAcceptor, TlsConnector, TlsEndpoint};
use tls_common::{
    client_config, protocol_errors, runtime, server_config, wait_for, ClientAuth, TestCa, Usage,
};

const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// Tests that compare the process's descriptors with a baseline run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

struct Echo;
impl Service for Echo {
    const ID: u32 = service_id("echo");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(Response::new(req.payload).with_attachment(req.attachment))
    }
}

fn serve(rt: &Runtime, endpoint: TlsEndpoint) -> ListenerHandle {
    Server::builder()
        .service(|_| Echo)
        .build()
        .serve(rt, endpoint)
        .unwrap()
}

fn localhost() -> ServerName<'static> {
    ServerName::try_from("localhost").unwrap()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Pipelined calls from one client: `calls` echoes of mixed sizes, checked.
fn call_many(addr: SocketAddr, connector: TlsConnector, calls: usize) -> TransportKind {
    runtime(1)
        .run_on(0, move || async move {
            let client =
                Client::connect_tls(addr, &connector, localhost(), ClientOptions::default())
                    .await
                    .unwrap();
            let kind = client.connection().kind();
            let mut pending = Vec::new();
            for i in 0..calls {
                let len = [0, 1, 100, 5000, 70_000][i % 5];
                let payload = Bytes::from(vec![i as u8; len]);
                let attachment = Bytes::from(vec![!(i as u8); len / 3]);
                let client = client.clone();
                pending.push(corewire::spawn_local(async move {
                    let reply = client
                        .request(Echo::ID, 0)
                        .payload(payload.clone())
                        .attachment(attachment.clone())
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(reply.payload, payload);
                    assert_eq!(reply.attachment, attachment);
                }));
            }
            for p in pending {
                p.await.unwrap();
            }
            kind
        })
        .unwrap()
}

#[test]
fn rpc_calls_over_tls() {
    let ca = TestCa::new("rpc CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let rt = runtime(2);
    let server = serve(
        &rt,
        TlsEndpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::None, &[])),
        ),
    );
    let connector = TlsConnector::new(client_config(&ca, None, &[]));
    let kind = call_many(server.local_addr(), connector, 200);
    assert_eq!(kind, TransportKind::Tls);
    assert_eq!(protocol_errors(&rt), 0);
}

#[test]
fn rpc_with_mutual_tls() {
    let ca = TestCa::new("rpc mtls CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let client_leaf = ca.leaf(&["caller"], Usage::Client);
    let rt = runtime(1);
    let server = serve(
        &rt,
        TlsEndpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::Required, &[])),
        ),
    );
    let addr = server.local_addr();
    call_many(
        addr,
        TlsConnector::new(client_config(&ca, Some(&client_leaf), &[])),
        20,
    );
    // Without a certificate the calls fail (the server refuses after the client's side of a
    // TLS 1.3 handshake, so the failure shows on the call).
    let anonymous = TlsConnector::new(client_config(&ca, None, &[]));
    let failed = runtime(1)
        .run_on(0, move || async move {
            match Client::connect_tls(addr, &anonymous, localhost(), ClientOptions::default()).await
            {
                Err(_) => true,
                Ok(client) => client.call(Echo::ID, 0, "hi".into()).await.is_err(),
            }
        })
        .unwrap();
    assert!(failed, "a client without a certificate got an answer");
}

/// The first flight of a real TLS client (its ClientHello record).
fn client_hello() -> Vec<u8> {
    let ca = TestCa::new("hello CA");
    let mut conn =
        ClientConnection::new(Arc::new(client_config(&ca, None, &[])), localhost()).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    hello
}

/// Wait until the server closes `s` (end of stream or reset); whether it did within `limit`.
fn closed_by_server(s: &mut StdStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn abuse_of_the_tls_port_leaves_the_server_serving_and_no_descriptors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ca = TestCa::new("abuse CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let rt = runtime(2);
    let limit = Duration::from_millis(500);
    let server = serve(
        &rt,
        TlsEndpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::None, &[])),
        )
        .handshake_timeout(limit)
        .max_handshakes(4),
    );
    let addr = server.local_addr();
    let connector = TlsConnector::new(client_config(&ca, None, &[]));
    // Warm up (the first connection makes each shard's lazily built state).
    call_many(addr, connector.clone(), 10);
    let baseline = open_fds();
    let errors_before = protocol_errors(&rt);
    let hello = client_hello();

    // Garbage: closed at once.
    for i in 0..50u32 {
        let mut s = StdStream::connect(addr).unwrap();
        let junk: Vec<u8> = (0..200u32).map(|j| (i * 7 + j * 13) as u8).collect();
        s.write_all(&junk).unwrap();
        assert!(
            closed_by_server(&mut s, IO_TIMEOUT),
            "garbage {i} left open"
        );
    }

    // Half-open: half a ClientHello, then nothing; closed at the handshake limit.
    let half: Vec<StdStream> = (0..10)
        .map(|_| {
            let mut s = StdStream::connect(addr).unwrap();
            s.write_all(&hello[..hello.len() / 2]).unwrap();
            s
        })
        .collect();
    // Slow: the ClientHello one byte at a time, 40 ms apart: it cannot finish in time.
    let slow = std::thread::spawn({
        let hello = hello.clone();
        move || {
            let mut s = StdStream::connect(addr).unwrap();
            let started = Instant::now();
            for byte in &hello {
                if s.write_all(&[*byte]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(40));
            }
            let closed = closed_by_server(&mut s, IO_TIMEOUT);
            (closed, started.elapsed())
        }
    });
    for mut s in half {
        assert!(
            closed_by_server(&mut s, IO_TIMEOUT),
            "a half-open handshake left open"
        );
    }
    let (closed, took) = slow.join().unwrap();
    assert!(closed, "the slow handshake was never closed");
    assert!(took >= limit, "closed after {took:?}, before its limit");

    // A connect storm: far more idle connections than handshake slots (4 a shard). Each
    // waits within its own time limit and is closed; none takes TLS state before its turn.
    let storm: Vec<StdStream> = (0..300)
        .map(|_| StdStream::connect(addr).unwrap())
        .collect();
    for mut s in storm {
        assert!(
            closed_by_server(&mut s, IO_TIMEOUT),
            "a storm connection left open"
        );
    }

    // Still serving, and every descriptor of the abuse is gone.
    call_many(addr, connector, 50);
    assert!(
        wait_for(IO_TIMEOUT, || open_fds() <= baseline),
        "descriptors {} -> {}",
        baseline,
        open_fds()
    );
    let counted = protocol_errors(&rt) - errors_before;
    assert!(
        counted >= 50 + 10 + 1 + 300,
        "every bad connection is counted ({counted})"
    );
}
