//! `recv_available`: every chunk already received in one call (the 4 KiB echo
//! regression: answering chunk by chunk cost one send per 4 KiB chunk). That bytes are
//! "already received" is made sure of by peeking at the socket before the stream's receive
//! is armed, never by waiting a fixed time; under `COREWIRE_IO_URING=plain` (one single-shot receive at a time) only
//! what must hold everywhere is checked: bytes in order, the end after the bytes.

mod common;

use std::future::Future;
use std::io::Write;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use corewire_runtime::net::{RecvBuffers, TcpStream};
use corewire_runtime::with_local_stats;

use common::client::{pattern, IO_TIMEOUT};

/// A peer that connects, sends `first`, waits for `go`, sends `rest`, and closes if asked.
fn peer(
    first: Vec<u8>,
    rest: Vec<u8>,
    close: bool,
) -> (TcpListener, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let go = Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    let handle = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        s.write_all(&first).unwrap();
        let deadline = Instant::now() + IO_TIMEOUT;
        while !go2.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        s.write_all(&rest).unwrap();
        if close {
            s.shutdown(std::net::Shutdown::Write).unwrap();
        } else {
            // Keep the connection open until the shard is done with it.
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    (listener, go, handle)
}

/// Wait (generously) until `socket` has `n` bytes queued to read, on the test thread.
fn queued(socket: &std::net::TcpStream, n: usize) -> bool {
    socket.set_nonblocking(true).unwrap();
    let mut probe = vec![0u8; n + 1];
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut seen = 0;
    while Instant::now() < deadline {
        seen = socket.peek(&mut probe).unwrap_or(0);
        if seen >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    socket.set_nonblocking(false).unwrap();
    seen == n
}

#[test]
fn one_call_takes_every_chunk_already_received_then_the_end() {
    let rt = common::runtime(1);
    let multishot = rt.features().recv_multishot;
    // Ten ring buffers' worth: under the 64 KiB a call takes and the socket's first window.
    let payload = pattern(11, 10 * RecvBuffers::default().size as usize);
    let (listener, go, client) = peer(Vec::new(), payload.clone(), true);
    let (server, _) = listener.accept().unwrap();
    go.store(true, Ordering::Release);
    // All of it waits in the socket before the stream's receive is armed, so the kernel
    // delivers it as ten chunks at once.
    assert!(
        queued(&server, payload.len()),
        "the peer's bytes never arrived"
    );
    let expected = payload.clone();
    rt.run_on(0, move || async move {
        let stream = TcpStream::from_std(server);
        let mut buf = BytesMut::new();
        if multishot {
            let n = stream.recv_available(&mut buf).await.unwrap();
            assert_eq!(
                n,
                expected.len(),
                "one call took only part of what was queued"
            );
        } else {
            while buf.len() < expected.len() {
                let n = stream.recv_available(&mut buf).await.unwrap();
                assert!(n > 0, "end-of-stream before the bytes");
            }
        }
        assert!(buf[..] == expected[..], "bytes reordered or changed");
        // The end comes after the bytes, and stays.
        assert_eq!(stream.recv_available(&mut buf).await.unwrap(), 0);
        assert_eq!(stream.recv_available(&mut buf).await.unwrap(), 0);
        if multishot {
            // Every chunk's buffer went back to the ring at once.
            corewire_runtime::yield_now().await;
            corewire_runtime::yield_now().await;
            let free = with_local_stats(|s| s.recv_buffers_free());
            assert_eq!(free, u64::from(RecvBuffers::default().count));
        }
    })
    .unwrap();
    client.join().unwrap();
}

#[test]
fn no_call_appends_more_than_64_kib_and_one_chunk() {
    let rt = common::runtime(1);
    let payload = pattern(12, 4 << 20);
    let (listener, go, client) = peer(Vec::new(), payload.clone(), true);
    let (server, _) = listener.accept().unwrap();
    go.store(true, Ordering::Release);
    let limit = 64 * 1024 + RecvBuffers::default().size.max(16 * 1024) as usize;
    let (got, largest) = rt
        .run_on(0, move || async move {
            let stream = TcpStream::from_std(server);
            let mut buf = BytesMut::new();
            let mut largest = 0;
            loop {
                let n = stream.recv_available(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                largest = largest.max(n);
            }
            (buf, largest)
        })
        .unwrap();
    client.join().unwrap();
    assert!(got[..] == payload[..], "bytes reordered, lost or changed");
    assert!(largest <= limit, "one call appended {largest} bytes");
}

#[test]
fn a_dropped_call_loses_nothing() {
    let rt = common::runtime(1);
    let (listener, go, client) = peer(Vec::new(), pattern(13, 20_000), false);
    let (server, _) = listener.accept().unwrap();
    let expected = pattern(13, 20_000);
    rt.run_on(0, move || async move {
        let stream = TcpStream::from_std(server);
        let mut buf = BytesMut::new();
        {
            // Nothing has arrived: the call waits, and is dropped waiting.
            let mut call = Box::pin(stream.recv_available(&mut buf));
            let pending =
                std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx).is_pending())).await;
            assert!(pending, "a call returned before any byte was sent");
        }
        go.store(true, Ordering::Release);
        while buf.len() < expected.len() {
            assert!(stream.recv_available(&mut buf).await.unwrap() > 0);
        }
        assert!(buf[..] == expected[..], "bytes lost or changed");
    })
    .unwrap();
    client.join().unwrap();
}

#[test]
fn a_reset_queued_behind_data_comes_after_the_data_and_is_not_lost() {
    let rt = common::runtime(1);
    let multishot = rt.features().recv_multishot;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let go = Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    let client = std::thread::spawn(move || {
        let s = std::net::TcpStream::connect(addr).unwrap();
        let deadline = Instant::now() + IO_TIMEOUT;
        while !go2.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        (&s).write_all(&[5u8; 100]).unwrap();
        // Linger 0: the close resets the connection.
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
    });
    let (server, _) = listener.accept().unwrap();
    rt.run_on(0, move || async move {
        let stream = TcpStream::from_std(server);
        let mut buf = BytesMut::new();
        {
            // Arm the stream's receive on the empty socket.
            let mut call = Box::pin(stream.recv_available(&mut buf));
            let pending =
                std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx).is_pending())).await;
            assert!(pending);
        }
        corewire_runtime::yield_now().await;
        let before = with_local_stats(|s| s.completions());
        go.store(true, Ordering::Release);
        if multishot {
            // One completion for the 100 bytes, one for the reset: both queued before the
            // call, so the call meets the reset while taking what is there, and keeps it.
            let deadline = Instant::now() + IO_TIMEOUT;
            while with_local_stats(|s| s.completions()) < before + 2 {
                assert!(
                    Instant::now() < deadline,
                    "the bytes and the reset never came"
                );
                corewire_runtime::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(stream.recv_available(&mut buf).await.unwrap(), 100);
        }
        let error = loop {
            match stream.recv_available(&mut buf).await {
                Ok(0) => panic!("end-of-stream instead of the reset"),
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset);
        assert_eq!(&buf[..], &[5u8; 100][..], "bytes lost or changed");
    })
    .unwrap();
    client.join().unwrap();
}
