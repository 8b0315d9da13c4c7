//! Limits of the RDMA transport on a real soft-RoCE device (run in the VM by `cargo xtask
//! test`): a shard's buffer pool and completion queue running out, receive cancellation, and
//! a receiver that stops reading.

mod rdma_common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use bytes::Bytes;
use corewire::transport::rdma::{self, RdmaConfig, RdmaEndpoint, ReceiveQueues};
use corewire::transport::Connection;
use corewire::{sleep, spawn_local, timeout, Client, ClientOptions, Service};
use corewire_transport::frame::FrameHeader;
use rdma_common::{polling, rdma_listen_addr, runtime, setup, Echo};

/// Many large replies on a tiny pool: far more send buffers are wanted than the pool has
/// left, so the server's writers wait for send buffers to come back instead of dying (the
/// old writer returned silently and every call hung). With per-connection receive queues,
/// four connections' receive buffers fill the rest of the pool.
#[test]
fn rdma_pool_exhaustion_makes_senders_wait_and_every_call_completes() {
    // 32 chunks: 4 kept for sends (a window), 4 connections × 7 receive buffers = 28.
    let st = exhaust_the_pool({
        let mut o = polling();
        o.window = 4;
        o.receive = ReceiveQueues::PerConnection;
        o.chunk_size = 4096;
        o.slab_bytes = 16 * 4096;
        o.pool_bytes = 32 * 4096;
        o
    });
    assert!(st.pool_recv_chunks <= 28, "{st:?}");
}

/// The same with the shared receive queue: 48 chunks, 32 posted for receives (and 8 more
/// for an early refill), 8 for sends.
#[test]
fn rdma_pool_exhaustion_with_a_shared_receive_queue_makes_senders_wait() {
    let st = exhaust_the_pool({
        let mut o = polling();
        o.window = 4;
        o.receive = ReceiveQueues::Shared { buffers: 32 };
        o.chunk_size = 4096;
        o.slab_bytes = 16 * 4096;
        o.pool_bytes = 48 * 4096;
        o
    });
    assert!(st.srq_posted >= 32, "{st:?}");
}

/// Four connections, four concurrent 128 KiB echoes each (32 chunks per reply); returns the
/// server's counters.
fn exhaust_the_pool(server: RdmaConfig) -> rdma::RdmaStats {
    let s = setup(1, server);
    let addr = s.addr;
    let crt = runtime(1, {
        let mut o = polling();
        o.chunk_size = 4096;
        o
    });
    let done = crt
        .run_on(0, move || async move {
            let mut clients = Vec::new();
            for _ in 0..4 {
                clients.push(
                    Client::connect_rdma(addr, ClientOptions::default())
                        .await
                        .unwrap(),
                );
            }
            let mut tasks = Vec::new();
            for (ci, c) in clients.iter().enumerate() {
                for k in 0..4u8 {
                    let c = c.clone();
                    tasks.push(spawn_local(async move {
                        let body: Vec<u8> = (0..128 * 1024)
                            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(k + ci as u8))
                            .collect();
                        let r = c
                            .request(Echo::ID, 0)
                            .attachment(body.clone())
                            .timeout(Duration::from_secs(120))
                            .send()
                            .await
                            .unwrap();
                        assert!(r.attachment[..] == body[..], "corrupted echo");
                    }));
                }
            }
            let mut n = 0;
            for t in tasks {
                t.await.unwrap();
                n += 1;
            }
            n
        })
        .unwrap();
    assert_eq!(done, 16);
    let st = rdma::stats(&s.rt)[0];
    assert!(st.pool_waits > 0, "the pool never ran out: {st:?}");
    assert_eq!(st.connections_opened, 4, "{st:?}");
    st
}

/// The shard's completion queue holds only so many queue pairs: one more is refused with a
/// reason the client sees, the others carry on, and a closed connection's entries come back.
#[test]
fn rdma_completion_queue_full_refuses_the_connection_with_a_reason() {
    // window 4: 11 send + 4 RDMA READ (`large_in_flight`) + 7 receive work requests = 22 CQ
    // entries per queue pair.
    let small_cq = {
        let mut o = polling();
        o.window = 4;
        o.receive = ReceiveQueues::PerConnection;
        o.cq_entries = 40;
        o.cq_max_entries = 40;
        o
    };
    let s = setup(1, small_cq);
    let st = rdma::stats(&s.rt)[0];
    let fits = (st.cq_capacity / 22) as usize;
    assert!(fits >= 1, "{st:?}");
    let addr = s.addr;
    let crt = runtime(1, polling());
    crt.run_on(0, move || async move {
        let mut clients = Vec::new();
        for _ in 0..fits {
            let c = Client::connect_rdma(addr, ClientOptions::default())
                .await
                .unwrap();
            c.call(Echo::ID, 0, "in".into()).await.unwrap();
            clients.push(c);
        }
        let refused = Client::connect_rdma(addr, ClientOptions::default()).await;
        let Err(err) = refused else {
            panic!("a queue pair past the CQ's capacity was accepted");
        };
        let text = err.to_string();
        assert!(text.contains("completion queue full"), "{text}");
        assert!(text.contains("cq_max_entries"), "{text}");
        for c in &clients {
            let r = c.call(Echo::ID, 0, "still".into()).await.unwrap();
            assert_eq!(&r[..], b"still");
        }
        // Close one: its entries come back once the server has torn it down.
        drop(clients.pop());
        let mut again = None;
        for _ in 0..100 {
            sleep(Duration::from_millis(50)).await;
            if let Ok(c) = Client::connect_rdma(addr, ClientOptions::default()).await {
                again = Some(c);
                break;
            }
        }
        let again = again.expect("a closed connection's CQ entries never came back");
        let r = again.call(Echo::ID, 0, "back".into()).await.unwrap();
        assert_eq!(&r[..], b"back");
    })
    .unwrap();
    let st = rdma::stats(&s.rt)[0];
    assert!(st.cq_reserved <= st.cq_capacity, "{st:?}");
    assert!(st.connections_refused >= 1, "{st:?}");
}

/// `recv` is cancel-safe: a receive dropped by a timeout neither leaves the connection
/// answering `Busy` nor loses bytes, even when it is dropped again and again in the middle
/// of a multi-chunk frame.
#[test]
fn rdma_recv_dropped_by_a_timeout_loses_nothing() {
    // The 1 MiB frame must come in chunks (by READ it would arrive whole, at once).
    let rt = runtime(1, {
        let mut o = polling();
        o.large_message_threshold = None;
        o
    });
    let addr = rdma_listen_addr();
    let (tx, rx) = mpsc::channel::<String>();
    let tx = Arc::new(std::sync::Mutex::new(tx));
    let listener = RdmaEndpoint::bind(addr)
        .serve(&rt, move |accepted| {
            let tx = tx.clone();
            async move {
                let conn = accepted.conn;
                let report = |s: String| tx.lock().unwrap().send(s).unwrap();
                // Nothing has been sent yet: this receive times out and is dropped.
                let first = timeout(Duration::from_millis(50), conn.recv()).await;
                report(format!("first timed out: {}", first.is_err()));
                let second = timeout(Duration::from_secs(30), conn.recv()).await;
                match second {
                    Ok(Ok(Some(f))) => report(format!(
                        "second: id {} payload {:?}",
                        f.header.correlation_id,
                        String::from_utf8_lossy(&f.payload)
                    )),
                    other => report(format!("second: {:?}", other.map(|r| r.map(|_| ())))),
                }
                // A 1 MiB frame read through receives that keep being dropped part-way.
                let mut drops = 0u32;
                let frame = loop {
                    match timeout(Duration::from_micros(300), conn.recv()).await {
                        Ok(r) => break r,
                        Err(_) => drops += 1,
                    }
                };
                match frame {
                    Ok(Some(f)) => {
                        let intact = f.attachment.len() == 1 << 20
                            && f.attachment
                                .iter()
                                .enumerate()
                                .all(|(i, &b)| b == (i % 253) as u8);
                        report(format!(
                            "third: id {} intact {intact} drops>0 {}",
                            f.header.correlation_id,
                            drops > 0
                        ));
                    }
                    other => report(format!("third: {:?}", other.map(|r| r.map(|_| ())))),
                }
            }
        })
        .unwrap();
    let client = rt.spawn_on(0, move || async move {
        let conn = rdma::connect(addr).await.unwrap();
        sleep(Duration::from_millis(300)).await;
        conn.send(&FrameHeader::request(1, 0, 42), "hi".into(), Bytes::new())
            .await
            .unwrap();
        let big: Vec<u8> = (0..1 << 20).map(|i| (i % 253) as u8).collect();
        conn.send(&FrameHeader::request(1, 0, 43), Bytes::new(), big.into())
            .await
            .unwrap();
        // Stay connected until the server has read everything.
        sleep(Duration::from_secs(60)).await;
    });
    let wait = |what: &str| {
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no report of {what}"))
    };
    assert_eq!(wait("the first receive"), "first timed out: true");
    assert_eq!(wait("the second receive"), "second: id 42 payload \"hi\"");
    assert_eq!(
        wait("the third receive"),
        "third: id 43 intact true drops>0 true"
    );
    drop(client);
    listener.stop();
}

/// A receiver that never reads stops its sender: the receiving side holds its buffers back
/// (no credits), the sender's queue fills and `send` waits; nothing grows without bound. When
/// the receiver starts reading, every frame arrives, in order.
#[test]
fn rdma_receiver_that_never_reads_stops_the_sender() {
    const FRAME: usize = 64 * 1024;
    let config = {
        let mut o = polling();
        o.max_rx_buffered = 64 * 1024;
        o.max_queued_bytes = 256 * 1024;
        o
    };
    let rt = runtime(1, config);
    let addr = rdma_listen_addr();
    let start_reading = Arc::new(AtomicBool::new(false));
    let read = Arc::new(AtomicU64::new(0));
    let (go, count) = (start_reading.clone(), read.clone());
    let listener = RdmaEndpoint::bind(addr)
        .serve(&rt, move |accepted| {
            let (go, count) = (go.clone(), count.clone());
            async move {
                while !go.load(Ordering::Acquire) {
                    sleep(Duration::from_millis(10)).await;
                }
                while let Ok(Some(f)) = accepted.conn.recv().await {
                    let n = count.load(Ordering::Acquire);
                    assert_eq!(f.header.correlation_id, n, "out of order");
                    assert_eq!(f.attachment.len(), FRAME);
                    count.store(n + 1, Ordering::Release);
                }
            }
        })
        .unwrap();
    let sent = rt
        .run_on(0, move || async move {
            let conn = rdma::connect(addr).await.unwrap();
            let body = Bytes::from(vec![7u8; FRAME]);
            let mut sent = 0u64;
            loop {
                let h = FrameHeader::request(1, 0, sent);
                match timeout(
                    Duration::from_secs(3),
                    conn.send(&h, Bytes::new(), body.clone()),
                )
                .await
                {
                    Ok(r) => {
                        r.unwrap();
                        sent += 1;
                    }
                    // Backpressure reached the sender: `send` waits.
                    Err(_) => break,
                }
                assert!(sent < 200, "the sender was never stopped");
            }
            let stopped_after = sent;
            start_reading.store(true, Ordering::Release);
            // The receiver reads now: a send goes through again.
            let h = FrameHeader::request(1, 0, sent);
            timeout(Duration::from_secs(60), conn.send(&h, Bytes::new(), body))
                .await
                .expect("send still blocked after the receiver started reading")
                .unwrap();
            sent += 1;
            for _ in 0..600 {
                if read.load(Ordering::Acquire) == sent {
                    break;
                }
                sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(
                read.load(Ordering::Acquire),
                sent,
                "frames lost after the receiver started reading"
            );
            stopped_after
        })
        .unwrap();
    // Bound: the receiver's buffered bytes (64 KiB + a window of 16 × 8 KiB in flight) plus
    // the sender's queue (256 KiB) plus one frame past each limit.
    let bound = 64 * 1024 + 16 * 8 * 1024 + 256 * 1024 + 2 * FRAME;
    assert!(
        sent as usize * FRAME <= bound,
        "{sent} frames of {FRAME} B went out before the sender stopped (bound {bound} B)"
    );
    listener.stop();
}

/// A frame far larger than `max_rx_buffered` still arrives: buffers are held back only while
/// nobody waits for the rest of a frame (holding them then would stop the very bytes the
/// reader waits for).
#[test]
fn rdma_frame_larger_than_the_receive_buffer_limit_arrives() {
    let s = setup(1, {
        let mut o = polling();
        o.max_rx_buffered = 16 * 1024;
        o
    });
    let addr = s.addr;
    s.rt.run_on(0, move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        let body: Vec<u8> = (0..512 * 1024).map(|i| (i % 249) as u8).collect();
        let r = c
            .request(Echo::ID, 0)
            .attachment(body.clone())
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap();
        assert!(r.attachment[..] == body[..], "corrupted echo");
    })
    .unwrap();
}

/// Peers that are not corewire (a bad handshake) are refused with the reason, each counted as
/// a protocol error (the log line is sampled, so a flood of them is no flood of lines), and
/// the listener keeps serving real clients.
#[test]
fn rdma_bad_handshakes_are_counted_refused_and_do_not_stop_the_listener() {
    let s = setup(1, polling());
    let addr = s.addr;
    const BAD: u64 = 30;
    for i in 0..BAD {
        let (kind, data) = rdma_common::raw_connect(addr, format!("nope {i}").as_bytes());
        assert_eq!(kind, corewire_verbs::CmEventKind::Rejected);
        let reason = rdma_common::decode_reject(&data);
        assert!(
            reason
                .as_deref()
                .is_some_and(|r| r.contains("not a corewire")),
            "{reason:?}"
        );
    }
    assert!(s.rt.stats()[0].protocol_errors >= BAD);
    s.rt.run_on(0, move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        let r = c.call(Echo::ID, 0, "after".into()).await.unwrap();
        assert_eq!(&r[..], b"after");
    })
    .unwrap();
}

/// An RPC client over RDMA that sends requests and never reads the replies: the server holds
/// at most its window of handlers, stops reading from the connection (so it stops granting
/// credits, and the client's sends stall), and once the client reads, every request is
/// answered exactly once.
#[test]
fn rdma_rpc_client_that_never_reads_keeps_the_server_bounded() {
    const WINDOW: usize = 16;
    const REQUESTS: u64 = 200;
    const PAYLOAD: usize = 32 << 10;
    let rt = runtime(1, {
        let mut o = polling();
        o.max_rx_buffered = 256 << 10;
        o.max_queued_bytes = 1 << 20;
        o
    });
    let addr = rdma_listen_addr();
    let server = corewire::Server::builder()
        .service(|_| Echo)
        .options({
            let mut o = corewire::service::ServerOptions::default();
            o.max_in_flight_per_conn = WINDOW;
            o.max_queued_bytes = 1 << 20;
            o
        })
        .build()
        .serve(&rt, RdmaEndpoint::bind(addr))
        .unwrap();
    let tasks_before = rt.stats()[0].tasks_live;
    let crt = runtime(1, {
        let mut o = polling();
        o.max_queued_bytes = 256 << 10;
        o
    });
    let rt_stats = {
        let (tx, rx) = mpsc::channel::<()>();
        let (back_tx, back_rx) = mpsc::channel::<u64>();
        // The client reports when it stalled; the main thread reads the server's task count
        // then, and lets it go on.
        let client = crt.spawn_on(0, move || async move {
            let conn = rdma::connect(addr).await.unwrap();
            let payload = Bytes::from(vec![7u8; PAYLOAD]);
            let mut sent = 0u64;
            while sent < REQUESTS {
                let h = FrameHeader::request(Echo::ID, 0, sent);
                match timeout(
                    Duration::from_secs(3),
                    conn.send(&h, payload.clone(), Bytes::new()),
                )
                .await
                {
                    Ok(r) => {
                        r.unwrap();
                        sent += 1;
                    }
                    Err(_) => break,
                }
            }
            let stalled_at = sent;
            back_tx.send(stalled_at).unwrap();
            let _ = rx.recv_timeout(Duration::from_secs(60));
            // Read now, while sending the rest: each request answered exactly once.
            let reader_conn = conn.clone();
            let reader = spawn_local(async move {
                let mut seen = vec![false; REQUESTS as usize];
                for _ in 0..REQUESTS {
                    let f = timeout(Duration::from_secs(60), reader_conn.recv())
                        .await
                        .expect("replies stopped")
                        .unwrap()
                        .expect("connection closed");
                    assert_eq!(f.payload.len(), PAYLOAD);
                    let id = f.header.correlation_id as usize;
                    assert!(!seen[id], "reply {id} twice");
                    seen[id] = true;
                }
                seen.iter().all(|&s| s)
            });
            while sent < REQUESTS {
                let h = FrameHeader::request(Echo::ID, 0, sent);
                conn.send(&h, payload.clone(), Bytes::new()).await.unwrap();
                sent += 1;
            }
            (stalled_at, reader.await.unwrap())
        });
        let stalled_at = back_rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the client never stalled");
        let tasks = rt.stats()[0].tasks_live - tasks_before;
        tx.send(()).unwrap();
        let (stalled, all_answered) = client.wait().unwrap();
        assert_eq!(stalled, stalled_at);
        (stalled_at, tasks, all_answered)
    };
    let (stalled_at, tasks, all_answered) = rt_stats;
    assert!(
        stalled_at < REQUESTS / 2,
        "the server kept reading from a client that never reads ({stalled_at} requests taken)"
    );
    // The connection's reader and writer tasks and the connection's event watcher, plus at
    // most one handler per window slot.
    assert!(
        tasks <= WINDOW as u64 + 3,
        "{tasks} tasks for one connection with a window of {WINDOW}"
    );
    assert!(all_answered);
    server.stop();
}
