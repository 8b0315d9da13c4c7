//! Sends: the counters of batching (`sends`, `send_buffers`), zero-copy sends above the
//! threshold delivering every byte, and a stream closed with a zero-copy send in flight.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire_runtime::net::TcpStream;
use corewire_runtime::{sleep, with_local_stats, Runtime};

use common::client::{pattern, IO_TIMEOUT};

fn runtime(zc: Option<usize>) -> Runtime {
    Runtime::builder()
        .shards(1)
        .pin(false)
        .send_zc_threshold(zc)
        .build()
        .expect("runtime")
}

/// A connected pair: the shard's side as a std stream (to adopt there), the peer's here.
fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (ours, _) = listener.accept().unwrap();
    peer.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    (ours, peer)
}

fn read_all(mut peer: std::net::TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    peer.read_to_end(&mut got).expect("read");
    got
}

#[test]
fn a_vectored_send_counts_one_send_for_many_buffers() {
    let rt = runtime(None);
    let (ours, peer) = pair();
    let reader = thread::spawn(move || read_all(peer));
    let bufs: Vec<Bytes> = (0..100u8).map(|i| Bytes::from(vec![i; 100])).collect();
    let expect: Vec<u8> = bufs.iter().flat_map(|b| b.to_vec()).collect();
    let (sends, buffers) = rt
        .run_on(0, move || async move {
            let stream = TcpStream::from_std(ours);
            let before = with_local_stats(|s| (s.sends(), s.send_buffers()));
            stream.send_all_vectored(bufs).await.unwrap();
            let after = with_local_stats(|s| (s.sends(), s.send_buffers()));
            (after.0 - before.0, after.1 - before.1)
        })
        .unwrap();
    assert_eq!(reader.join().unwrap(), expect);
    // 10 KB fit the socket buffer: one writev, unless the kernel took it in parts.
    assert!((1..=3).contains(&sends), "{sends} sends");
    assert!(buffers >= 100, "{buffers} buffers counted");
}

#[test]
fn zero_copy_sends_above_the_threshold_deliver_every_byte() {
    let rt = runtime(Some(16 * 1024));
    let zc = rt.features().send_zc;
    if std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain") {
        assert!(!zc, "COREWIRE_IO_URING=plain left zero-copy send on");
    }
    let (ours, peer) = pair();
    let reader = thread::spawn(move || read_all(peer));
    let big = Bytes::from(pattern(21, 3 << 20));
    let small = Bytes::from(pattern(22, 1000));
    let expect: Vec<u8> = [&big[..], &small[..], &big[..]].concat();
    let zc_sends = rt
        .run_on(0, move || async move {
            let stream = TcpStream::from_std(ours);
            stream.send_all(big.clone()).await.unwrap();
            stream.send_all(small).await.unwrap();
            stream.send_all(big).await.unwrap();
            with_local_stats(|s| s.send_zc())
        })
        .unwrap();
    assert!(reader.join().unwrap() == expect, "bytes lost or reordered");
    if zc {
        assert!(zc_sends >= 2, "{zc_sends} zero-copy sends");
    } else {
        assert_eq!(zc_sends, 0);
    }
}

/// Bytes whose owner records when they are freed.
struct Tracked(Vec<u8>, Arc<AtomicBool>);

impl AsRef<[u8]> for Tracked {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.1.store(true, Ordering::SeqCst);
    }
}

/// The stream goes away (and its send future with it) while a zero-copy send waits on a
/// peer that does not read: while the kernel still holds the bytes (the op's slot is there)
/// they stay alive; once the peer reads, the notification frees them, no op is left behind,
/// and the peer got a prefix of what was sent.
#[test]
fn stream_closed_with_a_zero_copy_send_in_flight() {
    let rt = runtime(Some(16 * 1024));
    let (ours, peer) = pair();
    let freed = Arc::new(AtomicBool::new(false));
    let payload = pattern(23, 8 << 20);
    let buf = Bytes::from_owner(Tracked(payload.clone(), freed.clone()));
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let reader = thread::spawn(move || {
        go_rx.recv().unwrap();
        read_all(peer)
    });
    let flag = freed.clone();
    let (held_while_in_flight, in_flight) = rt
        .run_on(0, move || async move {
            let stream = TcpStream::from_std(ours);
            let send = stream.send(buf);
            // The peer reads nothing yet: 8 MiB do not fit the socket buffers, the send waits.
            let _ = corewire_runtime::timeout(Duration::from_millis(50), send).await;
            drop(stream);
            sleep(Duration::from_millis(50)).await;
            let still = with_local_stats(|s| s.ops_in_flight());
            // An op still in flight must still have its bytes.
            let held = still == 0 || !flag.load(Ordering::SeqCst);
            go_tx.send(()).unwrap();
            let deadline = Instant::now() + IO_TIMEOUT;
            loop {
                sleep(Duration::from_millis(10)).await;
                let n = with_local_stats(|s| s.ops_in_flight());
                if n == 0 || Instant::now() > deadline {
                    return (held, n);
                }
            }
        })
        .unwrap();
    let got = reader.join().unwrap();
    assert!(
        held_while_in_flight,
        "bytes freed while the kernel could still read them"
    );
    assert!(
        payload.starts_with(&got),
        "the peer got bytes that were not sent"
    );
    assert_eq!(in_flight, 0, "an op was left in flight");
    let deadline = Instant::now() + IO_TIMEOUT;
    while !freed.load(Ordering::SeqCst) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(
        freed.load(Ordering::SeqCst),
        "the send's buffer was never freed"
    );
}
