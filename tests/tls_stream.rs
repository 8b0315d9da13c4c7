//! TLS streams (`corewire::runtime::tls`): echo over a `TlsEndpoint` with rustls's blocking
//! client and corewire's own client, TLS 1.2 and 1.3, ALPN and SNI; mutual TLS required,
//! optional and refused; expired and wrongly signed certificates refused; a plaintext client
//! on the TLS port closed and counted; a certificate reload that applies to new connections
//! only; session resumption; hyper over TLS; and the stream's cancel safety (a dropped read
//! loses no plaintext, a dropped write leaves whole records).

mod tls_common;

use std::convert::Infallible;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire::runtime::tls::rustls::pki_types::ServerName;
use corewire::runtime::tls::rustls::{
    self, ClientConfig, ClientConnection, HandshakeKind, ProtocolVersion, StreamOwned,
};
use corewire::runtime::tls::{TlsAccepted, TlsStream};
use corewire::ListenerHandle;
use corewire::{timeout, Runtime};
use corewire::{TlsAcceptor, TlsConnector, TlsEndpoint};
use tls_common::{
    client_config, protocol_errors, runtime, server_config, wait_for, ClientAuth, TestCa, Usage,
};

const IO_TIMEOUT: Duration = Duration::from_secs(20);

fn name(host: &str) -> ServerName<'static> {
    ServerName::try_from(host.to_string()).unwrap()
}

/// Echo every byte back; on end of stream, close with close_notify.
async fn echo(conn: TlsAccepted) {
    let mut buf = BytesMut::new();
    loop {
        match conn.stream.recv_available(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if conn.stream.send_all(buf.split().freeze()).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = conn.stream.shutdown().await;
}

/// An echo server on `shards` shards with `acceptor`.
fn echo_server(rt: &Runtime, acceptor: TlsAcceptor) -> ListenerHandle {
    TlsEndpoint::bind("127.0.0.1:0".parse().unwrap(), acceptor)
        .serve(rt, echo)
        .unwrap()
}

/// rustls's blocking client over a std socket (an independent peer for the server).
fn blocking_client(
    addr: SocketAddr,
    config: ClientConfig,
    host: &str,
) -> std::io::Result<StreamOwned<ClientConnection, StdStream>> {
    let tcp = StdStream::connect(addr)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))?;
    let conn =
        ClientConnection::new(Arc::new(config), name(host)).map_err(std::io::Error::other)?;
    let mut stream = StreamOwned::new(conn, tcp);
    // Drive the handshake to its end (errors surface here rather than at the first read).
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

fn echo_round(stream: &mut StreamOwned<ClientConnection, StdStream>, len: usize, seed: u8) {
    let data: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    stream.write_all(&data).unwrap();
    stream.flush().unwrap();
    let mut back = vec![0u8; len];
    stream.read_exact(&mut back).unwrap();
    assert_eq!(back, data, "echo of {len} bytes");
}

#[test]
fn echo_over_tls_1_2_and_1_3_with_alpn() {
    let ca = TestCa::new("echo CA");
    let leaf = ca.leaf(&["localhost", "127.0.0.1"], Usage::Server);
    let rt = runtime(2);
    let acceptor = TlsAcceptor::new(server_config(
        &leaf,
        &ca,
        ClientAuth::None,
        &[b"h2", b"echo/1"],
    ));
    let server = echo_server(&rt, acceptor);
    let addr = server.local_addr();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let mut config = ClientConfig::builder_with_provider(corewire::runtime::tls::provider())
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(ca.roots())
            .with_no_client_auth();
        config.alpn_protocols = vec![b"echo/1".to_vec()];
        let mut client = blocking_client(addr, config, "localhost").unwrap();
        assert_eq!(client.conn.protocol_version(), Some(version.version));
        assert_eq!(client.conn.alpn_protocol(), Some(&b"echo/1"[..]));
        // Small messages, a message over one record (16 KiB) and several ring chunks.
        for (i, len) in [1, 100, 4096, 16_385, 200_000].into_iter().enumerate() {
            echo_round(&mut client, len, i as u8);
        }
        client.conn.send_close_notify();
        client.flush().unwrap();
        let mut rest = Vec::new();
        // The server answers close_notify with its own.
        client.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }
    assert_eq!(protocol_errors(&rt), 0);
}

#[test]
fn corewire_client_sees_alpn_sni_and_peer_certificates() {
    let ca = TestCa::new("mutual CA");
    let leaf = ca.leaf(&["echo.test"], Usage::Server);
    let client_leaf = ca.leaf(&["client.test"], Usage::Client);
    let rt = runtime(1);
    let acceptor = TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::Required, &[b"h2"]));
    let server = TlsEndpoint::bind("127.0.0.1:0".parse().unwrap(), acceptor)
        .serve(&rt, |conn: TlsAccepted| async move {
            // Report what the server saw, then echo.
            let seen = format!(
                "{:?} {:?} {}",
                conn.stream.server_name(),
                conn.stream
                    .alpn_protocol()
                    .map(|p| String::from_utf8(p).unwrap()),
                conn.stream.peer_certificates().map_or(0, |c| c.len()),
            );
            let _ = conn.stream.send_all(Bytes::from(seen)).await;
            echo(conn).await
        })
        .unwrap();
    let addr = server.local_addr();
    let connector = TlsConnector::new(client_config(&ca, Some(&client_leaf), &[b"h2"]));
    let client_rt = runtime(1);
    let (seen, echoed, alpn) = client_rt
        .run_on(0, move || async move {
            let stream = connector
                .connect_addr(addr, name("echo.test"))
                .await
                .unwrap();
            let mut buf = BytesMut::new();
            while !buf.ends_with(b"1") {
                assert!(stream.recv_available(&mut buf).await.unwrap() > 0);
            }
            let seen = String::from_utf8(buf.split().to_vec()).unwrap();
            let payload = Bytes::from(vec![7u8; 50_000]);
            stream.send_all(payload.clone()).await.unwrap();
            while buf.len() < payload.len() {
                assert!(stream.recv_available(&mut buf).await.unwrap() > 0);
            }
            stream.shutdown().await.unwrap();
            // The server closes with close_notify in turn.
            assert_eq!(
                stream.recv_available(&mut BytesMut::new()).await.unwrap(),
                0
            );
            assert!(stream.peer_closed_cleanly());
            (seen, buf == payload, stream.alpn_protocol())
        })
        .unwrap();
    assert_eq!(seen, "Some(\"echo.test\") Some(\"h2\") 1");
    assert!(echoed);
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
}

#[test]
fn mutual_tls_required_optional_and_refused() {
    let ca = TestCa::new("mtls CA");
    let other_ca = TestCa::new("someone else's CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let good_client = ca.leaf(&["client"], Usage::Client);
    let foreign_client = other_ca.leaf(&["client"], Usage::Client);
    let expired_client = ca.expired_leaf(&["client"], Usage::Client);
    let rt = runtime(1);
    let required = echo_server(
        &rt,
        TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::Required, &[])),
    );
    let optional = echo_server(
        &rt,
        TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::Optional, &[])),
    );

    let connect = |addr, client: Option<&tls_common::Leaf>| -> std::io::Result<()> {
        let mut s = blocking_client(addr, client_config(&ca, client, &[]), "localhost")?;
        // With TLS 1.3 the server judges the client's certificate after the client finished
        // its side of the handshake: the refusal shows on the first exchange.
        s.write_all(b"ping")?;
        s.flush()?;
        let mut back = [0u8; 4];
        s.read_exact(&mut back)?;
        assert_eq!(&back, b"ping");
        Ok(())
    };
    let before = protocol_errors(&rt);
    connect(required.local_addr(), Some(&good_client)).expect("a trusted client certificate");
    connect(optional.local_addr(), Some(&good_client)).expect("optional, with a certificate");
    connect(optional.local_addr(), None).expect("optional, without a certificate");
    assert_eq!(protocol_errors(&rt), before);

    for (what, client) in [
        ("no certificate", None),
        ("a certificate of another CA", Some(&foreign_client)),
        ("an expired certificate", Some(&expired_client)),
    ] {
        assert!(
            connect(required.local_addr(), client).is_err(),
            "required mutual TLS let in a client with {what}"
        );
    }
    assert!(connect(optional.local_addr(), Some(&foreign_client)).is_err());
    assert!(
        wait_for(IO_TIMEOUT, || protocol_errors(&rt) >= before + 4),
        "each refused handshake is counted: {} -> {}",
        before,
        protocol_errors(&rt)
    );
}

#[test]
fn expired_or_wrongly_signed_server_certificates_are_refused() {
    let ca = TestCa::new("trusted CA");
    let rogue = TestCa::new("rogue CA");
    let rt = runtime(1);
    let expired = echo_server(
        &rt,
        TlsAcceptor::new(server_config(
            &ca.expired_leaf(&["localhost"], Usage::Server),
            &ca,
            ClientAuth::None,
            &[],
        )),
    );
    let wrongly_signed = echo_server(
        &rt,
        TlsAcceptor::new(server_config(
            &rogue.leaf(&["localhost"], Usage::Server),
            &rogue,
            ClientAuth::None,
            &[],
        )),
    );
    let wrong_name = echo_server(
        &rt,
        TlsAcceptor::new(server_config(
            &ca.leaf(&["elsewhere.test"], Usage::Server),
            &ca,
            ClientAuth::None,
            &[],
        )),
    );
    for (what, server) in [
        ("expired", &expired),
        ("signed by another CA", &wrongly_signed),
        ("for another name", &wrong_name),
    ] {
        let error = blocking_client(
            server.local_addr(),
            client_config(&ca, None, &[]),
            "localhost",
        )
        .err()
        .unwrap_or_else(|| panic!("a certificate {what} was accepted"));
        assert!(
            error.to_string().contains("certificate") || error.to_string().contains("Certificate"),
            "{what}: {error}"
        );
    }
    // corewire's own client refuses the same way.
    let connector = TlsConnector::new(client_config(&ca, None, &[]));
    let addr = expired.local_addr();
    let refused = runtime(1)
        .run_on(0, move || async move {
            connector.connect_addr(addr, name("localhost")).await.err()
        })
        .unwrap();
    assert!(
        refused.is_some(),
        "corewire's client accepted an expired certificate"
    );
}

#[test]
fn plaintext_on_the_tls_port_is_closed_and_counted() {
    let ca = TestCa::new("plain CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let rt = runtime(1);
    let server = echo_server(
        &rt,
        TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::None, &[])),
    );
    let before = protocol_errors(&rt);
    let mut plain = StdStream::connect(server.local_addr()).unwrap();
    plain.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    plain
        .write_all(b"*1\r\n$4\r\nPING\r\n GET / HTTP/1.1\r\n\r\n")
        .unwrap();
    // The server answers with at most an alert and closes: never an echo.
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!got.windows(4).any(|w| w == b"PING"), "{got:?}");
    assert!(
        wait_for(IO_TIMEOUT, || protocol_errors(&rt) > before),
        "the plaintext client is counted as a protocol error"
    );
    // And the server still serves TLS.
    let mut ok = blocking_client(
        server.local_addr(),
        client_config(&ca, None, &[]),
        "localhost",
    )
    .unwrap();
    echo_round(&mut ok, 10, 1);
}

#[test]
fn a_reloaded_config_applies_to_new_connections_only() {
    let first_ca = TestCa::new("first CA");
    let second_ca = TestCa::new("second CA");
    let rt = runtime(2);
    let acceptor = TlsAcceptor::new(server_config(
        &first_ca.leaf(&["localhost"], Usage::Server),
        &first_ca,
        ClientAuth::None,
        &[],
    ));
    let server = echo_server(&rt, acceptor.clone());
    let addr = server.local_addr();
    let mut old = blocking_client(addr, client_config(&first_ca, None, &[]), "localhost").unwrap();
    echo_round(&mut old, 1000, 1);

    acceptor.reload(server_config(
        &second_ca.leaf(&["localhost"], Usage::Server),
        &second_ca,
        ClientAuth::None,
        &[],
    ));
    assert_eq!(acceptor.generation(), 1);
    // Several connections, so that both shards (reuse-port) see the new config.
    for _ in 0..6 {
        assert!(
            blocking_client(addr, client_config(&first_ca, None, &[]), "localhost").is_err(),
            "a new connection still got the old certificate"
        );
        let mut new =
            blocking_client(addr, client_config(&second_ca, None, &[]), "localhost").unwrap();
        echo_round(&mut new, 100, 2);
    }
    // The connection made before the reload carries on.
    echo_round(&mut old, 5000, 3);
}

#[test]
fn sessions_resume_with_tls_1_3_tickets_and_1_2_ids() {
    let ca = TestCa::new("resume CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let rt = runtime(2);
    let mut config = server_config(&leaf, &ca, ClientAuth::None, &[]);
    config.ticketer = rustls::crypto::ring::Ticketer::new().unwrap();
    let server = echo_server(&rt, TlsAcceptor::new(config));
    let addr = server.local_addr();
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let connector = TlsConnector::new(
            ClientConfig::builder_with_provider(corewire::runtime::tls::provider())
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(ca.roots())
                .with_no_client_auth(),
        );
        let kinds = runtime(1)
            .run_on(0, move || async move {
                let mut kinds = Vec::new();
                for _ in 0..3 {
                    let stream = connector
                        .connect_addr(addr, name("localhost"))
                        .await
                        .unwrap();
                    // One exchange, so the TLS 1.3 tickets sent after the handshake arrive.
                    stream.send_all(Bytes::from_static(b"x")).await.unwrap();
                    let mut buf = BytesMut::new();
                    stream.recv_available(&mut buf).await.unwrap();
                    kinds.push((stream.handshake_kind(), stream.protocol_version()));
                    stream.shutdown().await.unwrap();
                }
                kinds
            })
            .unwrap();
        assert_eq!(kinds[0].0, Some(HandshakeKind::Full), "{kinds:?}");
        assert!(
            kinds[1..]
                .iter()
                .all(|k| k.0 == Some(HandshakeKind::Resumed)),
            "{:?}: later connections resume ({kinds:?})",
            version.version
        );
        assert!(kinds.iter().all(|k| k.1 == Some(version.version)));
    }
    let _ = ProtocolVersion::TLSv1_3;
}

#[test]
fn hyper_serves_http1_over_tls() {
    use corewire::runtime::compat::hyper::Timer;
    use hyper::{body::Incoming, server::conn::http1, service::service_fn, Request, Response};

    async fn hello(req: Request<Incoming>) -> Result<Response<String>, Infallible> {
        Ok(Response::new(format!(
            "hello over TLS: {}\n",
            req.uri().path()
        )))
    }

    let ca = TestCa::new("hyper CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let rt = runtime(1);
    let server = TlsEndpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::None, &[b"http/1.1"])),
    )
    .serve(&rt, |conn: TlsAccepted| async move {
        let _ = http1::Builder::new()
            .timer(Timer)
            .serve_connection(conn.stream, service_fn(hello))
            .await;
    })
    .unwrap();
    let mut client = blocking_client(
        server.local_addr(),
        client_config(&ca, None, &[b"http/1.1"]),
        "localhost",
    )
    .unwrap();
    client
        .write_all(b"GET /path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = Vec::new();
    let _ = client.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.ends_with("hello over TLS: /path\n"), "{response}");
}

/// A connected pair on one shard: the server side's stream and the client side's.
async fn stream_pair(ca: &TestCa) -> (TlsStream, TlsStream) {
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let acceptor = TlsAcceptor::new(server_config(&leaf, ca, ClientAuth::None, &[]));
    let connector = TlsConnector::new(client_config(ca, None, &[]));
    let listener = corewire::runtime::net::TcpListener::bind(
        "127.0.0.1:0".parse().unwrap(),
        Default::default(),
    )
    .unwrap();
    let addr = listener.local_addr();
    let accept = corewire::spawn_local(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        acceptor.accept(tcp).await.unwrap()
    });
    let client = connector
        .connect_addr(addr, name("localhost"))
        .await
        .unwrap();
    (accept.await.unwrap(), client)
}

#[test]
fn a_dropped_read_loses_no_plaintext() {
    let ca = TestCa::new("cancel CA");
    let rt = runtime(1);
    let (received, sent) = rt
        .run_on(0, move || async move {
            let (server, client) = stream_pair(&ca).await;
            let server = std::rc::Rc::new(server);
            // Records of many sizes, sent while the reader keeps giving up.
            let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            let writer = {
                let server = server.clone();
                let data = data.clone();
                corewire::spawn_local(async move {
                    let mut at = 0;
                    let mut size = 1;
                    while at < data.len() {
                        let end = (at + size).min(data.len());
                        server
                            .send_all(Bytes::copy_from_slice(&data[at..end]))
                            .await
                            .unwrap();
                        at = end;
                        size = size * 3 % 20_011 + 1;
                        corewire::runtime::yield_now().await;
                    }
                    server.shutdown().await.unwrap();
                })
            };
            let mut received = BytesMut::new();
            let mut dropped = 0;
            for round in 0u64.. {
                // Reads given almost no time, and every other one dropped after its first
                // poll: on io_uring most are dropped midway; on epoll, which reads at once,
                // those polled while the socket is empty.
                let read = if round % 2 == 0 {
                    timeout(
                        Duration::from_micros(20),
                        client.recv_available(&mut received),
                    )
                    .await
                    .ok()
                } else {
                    let mut read = std::pin::pin!(client.recv_available(&mut received));
                    std::future::poll_fn(|cx| match read.as_mut().poll(cx) {
                        std::task::Poll::Ready(r) => std::task::Poll::Ready(Some(r)),
                        std::task::Poll::Pending => std::task::Poll::Ready(None),
                    })
                    .await
                };
                match read {
                    None => {
                        dropped += 1;
                        corewire::runtime::yield_now().await;
                    }
                    Some(Ok(0)) => break,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => panic!("read failed: {e}"),
                }
            }
            writer.await.unwrap();
            assert!(dropped > 0, "no read was dropped: the test proved nothing");
            (received.to_vec(), data)
        })
        .unwrap();
    assert_eq!(received.len(), sent.len());
    assert!(received == sent, "plaintext lost or reordered");
}

#[test]
fn a_dropped_write_leaves_whole_records() {
    let ca = TestCa::new("write CA");
    let rt = runtime(1);
    let (received, expected) = rt
        .run_on(0, move || async move {
            let (server, client) = stream_pair(&ca).await;
            // The peer reads all along: a flush waits for the kernel to take the bytes, and
            // with nobody reading, what 50 writes left behind may not fit in the socket
            // buffers (epoll sends at the first poll, so it leaves more than io_uring).
            let reader = corewire::spawn_local(async move {
                let mut received = BytesMut::new();
                while !received.ends_with(b"END") {
                    assert!(server.recv_available(&mut received).await.unwrap() > 0);
                }
                received
            });
            let mut expected = Vec::new();
            // Writes dropped after their first poll: what rustls took is sent later, whole.
            for i in 0..50u8 {
                let chunk = Bytes::from(vec![i; 100_000]);
                {
                    let mut write = std::pin::pin!(client.send_all(chunk.clone()));
                    std::future::poll_fn(|cx| {
                        let _ = write.as_mut().poll(cx);
                        std::task::Poll::Ready(())
                    })
                    .await;
                    // The write future is dropped here, after one poll.
                }
                // What went in is a prefix: learn its length from what arrives.
                expected.push(chunk);
            }
            client.flush().await.unwrap();
            client.send_all(Bytes::from_static(b"END")).await.unwrap();
            (reader.await.unwrap().to_vec(), expected)
        })
        .unwrap();
    // Every record decrypted (no tear), and what arrived is, per write, a prefix of it.
    let mut at = 0;
    for chunk in &expected {
        let tag = chunk[0];
        let run = received[at..].iter().take_while(|&&b| b == tag).count();
        assert!(run <= chunk.len());
        at += run;
    }
    assert_eq!(&received[at..], b"END");
}

#[test]
fn hyper_http2_over_tls_with_alpn_h2() {
    use corewire::runtime::compat::hyper::{LocalExecutor, Timer};
    use http_body_util::{BodyExt, Full};
    use hyper::{body::Incoming, server::conn::http2, service::service_fn, Request, Response};

    async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        Ok(Response::new(Full::new(Bytes::from(format!(
            "h2 over TLS: {} {:?}",
            req.uri().path(),
            req.version()
        )))))
    }

    let ca = TestCa::new("h2 CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let rt = runtime(1);
    let server = TlsEndpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        TlsAcceptor::new(server_config(&leaf, &ca, ClientAuth::None, &[b"h2"])),
    )
    .serve(&rt, |conn: TlsAccepted| async move {
        assert_eq!(conn.stream.alpn_protocol().as_deref(), Some(&b"h2"[..]));
        let _ = http2::Builder::new(LocalExecutor)
            .timer(Timer)
            .serve_connection(conn.stream, service_fn(hello))
            .await;
    })
    .unwrap();
    let addr = server.local_addr();
    let connector = TlsConnector::new(client_config(&ca, None, &[b"h2"]));
    let bodies = runtime(1)
        .run_on(0, move || async move {
            let stream = connector
                .connect_addr(addr, name("localhost"))
                .await
                .unwrap();
            assert_eq!(stream.alpn_protocol().as_deref(), Some(&b"h2"[..]));
            let (sender, conn) = hyper::client::conn::http2::Builder::new(LocalExecutor)
                .timer(Timer)
                .handshake::<_, Full<Bytes>>(stream)
                .await
                .unwrap();
            corewire::spawn_local(async move {
                let _ = conn.await;
            });
            // Several streams at once on the one connection.
            let mut calls = Vec::new();
            for i in 0..8 {
                let mut sender = sender.clone();
                calls.push(corewire::spawn_local(async move {
                    let req = Request::builder()
                        .uri(format!("https://localhost/call/{i}"))
                        .body(Full::new(Bytes::new()))
                        .unwrap();
                    let res = sender.send_request(req).await.unwrap();
                    assert!(res.status().is_success());
                    let body = res.into_body().collect().await.unwrap().to_bytes();
                    String::from_utf8(body.to_vec()).unwrap()
                }));
            }
            let mut bodies = Vec::new();
            for call in calls {
                bodies.push(call.await.unwrap());
            }
            bodies
        })
        .unwrap();
    for (i, body) in bodies.iter().enumerate() {
        assert_eq!(body, &format!("h2 over TLS: /call/{i} HTTP/2.0"));
    }
}
