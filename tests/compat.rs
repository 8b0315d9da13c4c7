//! The ecosystem adapters (`corewire::runtime::compat`): futures-io and tokio::io over a ring
//! stream, cancellation of reads, bounded writes to a peer that does not read, a tokio-util
//! codec, and hyper serving HTTP/1.1 on a shard, against clients that misbehave.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream as StdStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::runtime::accept::Accepted;
use corewire::runtime::compat::{hyper::Timer, Compat, WRITE_BUFFER};
use corewire::runtime::net::{ListenOptions, TcpListener};
use corewire::TcpEndpoint;
use corewire::{timeout, Runtime};

const IO_TIMEOUT: Duration = Duration::from_secs(20);

fn runtime(shards: usize) -> Runtime {
    Runtime::builder()
        .shards(shards)
        .pin(false)
        .build()
        .unwrap()
}

/// A listener on shard 0 and a blocking client connected to it; `server` gets the accepted
/// stream wrapped in `Compat`.
fn with_peer<F, Fut, T>(server: F) -> (StdStream, corewire::runtime::RemoteHandle<T>, Runtime)
where
    F: FnOnce(Compat) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    let rt = runtime(1);
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = rt.spawn_on(0, move || async move {
        let listener =
            TcpListener::bind("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        tx.send(listener.local_addr()).unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        server(Compat::new(stream)).await
    });
    let addr: SocketAddr = rx.recv().unwrap();
    let client = StdStream::connect(addr).unwrap();
    client.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    client.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    (client, handle, rt)
}

#[test]
fn futures_io_read_write_and_buffered_lines() {
    use futures_util::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let (mut client, server, _rt) = with_peer(|mut io| async move {
        let mut line = String::new();
        io.read_line(&mut line).await.unwrap();
        let mut rest = [0u8; 5];
        io.read_exact(&mut rest).await.unwrap();
        io.write_all(line.to_uppercase().as_bytes()).await.unwrap();
        io.write_all(&rest).await.unwrap();
        io.close().await.unwrap();
        let mut tail = Vec::new();
        io.read_to_end(&mut tail).await.unwrap();
        (line, tail)
    });
    client.write_all(b"hello corewire\nworld").unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 64];
    while reply.len() < 20 {
        let n = client.read(&mut buf).unwrap();
        assert!(n > 0, "early EOF after {reply:?}");
        reply.extend_from_slice(&buf[..n]);
    }
    assert_eq!(&reply, b"HELLO COREWIRE\nworld");
    // `close` shut our write side down: the client reads EOF.
    assert_eq!(client.read(&mut buf).unwrap(), 0);
    client.write_all(b"bye").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let (line, tail) = server.wait().unwrap();
    assert_eq!(line, "hello corewire\n");
    assert_eq!(tail, b"bye");
}

#[test]
fn a_dropped_read_future_loses_no_bytes() {
    let timeouts = Arc::new(AtomicUsize::new(0));
    let seen = timeouts.clone();
    let (mut client, server, _rt) = with_peer(|mut io| async move {
        use tokio::io::AsyncReadExt;
        let mut got = Vec::new();
        let mut buf = [0u8; 3];
        // Reads that time out while data trickles in: each dropped read leaves its receive
        // running inside `io`, and whatever it brings is seen by the next read.
        while got.len() < 12 {
            match timeout(Duration::from_millis(2), io.read(&mut buf)).await {
                Ok(n) => got.extend_from_slice(&buf[..n.unwrap()]),
                Err(_) => {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        got
    });
    // Each chunk goes out only after another read was dropped mid-wait, however the threads
    // are scheduled: at least three dropped reads, each with a receive left running.
    for chunk in [&b"abcd"[..], b"efgh", b"ijkl"] {
        let before = timeouts.load(Ordering::SeqCst);
        let deadline = Instant::now() + IO_TIMEOUT;
        while timeouts.load(Ordering::SeqCst) == before {
            assert!(Instant::now() < deadline, "no read timed out");
            std::thread::sleep(Duration::from_millis(1));
        }
        client.write_all(chunk).unwrap();
    }
    let got = server.wait().unwrap();
    assert_eq!(got, b"abcdefghijkl");
    assert!(timeouts.load(Ordering::SeqCst) >= 3);
}

#[test]
fn writes_to_a_peer_that_stops_reading_are_bounded() {
    let (client, server, _rt) = with_peer(|mut io| async move {
        use tokio::io::AsyncWriteExt;
        let chunk = vec![7u8; 16 * 1024];
        let mut accepted = 0usize;
        let mut max_pending = 0usize;
        let started = Instant::now();
        loop {
            match timeout(Duration::from_millis(200), io.write(&chunk)).await {
                Ok(n) => accepted += n.unwrap(),
                Err(_) => break, // the writer is held back: the point of the test
            }
            max_pending = max_pending.max(io.pending_write());
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "writer never stopped ({accepted} bytes accepted)"
            );
        }
        (accepted, max_pending)
    });
    let (accepted, max_pending) = server.wait().unwrap();
    assert!(max_pending <= WRITE_BUFFER, "{max_pending} bytes buffered");
    // Accepted bytes are in our buffer or the two kernel socket buffers: never unbounded.
    assert!(accepted < 64 << 20, "{accepted} bytes accepted");
    drop(client);
}

#[test]
fn tokio_util_length_delimited_echo() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_util::codec::{Framed, LengthDelimitedCodec};
    let (mut client, server, _rt) = with_peer(|io| async move {
        let mut framed = Framed::new(io, LengthDelimitedCodec::new());
        let mut n = 0;
        while let Some(frame) = framed.next().await {
            framed.send(frame.unwrap().freeze()).await.unwrap();
            n += 1;
        }
        n
    });
    let frames: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; i as usize * 97]).collect();
    for f in &frames {
        client.write_all(&(f.len() as u32).to_be_bytes()).unwrap();
        client.write_all(f).unwrap();
    }
    for f in &frames {
        let mut len = [0u8; 4];
        client.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        client.read_exact(&mut body).unwrap();
        assert_eq!(&body, f);
    }
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(server.wait().unwrap(), 50);
}

/// hyper's http1 server on every shard; counts the requests it answered.
fn hyper_server(rt: &Runtime, body_len: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    use http_body_util::Full;
    use hyper::{server::conn::http1, service::service_fn, Request, Response};
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    let handle = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
        .serve(rt, move |conn: Accepted| {
            let counter = counter.clone();
            async move {
                let body = Bytes::from(vec![b'x'; body_len]);
                let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let body = body.clone();
                    async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
                });
                let _ = http1::Builder::new()
                    .timer(Timer)
                    .header_read_timeout(Duration::from_secs(5))
                    .serve_connection(Compat::new(conn.stream), service)
                    .await;
            }
        })
        .unwrap();
    let addr = handle.local_addr();
    std::mem::forget(handle); // lives as long as the runtime
    (addr, served)
}

fn read_response(client: &mut StdStream) -> (String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(client.read(&mut byte).unwrap(), 1, "EOF in headers");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_owned)
        })
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    client.read_exact(&mut body).unwrap();
    (head, body)
}

#[test]
fn hyper_serves_keep_alive_requests_on_every_shard() {
    let rt = runtime(2);
    let (addr, served) = hyper_server(&rt, 5);
    for _ in 0..4 {
        let mut client = StdStream::connect(addr).unwrap();
        client.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        for _ in 0..3 {
            client
                .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            let (head, body) = read_response(&mut client);
            assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
            assert_eq!(body, b"xxxxx");
        }
    }
    assert_eq!(served.load(Ordering::SeqCst), 12);
    let per_shard: Vec<u64> = rt
        .stats()
        .iter()
        .map(|s| s.accepted + s.handoffs_in)
        .collect();
    assert!(per_shard.iter().sum::<u64>() >= 4, "{per_shard:?}");
}

#[test]
fn hyper_closes_a_connection_that_sends_garbage() {
    let rt = runtime(1);
    let (addr, served) = hyper_server(&rt, 5);
    let mut client = StdStream::connect(addr).unwrap();
    client.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    client
        .write_all(b"\x16\x03\x01 this is not http\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    client.read_to_end(&mut out).unwrap();
    assert!(
        out.is_empty() || out.starts_with(b"HTTP/1.1 400"),
        "{out:?}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 0);
    // The shard carries on.
    let mut good = StdStream::connect(addr).unwrap();
    good.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    good.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(read_response(&mut good).0.starts_with("HTTP/1.1 200"));
}

#[test]
fn hyper_stops_reading_from_a_client_that_stops_reading() {
    let rt = runtime(1);
    let body_len = 256 * 1024;
    let (addr, served) = hyper_server(&rt, body_len);
    let client = StdStream::connect(addr).unwrap();
    client
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // 2000 pipelined requests would be 500 MiB of responses; the client never reads one.
    let request = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut writer = client.try_clone().unwrap();
    let mut sent = 0;
    for _ in 0..2000 {
        if writer.write_all(request).is_err() {
            break; // the server stopped reading: its receive buffer and ours are full
        }
        sent += 1;
    }
    // Answered responses sit in the adapter's buffer (WRITE_BUFFER), hyper's and the kernel's
    // socket buffers: a bounded number, far below what was asked for. Watch the count until
    // it stops moving (three samples 300 ms apart agree: no progress while nobody reads),
    // failing as soon as it passes the bound; a slow shard only makes this take longer.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answered = served.load(Ordering::SeqCst);
    let mut steady = 0;
    while steady < 3 {
        assert!(
            Instant::now() < deadline,
            "still answering a non-reader after a minute ({answered} of {sent})"
        );
        std::thread::sleep(Duration::from_millis(300));
        let now = served.load(Ordering::SeqCst);
        assert!(
            now < 100,
            "{now} of {sent} requests answered to a non-reader"
        );
        steady = if now == answered { steady + 1 } else { 0 };
        answered = now;
    }
    drop((client, writer));
}

/// The adapters over Unix streams: a tokio-util codec echo between a listener's connection
/// and a client (futures-io on the client side), and a dropped read that loses no bytes.
#[corewire::test]
async fn unix_streams_through_the_adapters() {
    use corewire::runtime::net::{UnixListener, UnixStream};
    use futures_util::io::{AsyncReadExt, AsyncWriteExt};
    use futures_util::{SinkExt, StreamExt};
    use tokio_util::codec::{Framed, LengthDelimitedCodec};

    let dir = std::env::temp_dir().join(format!("corewire-compat-unix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("codec.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = corewire::spawn_local(async move {
        let conn = listener.accept().await.unwrap();
        let mut framed = Framed::new(Compat::new(conn), LengthDelimitedCodec::new());
        while let Some(frame) = framed.next().await {
            framed.send(frame.unwrap().freeze()).await.unwrap();
        }
    });
    let mut client = Compat::new(UnixStream::connect(&path).await.unwrap());
    for i in 0..20u8 {
        let body = vec![i; i as usize * 301];
        client
            .write_all(&(body.len() as u32).to_be_bytes())
            .await
            .unwrap();
        client.write_all(&body).await.unwrap();
        client.flush().await.unwrap();
        let mut len = [0u8; 4];
        client.read_exact(&mut len).await.unwrap();
        let mut echoed = vec![0u8; u32::from_be_bytes(len) as usize];
        client.read_exact(&mut echoed).await.unwrap();
        assert_eq!(echoed, body);
    }
    client.close().await.unwrap();
    timeout(IO_TIMEOUT, server).await.unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    // A read dropped while it waits leaves its receive in the Compat: no byte is lost.
    let (a, b) = UnixStream::pair().unwrap();
    let (mut a, b) = (Compat::new(a), b);
    let mut byte = [0u8; 1];
    assert!(timeout(Duration::from_millis(5), a.read(&mut byte))
        .await
        .is_err());
    b.send_all(Bytes::from_static(b"kept")).await.unwrap();
    let mut got = [0u8; 4];
    timeout(IO_TIMEOUT, a.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got, b"kept");
}
