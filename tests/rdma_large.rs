//! Large messages without copies (RDMA READ from the sender's registered memory) and
//! registered user memory, on the soft-RoCE device: `cargo xtask test` runs this binary inside
//! the rxe VM.

mod rdma_common;

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::transport::rdma::{self, RdmaConfig, RdmaEndpoint, RdmaStats, RegisteredBuf};
use corewire::transport::Connection;
use corewire::{sleep, spawn_local, Runtime};
use corewire_transport::frame::FrameHeader;
use rdma_common::{polling, rdma_listen_addr, runtime};

const THRESHOLD: usize = 64 << 10;

fn config() -> RdmaConfig {
    {
        let mut o = polling();
        o.large_message_threshold = Some(THRESHOLD);
        o
    }
}

/// Bytes of frame `id`'s part `part`, recognisable wherever they end up.
fn pattern(id: u64, part: u8, len: usize) -> Bytes {
    (0..len)
        .map(|i| (i as u64 * 31 + id * 7 + u64::from(part) * 13) as u8)
        .collect::<Vec<u8>>()
        .into()
}

fn total(rt: &Runtime) -> RdmaStats {
    let mut sum = RdmaStats::default();
    for s in rdma::stats(rt) {
        sum.large_sent += s.large_sent;
        sum.large_received += s.large_received;
        sum.large_sent_registered += s.large_sent_registered;
        sum.large_registrations += s.large_registrations;
        sum.large_registered_bytes += s.large_registered_bytes;
        sum.large_copied += s.large_copied;
        sum.registered_bufs += s.registered_bufs;
        sum.connections_open += s.connections_open;
    }
    sum
}

/// Wait until `rt`'s counters satisfy `ok` (transfers are released asynchronously).
fn wait_for(rt: &Runtime, what: &str, ok: impl Fn(&RdmaStats) -> bool) -> RdmaStats {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st = total(rt);
        if ok(&st) {
            return st;
        }
        assert!(Instant::now() < deadline, "never {what}: {st:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A listener that sends every frame back as it came, in order.
fn echo_frames(rt: &Runtime, addr: std::net::SocketAddr) -> corewire::ListenerHandle {
    RdmaEndpoint::bind(addr)
        .serve(rt, |accepted| async move {
            let conn = accepted.conn;
            while let Ok(Some(f)) = conn.recv().await {
                if conn.send(&f.header, f.payload, f.attachment).await.is_err() {
                    return;
                }
            }
        })
        .unwrap()
}

/// Frames below, at and above the threshold (payloads and attachments, 1 MiB included)
/// mixed with small ones, pipelined both ways: each comes back intact and in order; both
/// sides sent and received large messages by READ, and every registration made for them
/// is released once the transfers are done.
#[test]
fn rdma_large_and_small_frames_arrive_intact_and_in_order() {
    let rt = runtime(2, config());
    let addr = rdma_listen_addr();
    let listener = echo_frames(&rt, addr);
    // (payload, attachment) sizes, cycled.
    const SIZES: [(usize, usize); 9] = [
        (10, 0),
        (100, THRESHOLD - 1),
        (5, THRESHOLD),
        (0, THRESHOLD + 1),
        (20, 1 << 20),
        (THRESHOLD * 2, 3),
        (1 << 20, 1 << 20),
        (1, 1),
        (300_000, 0),
    ];
    const FRAMES: u64 = 45;
    rt.run_on(0, move || async move {
        let conn = rdma::connect(addr).await.unwrap();
        let reader = conn.clone();
        let check = spawn_local(async move {
            for id in 0..FRAMES {
                let f = reader.recv().await.unwrap().expect("a frame");
                assert_eq!(f.header.correlation_id, id, "out of order");
                let (p, a) = SIZES[id as usize % SIZES.len()];
                assert!(f.payload == pattern(id, 0, p), "payload of frame {id}");
                assert!(
                    f.attachment == pattern(id, 1, a),
                    "attachment of frame {id}"
                );
            }
        });
        for id in 0..FRAMES {
            let (p, a) = SIZES[id as usize % SIZES.len()];
            conn.send(
                &FrameHeader::request(1, 0, id),
                pattern(id, 0, p),
                pattern(id, 1, a),
            )
            .await
            .unwrap();
        }
        check.await.unwrap();
    })
    .unwrap();
    // 45 frames, 5 rounds of 9: 7 large parts a round, each way.
    let st = wait_for(&rt, "released every registration", |s| {
        s.large_registrations == 0 && s.large_registered_bytes == 0
    });
    assert_eq!(st.large_sent, 2 * 5 * 7, "{st:?}");
    assert_eq!(st.large_received, st.large_sent, "{st:?}");
    assert_eq!(st.large_copied, 0, "{st:?}");
    listener.stop();
}

/// The same exchange with large messages off: everything is copied through the chunks.
#[test]
fn rdma_large_messages_can_be_turned_off() {
    let rt = runtime(1, {
        let mut o = polling();
        o.large_message_threshold = None;
        o
    });
    let addr = rdma_listen_addr();
    let listener = echo_frames(&rt, addr);
    rt.run_on(0, move || async move {
        let conn = rdma::connect(addr).await.unwrap();
        conn.send(
            &FrameHeader::request(1, 0, 1),
            "p".into(),
            pattern(1, 1, 1 << 20),
        )
        .await
        .unwrap();
        let f = conn.recv().await.unwrap().unwrap();
        assert!(f.attachment == pattern(1, 1, 1 << 20));
    })
    .unwrap();
    let st = total(&rt);
    assert_eq!((st.large_sent, st.large_received), (0, 0), "{st:?}");
    listener.stop();
}

/// A `RegisteredBuf` (one above the threshold, one far below it, and slices of them) is sent
/// many times: always by READ from its one registration, never registered per message; its
/// registration goes when the last clone does.
#[test]
fn rdma_registered_buf_is_sent_many_times_from_one_registration() {
    let rt = runtime(1, config());
    let addr = rdma_listen_addr();
    // Checks each frame and answers with a small one.
    let listener = RdmaEndpoint::bind(addr)
        .serve(&rt, |accepted| async move {
            let conn = accepted.conn;
            while let Ok(Some(f)) = conn.recv().await {
                let expect = match f.header.correlation_id % 3 {
                    0 => pattern(0, 9, 256 << 10),
                    1 => pattern(0, 8, 4096),
                    _ => pattern(0, 9, 256 << 10).slice(1000..101_000),
                };
                let ok = if f.attachment == expect { "ok" } else { "bad" };
                if conn.send(&f.header, ok.into(), Bytes::new()).await.is_err() {
                    return;
                }
            }
        })
        .unwrap();
    const SENDS: u64 = 60;
    rt.run_on(0, move || async move {
        let big = RegisteredBuf::new(pattern(0, 9, 256 << 10)).unwrap();
        let small = RegisteredBuf::new(pattern(0, 8, 4096).to_vec()).unwrap();
        assert_eq!(rdma::stats_here().registered_bufs, 2);
        let conn = rdma::connect(addr).await.unwrap();
        for id in 0..SENDS {
            let attachment = match id % 3 {
                0 => big.bytes(),
                1 => small.bytes(),
                _ => big.bytes().slice(1000..101_000),
            };
            conn.send(&FrameHeader::request(1, 0, id), Bytes::new(), attachment)
                .await
                .unwrap();
        }
        for id in 0..SENDS {
            let f = conn.recv().await.unwrap().unwrap();
            assert_eq!(f.header.correlation_id, id);
            assert_eq!(&f.payload[..], b"ok", "frame {id}");
        }
        let st = rdma::stats_here();
        assert_eq!(st.large_sent_registered, SENDS, "{st:?}");
        assert_eq!(st.large_sent, SENDS, "{st:?}");
        drop((big, small));
        assert_eq!(rdma::stats_here().registered_bufs, 0);
    })
    .unwrap();
    let st = wait_for(&rt, "released every registration", |s| {
        s.large_registrations == 0
    });
    assert_eq!(st.large_received, SENDS, "{st:?}");
    listener.stop();
}

/// A receiver that vanishes while the sender's large messages wait for it (registered, its
/// "done" never coming) releases them all on the sender's side; a sender that vanishes while
/// the receiver holds its descriptors releases everything on the receiver's side.
#[test]
fn rdma_peer_dropped_mid_transfer_releases_everything() {
    // The receiver (server) reads one frame and then nothing: the client's large messages
    // stay registered, waiting for "done".
    let srt = runtime(1, config());
    let addr = rdma_listen_addr();
    let (got_tx, got_rx) = mpsc::channel::<usize>();
    let got_tx = Arc::new(Mutex::new(got_tx));
    let listener = RdmaEndpoint::bind(addr)
        .serve(&srt, move |accepted| {
            let got_tx = got_tx.clone();
            async move {
                let conn = accepted.conn;
                let f = conn.recv().await.unwrap().unwrap();
                got_tx.lock().unwrap().send(f.attachment.len()).unwrap();
                sleep(Duration::from_secs(3600)).await;
            }
        })
        .unwrap();
    let crt = Runtime::builder().shards(1).pin(false).build().unwrap();
    rdma::install(&crt, config()).unwrap();
    let sender = crt.spawn_on(0, move || async move {
        let conn = rdma::connect(addr).await.unwrap();
        for id in 0..6 {
            let r = conn
                .send(
                    &FrameHeader::request(1, 0, id),
                    Bytes::new(),
                    pattern(id, 1, 1 << 20),
                )
                .await;
            if r.is_err() {
                break;
            }
        }
        // Keep the connection until it ends.
        while !conn.is_closed() {
            sleep(Duration::from_millis(10)).await;
        }
        conn.end_reason()
    });
    assert_eq!(
        got_rx.recv_timeout(Duration::from_secs(60)).unwrap(),
        1 << 20
    );
    let client = wait_for(&crt, "held large messages for the peer", |s| {
        s.large_registrations >= 2
    });
    let server = wait_for(&srt, "got descriptors", |s| s.large_received >= 2);
    eprintln!("before the server vanished: client {client:?}\nserver {server:?}");
    // The server goes away mid-transfer.
    listener.stop();
    drop(srt);
    let why = sender.wait().unwrap();
    eprintln!("client connection ended: {why:?}");
    wait_for(&crt, "released everything after the peer vanished", |s| {
        s.large_registrations == 0 && s.large_registered_bytes == 0 && s.connections_open == 0
    });
    drop(crt);

    // Now the sender vanishes: the server holds descriptors (and maybe reads in flight) of a
    // client runtime that is dropped.
    let srt = runtime(1, config());
    let addr = rdma_listen_addr();
    let listener = RdmaEndpoint::bind(addr)
        .serve(&srt, |accepted| async move {
            // Never reads: descriptors pile up behind the first frames.
            let _conn = accepted.conn;
            sleep(Duration::from_secs(3600)).await;
        })
        .unwrap();
    let crt = Runtime::builder().shards(1).pin(false).build().unwrap();
    rdma::install(&crt, config()).unwrap();
    let _client = crt.spawn_on(0, move || async move {
        let conn = rdma::connect(addr).await.unwrap();
        for id in 0..8 {
            let _ = conn
                .send(
                    &FrameHeader::request(1, 0, id),
                    Bytes::new(),
                    pattern(id, 1, 1 << 20),
                )
                .await;
        }
        sleep(Duration::from_secs(3600)).await;
    });
    wait_for(&srt, "got descriptors", |s| s.large_received >= 2);
    drop(crt);
    wait_for(&srt, "released everything after the peer vanished", |s| {
        s.large_registrations == 0 && s.large_registered_bytes == 0 && s.connections_open == 0
    });
    listener.stop();
}

/// Both queue pairs of a connection settle on `large_in_flight` READs each way (rxe allows
/// 128), so that many large messages are pulled at once instead of one after another (the
/// rdma_cm default of 1 serialised them); a frame still round-trips over it.
#[test]
fn rdma_queue_pairs_settle_on_large_in_flight_reads_each_way() {
    let rt = runtime(1, config());
    let addr = rdma_listen_addr();
    let (tx, rx) = mpsc::channel();
    let tx = Arc::new(Mutex::new(tx));
    let listener = RdmaEndpoint::bind(addr)
        .serve(&rt, move |accepted| {
            let tx = tx.clone();
            async move {
                let conn = accepted.conn;
                tx.lock().unwrap().send(conn.read_depths()).unwrap();
                while let Ok(Some(f)) = conn.recv().await {
                    if conn.send(&f.header, f.payload, f.attachment).await.is_err() {
                        return;
                    }
                }
            }
        })
        .unwrap();
    let want = corewire_verbs::ReadDepths::both(config().large_in_flight as u8);
    let client = rt
        .run_on(0, move || async move {
            let conn = rdma::connect(addr).await.unwrap();
            let depths = conn.read_depths();
            let big = pattern(9, 1, 1 << 20);
            conn.send(&FrameHeader::request(1, 0, 9), Bytes::new(), big.clone())
                .await
                .unwrap();
            let f = conn.recv().await.unwrap().expect("the echo");
            assert!(
                f.attachment == big,
                "the 1 MiB attachment came back changed"
            );
            depths
        })
        .unwrap();
    let server = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(client, Some(want), "client queue pair");
    assert_eq!(server, Some(want), "server queue pair");
    listener.stop();
}
