//! Receiving chunks (`recv_chunk`): multishot receive into the shard's buffer ring where the
//! kernel has it, single-shot into the stream's own buffer otherwise (and under
//! `COREWIRE_IO_URING=plain`, which `cargo xtask test` also runs this suite with). Order and
//! content of the bytes, buffers going back to the ring, an idle stream holding none,
//! dropped receives, an exhausted ring, a peer's reset, a stream dropped with chunks queued.

mod common;

use std::future::Future;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::task::Poll;
use std::thread;
use std::time::Duration;

use corewire_runtime::net::{RecvBuffers, TcpStream, UnixStream};
use corewire_runtime::{sleep, spawn_local, timeout, with_local_stats, yield_now, Runtime};

use common::client::{pattern, IO_TIMEOUT};

fn runtime_with(buffers: RecvBuffers) -> Runtime {
    Runtime::builder()
        .shards(1)
        .pin(false)
        .recv_buffers(buffers)
        .build()
        .expect("runtime")
}

/// A listener and a client thread per payload that connects, writes it all, and closes.
fn serve_payloads(
    payloads: Vec<Vec<u8>>,
) -> (SocketAddr, TcpListener, Vec<thread::JoinHandle<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let clients = payloads
        .into_iter()
        .map(|p| {
            thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).expect("connect");
                s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
                s.write_all(&p).expect("write");
            })
        })
        .collect();
    (addr, listener, clients)
}

/// Everything the stream delivers until the peer closes.
async fn read_to_end(stream: &TcpStream) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(chunk) = stream.recv_chunk().await? {
        assert!(!chunk.is_empty(), "an empty chunk is not end-of-stream");
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// After a loop iteration, the shard's gauge of free ring buffers is current.
async fn free_buffers() -> u64 {
    yield_now().await;
    yield_now().await;
    with_local_stats(|s| s.recv_buffers_free())
}

#[test]
fn chunks_arrive_in_order_and_every_buffer_goes_back() {
    let buffers = RecvBuffers::default();
    let rt = runtime_with(buffers);
    let multishot = rt.features().recv_multishot;
    if std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain") {
        assert!(
            !multishot,
            "COREWIRE_IO_URING=plain left multishot receive on"
        );
    }
    let payload = pattern(7, 1 << 20);
    let (_, listener, clients) = serve_payloads(vec![payload.clone()]);
    let (server, _) = listener.accept().unwrap();
    let (got, free, stats) = rt
        .run_on(0, move || async move {
            let stream = TcpStream::from_std(server);
            let got = timeout(IO_TIMEOUT, read_to_end(&stream))
                .await
                .expect("in time")
                .expect("read");
            drop(stream);
            (
                got,
                free_buffers().await,
                with_local_stats(|s| s.snapshot()),
            )
        })
        .unwrap();
    clients.into_iter().for_each(|c| c.join().unwrap());
    assert!(got == payload, "bytes reordered, lost or changed");
    if multishot {
        assert_eq!(free, u64::from(buffers.count), "a buffer was not returned");
        assert!(stats.recv_multishot_arms >= 1, "{stats}");
        assert_eq!(stats.recv_single_shot, 0, "the ring never ran dry: {stats}");
    } else if epoll(&rt) {
        // Readiness receives into the shard's scratch buffer: neither kind of op.
        assert_eq!(
            stats.recv_single_shot + stats.recv_multishot_arms,
            0,
            "{stats}"
        );
    } else {
        assert!(stats.recv_single_shot >= 1, "{stats}");
        assert_eq!(stats.recv_multishot_arms, 0, "{stats}");
    }
}

fn epoll(rt: &Runtime) -> bool {
    rt.backend() == corewire_runtime::Backend::Epoll
}

/// Bundled receives (kernel 6.10+): one completion fills several ring buffers, named only by
/// the first; the driver finds the others by ring position. Buffers are handed back in a
/// scrambled order so ring positions stop matching buffer ids; the bytes must still come in
/// order, whole, and every buffer must go back.
#[test]
fn bundles_deliver_every_buffer_in_order_whatever_order_buffers_come_back() {
    let buffers = RecvBuffers::new(64, 1024);
    let rt = runtime_with(buffers);
    let bundles = rt.features().recv_bundle;
    if matches!(
        std::env::var("COREWIRE_IO_URING").as_deref(),
        Ok("plain" | "nobundle")
    ) {
        assert!(!bundles, "COREWIRE_IO_URING left bundled receives on");
    }
    let payloads: Vec<Vec<u8>> = (0..2).map(|i| pattern(11 + i, 256 << 10)).collect();
    let (_, listener, clients) = serve_payloads(payloads.clone());
    let servers: Vec<_> = (0..2).map(|_| listener.accept().unwrap().0).collect();
    let (got, free, stats) = rt
        .run_on(0, move || async move {
            let mut got = Vec::new();
            for server in servers {
                let stream = TcpStream::from_std(server);
                let read = async {
                    let mut out = Vec::new();
                    let mut held = Vec::new();
                    let mut turn = 0usize;
                    while let Some(chunk) = stream.recv_chunk().await? {
                        out.extend_from_slice(&chunk);
                        held.push(Some(chunk));
                        if held.len() == 5 {
                            // Back to the ring as 3, 0, 4, 1, 2 (rotated each time).
                            turn += 1;
                            for i in [3, 0, 4, 1, 2] {
                                drop(held[(i + turn) % 5].take());
                            }
                            held.clear();
                        }
                    }
                    Ok::<_, std::io::Error>(out)
                };
                got.push(
                    timeout(IO_TIMEOUT, read)
                        .await
                        .expect("in time")
                        .expect("read"),
                );
            }
            (
                got,
                free_buffers().await,
                with_local_stats(|s| s.snapshot()),
            )
        })
        .unwrap();
    clients.into_iter().for_each(|c| c.join().unwrap());
    // The clients connect concurrently: accept order says nothing about which is which.
    let mut got = got;
    got.sort();
    let mut sent = payloads;
    sent.sort();
    for (got, sent) in got.iter().zip(&sent) {
        let first_diff = got.iter().zip(sent).position(|(a, b)| a != b);
        assert!(
            got == sent,
            "bytes reordered, lost or changed: got {} of {}, first difference at {first_diff:?}; {stats}",
            got.len(),
            sent.len()
        );
    }
    if rt.features().recv_multishot {
        assert_eq!(free, u64::from(buffers.count), "a buffer was not returned");
    }
    if bundles {
        assert!(
            stats.recv_bundles > 0,
            "no completion was a bundle: {stats}"
        );
    } else {
        assert_eq!(stats.recv_bundles, 0, "{stats}");
    }
}

/// The point of the ring: a stream waiting for data holds no buffer (only its armed SQE).
#[test]
fn idle_streams_hold_no_receive_buffer() {
    const CONNS: usize = 64;
    let buffers = RecvBuffers::default();
    let rt = runtime_with(buffers);
    let multishot = rt.features().recv_multishot;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let clients: Vec<std::net::TcpStream> = (0..CONNS)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"hello").unwrap();
            c
        })
        .collect();
    let servers: Vec<std::net::TcpStream> =
        (0..CONNS).map(|_| listener.accept().unwrap().0).collect();
    let (free, stats) = rt
        .run_on(0, move || async move {
            let greeted = std::rc::Rc::new(std::cell::Cell::new(0usize));
            let mut tasks = Vec::new();
            for s in servers {
                let greeted = greeted.clone();
                tasks.push(spawn_local(async move {
                    let stream = TcpStream::from_std(s);
                    let first = stream.recv_chunk().await.unwrap().unwrap();
                    assert_eq!(&first[..], b"hello");
                    drop(first);
                    greeted.set(greeted.get() + 1);
                    // Idle from here: the next receive waits until the client closes.
                    let end = stream.recv_chunk().await.unwrap();
                    assert!(end.is_none());
                }));
            }
            // Every stream got its greeting and waits for more.
            let deadline = std::time::Instant::now() + IO_TIMEOUT;
            while greeted.get() < CONNS && std::time::Instant::now() < deadline {
                sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(greeted.get(), CONNS, "not every stream got its greeting");
            let free = free_buffers().await;
            let stats = with_local_stats(|s| s.snapshot());
            drop(tasks);
            (free, stats)
        })
        .unwrap();
    drop(clients);
    assert_eq!(stats.task_panics, 0, "a stream saw the wrong bytes");
    if multishot {
        assert_eq!(
            free,
            u64::from(buffers.count),
            "idle streams hold ring buffers: {stats}"
        );
        assert!(stats.recv_multishot_arms >= CONNS as u64, "{stats}");
        assert_eq!(stats.recv_single_shot, 0, "{stats}");
    } else if epoll(&rt) {
        // Each waiting stream is a waiter on its socket's readiness, with no buffer (a
        // receive takes one only when data is there).
        assert_eq!(stats.recv_single_shot, 0, "{stats}");
        assert_eq!(stats.ops_in_flight, CONNS as u64, "{stats}");
    } else {
        // The fallback: each waiting stream has a single-shot receive with its own buffer.
        assert!(stats.recv_single_shot >= 2 * CONNS as u64, "{stats}");
    }
}

/// A receive future dropped while it waits loses nothing: the bytes that arrive after the
/// drop come out of the next receive. (Each round: poll a receive once, drop it, only then
/// let the client send its next piece.)
#[test]
fn dropped_receives_lose_no_bytes() {
    const PIECES: usize = 100;
    let rt = runtime_with(RecvBuffers::default());
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let payload = pattern(11, PIECES * 1_000);
    let sent = payload.clone();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let client = thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        for piece in sent.chunks(1_000) {
            if go_rx.recv().is_err() {
                return;
            }
            s.write_all(piece).unwrap();
        }
    });
    let (server, _) = listener.accept().unwrap();
    let (got, dropped) = rt
        .run_on(0, move || async move {
            let stream = TcpStream::from_std(server);
            let mut got = Vec::new();
            let mut dropped = 0u32;
            for _ in 0..PIECES {
                let mut receive = Box::pin(stream.recv_chunk());
                let first = std::future::poll_fn(|cx| Poll::Ready(receive.as_mut().poll(cx))).await;
                match first {
                    Poll::Pending => dropped += 1,
                    Poll::Ready(chunk) => got.extend_from_slice(&chunk.unwrap().unwrap()),
                }
                drop(receive);
                go_tx.send(()).unwrap();
                sleep(Duration::from_millis(1)).await;
            }
            drop(go_tx);
            got.extend(
                timeout(IO_TIMEOUT, read_to_end(&stream))
                    .await
                    .unwrap()
                    .unwrap(),
            );
            (got, dropped)
        })
        .unwrap();
    client.join().unwrap();
    assert!(
        dropped > 0,
        "no receive was dropped while waiting; the test proved nothing"
    );
    assert!(got == payload, "a dropped receive lost or reordered bytes");
}

/// Many senders while the shard's consumers are slow: the ring runs dry (ENOBUFS), streams
/// continue single-shot and re-arm later, and every byte arrives in order.
#[test]
fn exhausted_ring_loses_nothing_and_is_counted() {
    const CONNS: usize = 16;
    const EACH: usize = 64 * 1024;
    let buffers = RecvBuffers::new(16, 1024);
    let rt = runtime_with(buffers);
    let multishot = rt.features().recv_multishot;
    let payloads: Vec<Vec<u8>> = (0..CONNS).map(|i| pattern(100 + i as u64, EACH)).collect();
    let (_, listener, clients) = serve_payloads(payloads.clone());
    let servers: Vec<std::net::TcpStream> =
        (0..CONNS).map(|_| listener.accept().unwrap().0).collect();
    let (got, stats) = rt
        .run_on(0, move || async move {
            let tasks: Vec<_> = servers
                .into_iter()
                .map(|s| {
                    spawn_local(async move {
                        let stream = TcpStream::from_std(s);
                        // Arm the receive, then be slow: the kernel keeps filling the ring.
                        let first = stream.recv_chunk().await.unwrap().unwrap();
                        sleep(Duration::from_millis(200)).await;
                        let mut got = first.to_vec();
                        drop(first);
                        got.extend(
                            timeout(IO_TIMEOUT, read_to_end(&stream))
                                .await
                                .unwrap()
                                .unwrap(),
                        );
                        got
                    })
                })
                .collect();
            let mut got = Vec::new();
            for t in tasks {
                got.push(t.await.unwrap());
            }
            (got, with_local_stats(|s| s.snapshot()))
        })
        .unwrap();
    clients.into_iter().for_each(|c| c.join().unwrap());
    // The clients connect concurrently: match streams to payloads by content.
    let (mut got, mut payloads) = (got, payloads);
    got.sort();
    payloads.sort();
    for (i, (g, p)) in got.iter().zip(&payloads).enumerate() {
        assert!(
            g == p,
            "stream {i}: bytes lost or reordered ({} of {})",
            g.len(),
            p.len()
        );
    }
    if multishot {
        assert!(
            stats.recv_buffers_exhausted > 0,
            "the ring never ran dry: {stats}"
        );
        assert!(stats.recv_single_shot > 0, "{stats}");
        // Each exhaustion ends one armed receive; a busy loop would re-arm into the empty
        // ring and count more exhaustions than arms.
        assert!(
            stats.recv_buffers_exhausted <= stats.recv_multishot_arms,
            "{stats}"
        );
    }
}

/// A reset in the middle of a multishot receive: whatever arrived comes out in order, the
/// reset is an error value (or end-of-stream), and every buffer goes back.
#[test]
fn peer_reset_mid_multishot_is_a_value() {
    let buffers = RecvBuffers::default();
    let rt = runtime_with(buffers);
    let multishot = rt.features().recv_multishot;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let payload = pattern(3, 100_000);
    let sent = payload.clone();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let client = thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        go_rx.recv().unwrap();
        s.write_all(&sent[..10_000]).unwrap();
        thread::sleep(Duration::from_millis(20));
        s.write_all(&sent[10_000..]).unwrap();
        // Linger 0: close sends a reset.
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
    });
    let (server, _) = listener.accept().unwrap();
    let (got, end, free) = rt
        .run_on(0, move || async move {
            let stream = TcpStream::from_std(server);
            let reader = spawn_local(async move {
                let mut got = Vec::new();
                let end = loop {
                    match stream.recv_chunk().await {
                        Ok(Some(c)) => got.extend_from_slice(&c),
                        Ok(None) => break None,
                        Err(e) => break Some(e.kind()),
                    }
                };
                (got, end)
            });
            go_tx.send(()).unwrap();
            let (got, end) = timeout(IO_TIMEOUT, reader).await.unwrap().unwrap();
            (got, end, free_buffers().await)
        })
        .unwrap();
    client.join().unwrap();
    assert!(
        payload.starts_with(&got),
        "received bytes are not a prefix of those sent"
    );
    assert!(
        matches!(end, None | Some(std::io::ErrorKind::ConnectionReset)),
        "{end:?}"
    );
    if multishot {
        assert_eq!(free, u64::from(buffers.count), "a buffer was not returned");
    }
}

/// A stream dropped (or closed) with chunks still queued for it gives them back, and its
/// armed receive does not keep the descriptor open.
#[test]
fn stream_dropped_with_chunks_queued_returns_them() {
    let buffers = RecvBuffers::new(64, 1024);
    let rt = runtime_with(buffers);
    let multishot = rt.features().recv_multishot;
    let payloads = vec![pattern(5, 32 * 1024), pattern(6, 32 * 1024)];
    let (_, listener, clients) = serve_payloads(payloads);
    let a = listener.accept().unwrap().0;
    let b = listener.accept().unwrap().0;
    let (free, closed) = rt
        .run_on(0, move || async move {
            let a = TcpStream::from_std(a);
            let b = TcpStream::from_std(b);
            drop(a.recv_chunk().await.unwrap().unwrap());
            drop(b.recv_chunk().await.unwrap().unwrap());
            // The rest arrives into the ring while nobody reads.
            sleep(Duration::from_millis(100)).await;
            drop(a);
            let closed = timeout(IO_TIMEOUT, b.close()).await;
            sleep(Duration::from_millis(20)).await;
            (free_buffers().await, closed)
        })
        .unwrap();
    clients.into_iter().for_each(|c| c.join().unwrap());
    closed
        .expect("close waited forever on the armed receive")
        .expect("close");
    if multishot {
        assert_eq!(
            free,
            u64::from(buffers.count),
            "queued buffers were not returned"
        );
    }
}

#[test]
fn unix_stream_chunks() {
    let rt = runtime_with(RecvBuffers::default());
    let payload = pattern(9, 300_000);
    let expect = payload.clone();
    let got = rt
        .run_on(0, move || async move {
            let (a, b) = UnixStream::pair().unwrap();
            let writer = spawn_local(async move {
                a.send_all(bytes::Bytes::from(payload)).await.unwrap();
            });
            let mut got = Vec::new();
            while let Some(c) = b.recv_chunk().await.unwrap() {
                got.extend_from_slice(&c);
                if got.len() == expect.len() {
                    break;
                }
            }
            writer.await.unwrap();
            got
        })
        .unwrap();
    assert!(got == pattern(9, 300_000));
}

#[test]
fn a_ring_size_that_is_not_a_power_of_two_is_refused() {
    let built = Runtime::builder()
        .shards(1)
        .pin(false)
        .recv_buffers(RecvBuffers::new(100, 4096))
        .build();
    let no_ring = std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain")
        || built.as_ref().is_ok_and(epoll);
    if no_ring {
        // No ring is registered (plain io_uring, or epoll), so its sizes are never checked.
        assert!(built.is_ok());
    } else {
        let err = built.err().expect("a bad ring size was accepted");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    }
}
