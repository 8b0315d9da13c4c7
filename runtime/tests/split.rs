//! Split streams: a stream's receive half and send half in two tasks of one
//! shard (owned halves) or two futures of one task (borrowed halves), with a receive and a
//! send in flight at the same time; what dropping each owned half does; reuniting them.

mod common;

use std::future::{poll_fn, Future};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire_runtime::net::{RecvBuffers, TcpStream, UnixStream};
use corewire_runtime::{sleep, spawn_local, with_local_stats, yield_now};

use common::client::{pattern, IO_TIMEOUT};

/// More than loopback's socket buffers hold in one direction, so a peer that sends all of
/// it before reading (and a side that did the same) would stall: the transfer completes only
/// if both directions move at once.
const BULK: usize = 8 << 20;

/// Receive everything until end-of-stream through `recv_chunk`-like `next`.
async fn read_to_end<F, Fut>(mut next: F) -> Vec<u8>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::io::Result<Option<corewire_runtime::net::RecvBuf>>>,
{
    let mut got = Vec::new();
    while let Some(chunk) = next().await.expect("receive") {
        got.extend_from_slice(&chunk);
    }
    got
}

/// Send `data` in 64 KiB pieces.
async fn send_in_pieces<F, Fut>(data: Vec<u8>, mut send_all: F)
where
    F: FnMut(Bytes) -> Fut,
    Fut: Future<Output = std::io::Result<()>>,
{
    let data = Bytes::from(data);
    for start in (0..data.len()).step_by(64 * 1024) {
        let end = (start + 64 * 1024).min(data.len());
        send_all(data.slice(start..end)).await.expect("send");
    }
}

/// A blocking peer that sends `out` and reads until end-of-stream at the same time (two
/// threads), then returns what it read.
fn full_duplex_peer(listener: TcpListener, out: Vec<u8>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            w.write_all(&out).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        got
    })
}

#[test]
fn owned_halves_receive_and_send_from_two_tasks_at_once() {
    let rt = common::runtime(1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (to_shard, from_shard) = (pattern(1, BULK), pattern(2, BULK));
    let peer = full_duplex_peer(listener, to_shard.clone());
    let sent = from_shard.clone();
    let received = rt
        .run_on(0, move || async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (read, write) = stream.into_split();
            assert_eq!(read.peer_addr().unwrap(), addr);
            assert_eq!(write.peer_addr().unwrap(), addr);
            let reader = spawn_local(async move { read_to_end(|| read.recv_chunk()).await });
            let writer = spawn_local(async move {
                send_in_pieces(sent, |b| write.send_all(b)).await;
                // Dropping the write half ends the peer's read.
                drop(write);
            });
            writer.await.unwrap();
            reader.await.unwrap()
        })
        .unwrap();
    assert!(received == to_shard, "the read half got other bytes");
    assert!(
        peer.join().unwrap() == from_shard,
        "the peer got other bytes"
    );
}

#[test]
fn borrowed_halves_receive_and_send_in_one_task() {
    let rt = common::runtime(1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (to_shard, from_shard) = (pattern(3, BULK), pattern(4, BULK));
    let peer = full_duplex_peer(listener, to_shard.clone());
    let sent = from_shard.clone();
    let received = rt
        .run_on(0, move || async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let received = {
                let (read, write) = stream.split();
                let mut receiving = pin!(read_to_end(|| read.recv_chunk()));
                let mut sending = pin!(async {
                    send_in_pieces(sent, |b| write.send_all(b)).await;
                    write.shutdown_write().unwrap();
                });
                // Both futures of one task, polled together until both are done.
                let (mut got, mut sent_all) = (None, false);
                poll_fn(|cx| {
                    if got.is_none() {
                        if let Poll::Ready(v) = receiving.as_mut().poll(cx) {
                            got = Some(v);
                        }
                    }
                    if !sent_all {
                        sent_all = sending.as_mut().poll(cx).is_ready();
                    }
                    if got.is_some() && sent_all {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                })
                .await;
                got.unwrap()
            };
            // The halves were borrowed: the stream is whole again (and at end-of-stream).
            assert!(stream.recv_chunk().await.unwrap().is_none());
            received
        })
        .unwrap();
    assert!(received == to_shard, "the read half got other bytes");
    assert!(
        peer.join().unwrap() == from_shard,
        "the peer got other bytes"
    );
}

#[test]
fn dropping_the_write_half_shuts_writes_down_and_reading_goes_on() {
    let rt = common::runtime(1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut got = Vec::new();
        // Ends only when the shard's write half is gone.
        s.read_to_end(&mut got).unwrap();
        s.write_all(b"after your end").unwrap();
        got
    });
    let received = rt
        .run_on(0, move || async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (read, write) = stream.into_split();
            write
                .send_all(Bytes::from_static(b"last words"))
                .await
                .unwrap();
            drop(write);
            let mut got = Vec::new();
            while let Some(chunk) = read.recv_chunk().await.unwrap() {
                got.extend_from_slice(&chunk);
            }
            got
        })
        .unwrap();
    assert_eq!(peer.join().unwrap(), b"last words");
    assert_eq!(received, b"after your end");
}

#[test]
fn dropping_the_read_half_stops_receiving_and_sending_goes_on() {
    let rt = common::runtime(1);
    let multishot = rt.features().recv_multishot;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let peer_wrote = Arc::new(AtomicBool::new(false));
    let wrote = peer_wrote.clone();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        // Arrives after the read half is gone: it stays in the shard's socket.
        go_rx.recv().unwrap();
        s.write_all(&[7u8; 100_000]).unwrap();
        wrote.store(true, Ordering::Release);
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got
    });
    rt.run_on(0, move || async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (read, write) = stream.into_split();
        // Arm the receive, then drop the half: the receive is cancelled with it.
        let mut first = Box::pin(read.recv_chunk());
        assert!(poll_fn(|cx| Poll::Ready(first.as_mut().poll(cx).is_pending())).await);
        drop(first);
        drop(read);
        go_tx.send(()).unwrap();
        write
            .send_all(Bytes::from_static(b"still sending"))
            .await
            .unwrap();
        let deadline = Instant::now() + IO_TIMEOUT;
        while !peer_wrote.load(Ordering::Acquire) && Instant::now() < deadline {
            sleep(Duration::from_millis(2)).await;
        }
        assert!(peer_wrote.load(Ordering::Acquire), "the peer never wrote");
        // Nothing in flight any more (a receive left armed would stay, taking every byte
        // that arrives), and no ring buffer holds the bytes nobody will read.
        let mut in_flight = u64::MAX;
        while Instant::now() < deadline {
            yield_now().await;
            in_flight = with_local_stats(|s| s.ops_in_flight());
            if in_flight == 0 {
                break;
            }
            sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(in_flight, 0, "an op outlived the dropped read half");
        if multishot {
            let free = with_local_stats(|s| s.recv_buffers_free());
            assert_eq!(free, u64::from(RecvBuffers::default().count));
        }
        drop(write);
    })
    .unwrap();
    assert_eq!(peer.join().unwrap(), b"still sending");
}

#[test]
fn reunite_gives_the_stream_back_and_refuses_strangers() {
    let rt = common::runtime(1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut a, _) = listener.accept().unwrap();
        let (_b, _) = listener.accept().unwrap();
        a.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut buf = [0u8; 4];
        a.read_exact(&mut buf).unwrap();
        a.write_all(b"pong").unwrap();
        buf
    });
    rt.run_on(0, move || async move {
        let a = TcpStream::connect(addr).await.unwrap();
        let b = TcpStream::connect(addr).await.unwrap();
        let (a_read, a_write) = a.into_split();
        let (b_read, b_write) = b.into_split();
        let Err(err) = a_read.reunite(b_write) else {
            panic!("halves of two streams were reunited");
        };
        let (a_read, b_write) = (err.0, err.1);
        drop((b_read, b_write));
        let a = a_read.reunite(a_write).expect("halves of one stream");
        // Neither half's drop ran: the stream still sends and receives.
        a.send_all(Bytes::from_static(b"ping")).await.unwrap();
        let reply = a.recv_chunk().await.unwrap().expect("a reply");
        assert_eq!(&reply[..], b"pong");
    })
    .unwrap();
    assert_eq!(&peer.join().unwrap(), b"ping");
}

#[test]
fn unix_stream_halves_move_both_ways_at_once() {
    let rt = common::runtime(1);
    let (to_a, to_b) = (pattern(5, BULK), pattern(6, BULK));
    let (expect_a, expect_b) = (to_a.clone(), to_b.clone());
    let (got_a, got_b) = rt
        .run_on(0, move || async move {
            let (a, b) = UnixStream::pair().unwrap();
            let (a_read, a_write) = a.into_split();
            let (b_read, b_write) = b.into_split();
            let a_reader = spawn_local(async move { read_to_end(|| a_read.recv_chunk()).await });
            let b_reader = spawn_local(async move { read_to_end(|| b_read.recv_chunk()).await });
            let a_writer =
                spawn_local(async move { send_in_pieces(to_b, |x| a_write.send_all(x)).await });
            let b_writer =
                spawn_local(async move { send_in_pieces(to_a, |x| b_write.send_all(x)).await });
            a_writer.await.unwrap();
            b_writer.await.unwrap();
            (a_reader.await.unwrap(), b_reader.await.unwrap())
        })
        .unwrap();
    assert!(got_a == expect_a && got_b == expect_b, "bytes differ");
}
