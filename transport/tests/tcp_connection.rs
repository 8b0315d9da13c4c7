//! The TCP frame connection against a plain blocking peer: receive is cancel-safe (a dropped
//! `recv` loses no bytes and leaves the connection usable) and sends are bounded.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use corewire_runtime::net::{ListenOptions, TcpListener};
use corewire_runtime::{sleep, timeout, Runtime};
use corewire_transport::frame::{FrameEncoder, FrameHeader, FrameLimits};
use corewire_transport::tcp::{ConnOptions, TcpConnection};
use corewire_transport::{Connection, TransportError};

fn frame(id: u64, payload: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    FrameEncoder::new(FrameLimits::default())
        .encode_frame(&FrameHeader::request(1, 0, id), payload, b"", &mut b)
        .unwrap();
    b.to_vec()
}

/// A one-shard runtime whose task accepts one connection and runs `body` on it; the test
/// thread gets the address to connect its blocking peer to.
fn serve_one<F, Fut, T>(body: F) -> (Runtime, SocketAddr, corewire_runtime::RemoteHandle<T>)
where
    F: FnOnce(TcpConnection) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = rt.spawn_on(0, move || async move {
        let l =
            TcpListener::bind("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        tx.send(l.local_addr()).unwrap();
        let (stream, _) = l.accept().await.unwrap();
        body(TcpConnection::new(stream, ConnOptions::default())).await
    });
    let addr = rx.recv().unwrap();
    (rt, addr, h)
}

/// The peer trickles frames a few bytes at a time while the receiver keeps giving up on
/// `recv` after a millisecond: every frame still arrives once, whole and in order.
#[test]
fn recv_dropped_mid_frame_loses_no_bytes() {
    const FRAMES: u64 = 40;
    let (_rt, addr, h) = serve_one(|conn| async move {
        let mut got = Vec::new();
        let mut gave_up = 0u32;
        while got.len() < FRAMES as usize {
            match timeout(Duration::from_millis(1), conn.recv()).await {
                Ok(Ok(Some(f))) => got.push((f.header.correlation_id, f.payload)),
                Ok(other) => panic!("unexpected {:?}", other.map(|f| f.is_some())),
                Err(_) => gave_up += 1,
            }
        }
        (got, gave_up)
    });
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    peer.set_nodelay(true).unwrap();
    for id in 0..FRAMES {
        let bytes = frame(id, &vec![id as u8; 100 + id as usize * 37]);
        for chunk in bytes.chunks(23) {
            peer.write_all(chunk).unwrap();
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    let (got, gave_up) = h.wait().unwrap();
    assert!(gave_up > 0, "the test never dropped a recv mid-frame");
    for (i, (id, payload)) in got.iter().enumerate() {
        assert_eq!(*id, i as u64);
        assert_eq!(payload.len(), 100 + i * 37);
        assert!(payload.iter().all(|&b| b == i as u8));
    }
}

/// Frames of every size, with and without attachments, sent in pieces that cut them anywhere
/// (inside headers, inside bodies, several frames per piece, bodies over many ring buffers):
/// each arrives whole and in order, payload and attachment apart.
#[test]
fn frames_of_every_size_arrive_whole_whatever_the_pieces() {
    let sizes: Vec<(usize, usize)> = vec![
        (0, 0),
        (1, 0),
        (64, 0),
        (4000, 0),
        (4096, 0),
        (4097, 3),
        (0, 9000),
        (70_000, 0),
        (10, 20),
        (300_000, 5000),
        (64, 64),
        (1 << 20, 0),
        (5, 0),
    ];
    let expected = sizes.clone();
    let (_rt, addr, h) = serve_one(move |conn| async move {
        let mut got = Vec::new();
        while got.len() < expected.len() {
            let f = conn.recv().await.unwrap().expect("a frame");
            got.push(f);
        }
        assert!(
            matches!(conn.recv().await, Ok(None)),
            "end of stream after the last frame"
        );
        got
    });
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    peer.set_nodelay(true).unwrap();
    let fill = |id: usize, len: usize, salt: u8| -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ id as u8 ^ salt)
            .collect()
    };
    let mut wire = BytesMut::new();
    let mut encoder = FrameEncoder::new(FrameLimits::default());
    for (id, &(p, a)) in sizes.iter().enumerate() {
        let header = FrameHeader::request(1, 0, id as u64);
        encoder
            .encode_frame(&header, &fill(id, p, 0), &fill(id, a, 0x55), &mut wire)
            .unwrap();
    }
    // Pieces of 1 byte up to 20 KB, in a fixed pseudo-random order.
    let mut rest = &wire[..];
    let mut seed = 12345u64;
    while !rest.is_empty() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = ((seed >> 33) as usize % 20_000 + 1).min(rest.len());
        peer.write_all(&rest[..n]).unwrap();
        rest = &rest[n..];
        if seed.is_multiple_of(4) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    drop(peer);
    let got = h.wait().unwrap();
    for (id, (f, &(p, a))) in got.iter().zip(&sizes).enumerate() {
        assert_eq!(f.header.correlation_id, id as u64);
        assert_eq!(f.payload.len(), p, "frame {id} payload");
        assert_eq!(f.attachment.len(), a, "frame {id} attachment");
        assert!(
            f.payload[..] == fill(id, p, 0)[..],
            "frame {id} payload bytes"
        );
        assert!(
            f.attachment[..] == fill(id, a, 0x55)[..],
            "frame {id} attachment bytes"
        );
    }
}

/// One reader at a time: a second concurrent `recv` is refused, and once the first is dropped
/// the connection reads again (the "busy" state does not outlive the future).
#[test]
fn a_dropped_recv_does_not_leave_the_connection_busy() {
    // The peer writes only once the second recv was refused: until then there is nothing to
    // read, so the first recv is still waiting, however the threads are scheduled.
    let (refused_tx, refused_rx) = mpsc::channel::<()>();
    let (_rt, addr, h) = serve_one(move |conn| async move {
        let first = conn.recv();
        let mut first = Box::pin(first);
        // Start the first recv so it holds the reader role, then try a second one.
        let _ = timeout(Duration::from_millis(5), first.as_mut()).await;
        let second = conn.recv().await;
        drop(first);
        let _ = refused_tx.send(());
        let third = timeout(Duration::from_secs(10), conn.recv()).await;
        (
            matches!(second, Err(TransportError::Busy)),
            third.map(|r| r.map(|f| f.map(|f| f.header.correlation_id))),
        )
    });
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    refused_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server never tried a second recv");
    peer.write_all(&frame(9, b"late")).unwrap();
    let (second_busy, third) = h.wait().unwrap();
    assert!(second_busy);
    assert!(matches!(third, Ok(Ok(Some(9)))), "{third:?}");
}

/// A peer that never reads: `send` stops admitting frames once the queue is at its limit
/// (it waits, it does not buffer), and a send dropped while waiting queues nothing.
#[test]
fn sends_to_a_peer_that_never_reads_wait_at_the_limit() {
    let (_rt, addr, h) = serve_one(|conn| async move {
        let chunk = Bytes::from(vec![1u8; 256 << 10]);
        let mut queued = 0usize;
        // Far more than the socket buffers and the 4 MiB queue can hold.
        for id in 0..400u64 {
            let header = FrameHeader::request(1, 0, id);
            let send = conn.send(&header, chunk.clone(), Bytes::new());
            match timeout(Duration::from_millis(200), send).await {
                Ok(r) => r.unwrap(),
                Err(_) => break,
            }
            queued += 1;
        }
        let stats = conn.stats();
        // Give the writer a moment: nothing more leaves, nothing more was admitted.
        sleep(Duration::from_millis(50)).await;
        (queued, stats.queued_bytes, conn.stats().frames_out)
    });
    let peer = std::net::TcpStream::connect(addr).unwrap();
    let (queued, queued_bytes, frames_out) = h.wait().unwrap();
    drop(peer);
    assert!(
        queued < 400,
        "every send was admitted: the queue is unbounded"
    );
    assert!(
        queued_bytes <= ConnOptions::default().max_queued_bytes as u64,
        "queued {queued_bytes} bytes, over the limit"
    );
    assert_eq!(frames_out, queued as u64, "a dropped send queued its frame");
}

/// Frames whose payloads are written in place count against the send queue's limit like any
/// other: against a peer that does not read, `try_send_with` stops admitting them at the limit
/// (without waiting, and without calling the writer), and every frame it queued arrives
/// whole and in order once the peer reads, with an ordinary frame queued behind them.
#[test]
fn frames_written_in_place_stop_at_the_limit_and_arrive_whole() {
    use std::io::Read;

    use corewire_transport::frame::FrameDecoder;

    fn payload_len(id: u64) -> usize {
        [64, 4096, 20_000][(id % 3) as usize]
    }
    let (_rt, addr, h) = serve_one(|conn| async move {
        let mut queued = 0u64;
        let refused = loop {
            let header = FrameHeader::request(1, 0, queued);
            let len = payload_len(queued);
            let mut wrote = false;
            let admitted = conn
                .try_send_with(&header, len, b"att", |buf| {
                    wrote = true;
                    buf.put_bytes(queued as u8, len);
                })
                .unwrap();
            assert_eq!(admitted, wrote);
            if !admitted {
                break conn.stats();
            }
            queued += 1;
            if queued.is_multiple_of(64) {
                // Let the writer hand what it can to the kernel.
                sleep(Duration::from_millis(1)).await;
            }
        };
        // The ordinary way waits for room, and goes out behind them.
        let header = FrameHeader::request(1, 0, queued);
        conn.send(&header, Bytes::from_static(b"last"), Bytes::new())
            .await
            .unwrap();
        conn.close();
        (queued, refused.queued_bytes)
    });
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    // Not reading for a while: the server's sends back up to its queue's limit.
    std::thread::sleep(Duration::from_millis(300));
    let mut decoder = FrameDecoder::new(FrameLimits::default());
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        while let Some(f) = decoder.decode(&mut buf).unwrap() {
            frames.push(f);
        }
        let n = peer.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let (queued, queued_bytes) = h.wait().unwrap();
    assert!(queued > 0, "nothing was admitted");
    assert!(
        queued_bytes <= ConnOptions::default().max_queued_bytes as u64,
        "queued {queued_bytes} bytes, over the limit"
    );
    assert_eq!(frames.len() as u64, queued + 1);
    for (id, f) in frames.iter().enumerate() {
        let id = id as u64;
        assert_eq!(f.header.correlation_id, id);
        if id == queued {
            assert_eq!(&f.payload[..], b"last");
        } else {
            assert_eq!(f.payload.len(), payload_len(id));
            assert!(f.payload.iter().all(|&b| b == id as u8));
            assert_eq!(&f.attachment[..], b"att");
        }
    }
}
