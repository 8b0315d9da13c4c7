//! Registered descriptors (`RuntimeBuilder::registered_fds`): streams take
//! slots of the shard's registered file table while one is free and use plain descriptors
//! after; a stream closed with operations in flight gives its slot back only once the kernel
//! let go of it, and the next stream gets it. Under `COREWIRE_IO_URING=plain` there is no
//! table: nothing is registered and everything still works.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire_runtime::accept::AcceptMode;
use corewire_runtime::net::TcpStream;
use corewire_runtime::{sleep, spawn_local, with_local_stats, yield_now, Budget, Runtime};

use common::client::{pattern, FramedClient, IO_TIMEOUT};
use common::echo;

fn runtime(slots: u32) -> Runtime {
    Runtime::builder()
        .shards(1)
        .pin(false)
        .registered_fds(slots)
        .build()
        .expect("runtime")
}

/// No registered file table: the plain io_uring fallback, or epoll (which has none).
fn plain() -> bool {
    let backend = std::env::var("COREWIRE_BACKEND").unwrap_or_default();
    std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain")
        || corewire_runtime::Backend::from_name(&backend) == Some(corewire_runtime::Backend::Epoll)
}

#[test]
fn streams_take_free_slots_then_plain_descriptors_and_both_work() {
    let rt = runtime(2);
    let server = echo::start(&rt, AcceptMode::ReusePort, Budget::default(), 2 << 20);
    // One connection at a time, all kept open, so the first two accepted get the two slots.
    let mut clients = Vec::new();
    for i in 0..4u64 {
        let mut client = FramedClient::connect(server.addr()).unwrap();
        for size in [0, 1, 4096, 70_000, 1 << 20] {
            client.echo(&pattern(i, size)).unwrap();
        }
        clients.push(client);
    }
    let stats = rt.stats()[0].clone();
    if plain() {
        assert_eq!((stats.fds_registered, stats.fds_not_registered), (0, 0));
    } else {
        assert_eq!(stats.fds_registered, 2, "{stats}");
        assert_eq!(stats.fds_not_registered, 2, "{stats}");
    }
    assert_eq!(server.config.counters.messages(), 20);
}

#[test]
fn a_stream_closed_with_ops_in_flight_gives_its_slot_to_the_next_stream() {
    let rt = runtime(1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let saw_eof = Arc::new(AtomicBool::new(false));
    let eof = saw_eof.clone();
    // The first peer reads until the shard's stream is really closed (end-of-stream comes
    // only once no descriptor, slot or operation holds the socket any more).
    let first_peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        eof.store(true, Ordering::Release);
        let (mut s2, _) = listener.accept().unwrap();
        s2.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut got2 = Vec::new();
        s2.read_to_end(&mut got2).unwrap();
        (got, got2)
    });
    let stats = rt
        .run_on(0, move || async move {
            let first = Rc::new(TcpStream::connect(addr).await.unwrap());
            first.send_all(Bytes::from_static(b"one")).await.unwrap();
            // A multishot receive in flight when the stream goes (its future is dropped
            // with the task; the receive stays armed in the stream until the stream drops).
            let reading = first.clone();
            let reader = spawn_local(async move {
                let _ = reading.recv_chunk().await;
            });
            yield_now().await;
            yield_now().await;
            reader.abort();
            yield_now().await;
            drop(first);
            let deadline = Instant::now() + IO_TIMEOUT;
            while !saw_eof.load(Ordering::Acquire) {
                assert!(Instant::now() < deadline, "the first stream never closed");
                sleep(Duration::from_millis(1)).await;
            }
            // The slot's close completed before the peer could see the end; its
            // completion was reaped in the same pass.
            let second = TcpStream::connect(addr).await.unwrap();
            second.send_all(Bytes::from_static(b"two")).await.unwrap();
            drop(second);
            with_local_stats(|s| s.snapshot())
        })
        .unwrap();
    let (got, got2) = first_peer.join().unwrap();
    assert_eq!(got, b"one");
    assert_eq!(got2, b"two", "the second stream's bytes went elsewhere");
    if plain() {
        assert_eq!(stats.fds_registered, 0, "{stats}");
    } else {
        assert_eq!(
            stats.fds_registered, 2,
            "the slot did not come back: {stats}"
        );
        assert_eq!(stats.fds_not_registered, 0, "{stats}");
    }
}
