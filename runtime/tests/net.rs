//! TcpStream on the ring: round trips of every size class, many concurrent connections,
//! connecting from a shard, cancelled receives, and vectored sends that the kernel splits.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire_runtime::accept::{AcceptMode, Placement};
use corewire_runtime::net::TcpStream;
use corewire_runtime::{spawn_local, timeout, with_local_stats, Budget};

use common::client::{echo_on_shard, pattern, read_frame_on_shard, IO_TIMEOUT};
use common::echo;

const MIB: usize = 1 << 20;

/// A 2-shard runtime whose echo server keeps every connection on shard 0, leaving shard 1
/// to the client under test.
fn server_on_shard_0() -> (corewire_runtime::Runtime, echo::EchoServer) {
    let rt = common::runtime(2);
    let server = echo::start(
        &rt,
        AcceptMode::handoff(Placement::Fixed(0)),
        Budget::default(),
        2 * MIB,
    );
    (rt, server)
}

#[test]
fn echo_round_trips_from_empty_to_one_mib() {
    let (rt, server) = server_on_shard_0();
    let addr = server.addr();
    let sizes: Vec<usize> = vec![
        0,
        1,
        3,
        4,
        5,
        100,
        4095,
        4096,
        4097,
        65535,
        65536,
        65537,
        300_000,
        MIB / 2,
        MIB - 1,
        MIB,
    ];
    let checked = rt
        .run_on(1, move || async move {
            let stream = TcpStream::connect(addr).await?;
            let mut buf = BytesMut::new();
            for (i, &size) in sizes.iter().enumerate() {
                echo_on_shard(&stream, &mut buf, &pattern(i as u64, size)).await?;
            }
            assert!(buf.is_empty(), "no stray bytes after the last reply");
            std::io::Result::Ok(sizes.len())
        })
        .unwrap()
        .unwrap();
    assert_eq!(checked, 16);
    assert_eq!(server.config.counters.messages(), 16);
}

/// Pipelined frames of mixed sizes on one connection come back intact and in order.
#[test]
fn pipelined_frames_come_back_in_order() {
    let (rt, server) = server_on_shard_0();
    let addr = server.addr();
    rt.run_on(1, move || async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        let payloads: Vec<Vec<u8>> = (0..300)
            .map(|i| pattern(i, (i as usize * 977) % 20_000))
            .collect();
        let mut wire = Vec::new();
        for p in &payloads {
            wire.extend_from_slice(&common::client::frame(p));
        }
        stream.send_all(Bytes::from(wire)).await.unwrap();
        let mut buf = BytesMut::new();
        for (i, p) in payloads.iter().enumerate() {
            let got = read_frame_on_shard(&stream, &mut buf).await.unwrap();
            assert_eq!(&got[..], &p[..], "frame {i}");
        }
    })
    .unwrap();
}

#[test]
fn many_concurrent_connections_stay_independent() {
    const CONNS: u64 = 200;
    const ROUNDS: u64 = 10;
    let server_rt = common::runtime(2);
    let server = echo::start(&server_rt, AcceptMode::ReusePort, Budget::default(), MIB);
    let addr = server.addr();
    let clients = common::runtime(2);
    let handles = clients.spawn_on_all(move |shard| async move {
        let tasks: Vec<_> = (0..CONNS / 2)
            .map(|i| {
                let id = shard as u64 * 1000 + i;
                spawn_local(async move {
                    let stream = TcpStream::connect(addr).await?;
                    let mut buf = BytesMut::new();
                    for round in 0..ROUNDS {
                        let p = pattern(id * 100 + round, 1 + ((id + round) as usize * 131) % 3000);
                        echo_on_shard(&stream, &mut buf, &p).await?;
                    }
                    std::io::Result::Ok(())
                })
            })
            .collect();
        let mut ok = 0;
        for t in tasks {
            t.await.unwrap().unwrap();
            ok += 1;
        }
        ok
    });
    let done: u64 = handles.into_iter().map(|h| h.wait().unwrap()).sum();
    assert_eq!(done, CONNS);
    assert_eq!(server.config.counters.messages(), CONNS * ROUNDS);
    let accepted: u64 = server_rt.stats().iter().map(|s| s.accepted).sum();
    assert_eq!(accepted, CONNS);
}

#[test]
fn connect_from_a_shard_to_a_plain_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut got = [0u8; 5];
        s.read_exact(&mut got).unwrap();
        s.write_all(b"world").unwrap();
        got
    });
    let rt = common::runtime(1);
    let (reply, local, peer_seen) = rt
        .run_on(0, move || async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            stream.send_all(Bytes::from_static(b"hello")).await.unwrap();
            let mut buf = BytesMut::new();
            while buf.len() < 5 {
                let (res, b) = stream.recv(buf, 64).await;
                buf = b;
                assert!(res.unwrap() > 0, "early EOF");
            }
            (
                buf.to_vec(),
                stream.local_addr().unwrap(),
                stream.peer_addr().unwrap(),
            )
        })
        .unwrap();
    assert_eq!(&peer.join().unwrap(), b"hello");
    assert_eq!(reply, b"world");
    assert_eq!(peer_seen, addr);
    assert!(local.ip().is_loopback());
}

#[test]
fn connect_to_a_closed_port_is_an_error_not_a_panic() {
    // Bind then drop to get a port nobody listens on.
    let addr: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let rt = common::runtime(1);
    let err = rt
        .run_on(
            0,
            move || async move { TcpStream::connect(addr).await.err() },
        )
        .unwrap()
        .expect("connect to a closed port must fail");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
}

/// Wait on the current shard until no ring operation is in flight (the gauge is refreshed
/// every loop iteration, so each check also lets the loop submit and reap).
async fn until_no_op_in_flight() {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while with_local_stats(|s| s.ops_in_flight()) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "cancelled ops still hold driver slots"
        );
        corewire_runtime::sleep(Duration::from_millis(1)).await;
    }
}

/// A recv dropped by a timeout while it waits in the kernel must be cancelled for good: its
/// slot is released once the kernel confirms, and the next recv on the same socket gets all
/// the data, appended after what its own buffer already held.
#[test]
fn recv_dropped_by_a_timeout_does_not_disturb_the_next_recv() {
    const ROUNDS: usize = 50;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go_rx) = mpsc::channel::<usize>();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        // Each round the shard's recv has timed out and its cancel has completed: only now
        // does data exist.
        while let Ok(round) = go_rx.recv() {
            s.write_all(format!("payload-{round:04}").as_bytes())
                .unwrap();
        }
    });
    let rt = common::runtime(1);
    rt.run_on(0, move || async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        for round in 0..ROUNDS {
            let wait = Duration::from_millis(1 + (round % 3) as u64);
            let dropped = timeout(wait, stream.recv(BytesMut::with_capacity(64), 64)).await;
            assert!(dropped.is_err(), "round {round}: no data was sent yet");
            until_no_op_in_flight().await;
            go_tx.send(round).unwrap();
            let want = format!("keep:payload-{round:04}");
            let mut buf = BytesMut::with_capacity(want.len());
            buf.extend_from_slice(b"keep:");
            while buf.len() < want.len() {
                let (res, b) = stream.recv(buf, want.len()).await;
                buf = b;
                assert!(res.unwrap() > 0, "round {round}: early EOF");
            }
            assert_eq!(&buf[..], want.as_bytes(), "round {round}");
        }
        drop(go_tx);
    })
    .unwrap();
    peer.join().unwrap();
}

/// `timeout(ZERO, recv)` gives up before the recv's SQE has even reached the kernel. The
/// SQE and its cancel then go in together, the recv runs first, finds data already queued
/// on the socket and completes — into the abandoned buffer, which the driver frees. The
/// caller saw `Elapsed`, as if nothing was received, yet the bytes are gone from the stream.
#[test]
fn recv_abandoned_before_submission_does_not_swallow_queued_data() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (written_tx, written_rx) = mpsc::channel::<()>();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"already here").unwrap();
        written_tx.send(()).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let rt = common::runtime(1);
    let got = rt
        .run_on(0, move || async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            // Loopback delivers during the peer's write: once it returned, the bytes are
            // queued on our socket. (Blocking the shard here is fine: nothing else runs.)
            written_rx.recv().unwrap();
            let first = timeout(Duration::ZERO, stream.recv(BytesMut::with_capacity(64), 64)).await;
            // io_uring only submits on the first poll, so the receive is dropped unfinished;
            // epoll tries the syscall at once and may already hold the bytes. Either way
            // none may be lost: they are in this receive or in the next one.
            if let Ok((res, buf)) = first {
                let out = (res.ok(), buf.to_vec());
                stream.shutdown_write().unwrap();
                return out;
            }
            until_no_op_in_flight().await;
            let (res, buf) = timeout(
                Duration::from_secs(2),
                stream.recv(BytesMut::with_capacity(64), 64),
            )
            .await
            .unwrap_or((Ok(0), BytesMut::new()));
            let out = (res.ok(), buf.to_vec());
            stream.shutdown_write().unwrap();
            out
        })
        .unwrap();
    peer.join().unwrap();
    assert_eq!(got.1, b"already here", "the queued bytes were lost");
}

/// 40 MiB in seven buffers of odd sizes, to a reader with a tiny receive buffer: the kernel
/// takes each sendmsg only in part, often mid-buffer, and every byte must still arrive once
/// and in order.
#[test]
fn send_all_vectored_resumes_after_partial_writes() {
    let sizes = [1, 7 * MIB + 3, 5, 13 * MIB + 1, 64 * 1024, 20 * MIB - 9, 2];
    let bufs: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| pattern(i as u64 + 7, n))
        .collect();
    let expected: Vec<u8> = bufs.concat();

    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    // Inherited by accepted sockets: keeps the window small so sends come back short.
    socket.set_recv_buffer_size(4096).unwrap();
    socket
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    socket.listen(8).unwrap();
    let listener: std::net::TcpListener = socket.into();
    let addr = listener.local_addr().unwrap();
    let total = expected.len();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut got = Vec::with_capacity(total);
        let mut chunk = vec![0u8; 3000];
        loop {
            let n = s.read(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
        }
        got
    });
    let rt = common::runtime(1);
    let parts: Vec<Bytes> = bufs.into_iter().map(Bytes::from).collect();
    rt.run_on(0, move || async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        stream.send_all_vectored(parts).await.unwrap();
        stream.shutdown_write().unwrap();
    })
    .unwrap();
    let got = reader.join().unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "bytes differ after partial writes");
}

/// sendmsg(2) rejects more than IOV_MAX (1024) iovecs with EMSGSIZE; a "send all of these
/// buffers" call must split the list instead of failing.
#[test]
fn send_all_vectored_accepts_more_buffers_than_iov_max() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got
    });
    let parts: Vec<Bytes> = (0..3000u32)
        .map(|i| Bytes::from(i.to_le_bytes().to_vec()))
        .collect();
    let expected: Vec<u8> = parts.iter().flat_map(|b| b.to_vec()).collect();
    let rt = common::runtime(1);
    let sent = rt
        .run_on(0, move || async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let res = stream.send_all_vectored(parts).await;
            stream.shutdown_write().unwrap();
            res
        })
        .unwrap();
    let got = reader.join().unwrap();
    sent.expect("send_all_vectored of 3000 buffers");
    assert!(got == expected);
}

/// `recv(buf, 0)` on a buffer with no spare room asks the kernel for 0 bytes, which
/// "succeeds" with 0 — the value that means end-of-stream. A live connection must not look
/// closed because the caller's buffer happened to be full.
#[test]
fn recv_into_a_full_buffer_is_not_mistaken_for_eof() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"data").unwrap();
        // Keep the connection open until the shard is done.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let rt = common::runtime(1);
    let got = rt
        .run_on(0, move || async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (res, buf) = stream.recv(BytesMut::new(), 0).await;
            let out = (res.map_err(|e| e.kind()), buf.to_vec());
            stream.shutdown_write().unwrap();
            out
        })
        .unwrap();
    peer.join().unwrap();
    assert_ne!(
        got.0,
        Ok(0),
        "a live connection reported EOF; buffer: {:?}",
        got.1
    );
}

/// The bound in faults.rs relies on the fixture counting every byte it reads.
#[test]
fn echo_fixture_counts_bytes_read() {
    let (rt, server) = server_on_shard_0();
    let addr = server.addr();
    rt.run_on(1, move || async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut buf = BytesMut::new();
        echo_on_shard(&stream, &mut buf, b"12345").await.unwrap();
    })
    .unwrap();
    // Counted before the reply was sent, so already visible.
    assert_eq!(server.config.counters.bytes_read(), 9);
}
