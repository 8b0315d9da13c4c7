//! The RDMA transport on a real soft-RoCE device. `cargo xtask test` runs this binary inside
//! the rxe VM; without a device every test fails with a message saying how to get one.

mod rdma_common;

use std::time::Duration;

use bytes::{BufMut, Bytes};
use corewire::transport::rdma::{self, PollerMode, RdmaConfig, RdmaEndpoint, ReceiveQueues};
use corewire::transport::Connection;
use corewire::{sleep, spawn_local, Client, ClientError, ClientOptions, Runtime, Server, Service};
use rdma_common::{polling, rdma_listen_addr, setup, Echo};

#[test]
fn rdma_echo_of_every_size_including_multi_chunk_attachments() {
    let s = setup(2, polling());
    let addr = s.addr;
    s.rt.run_on(1, move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        for size in [
            0usize,
            1,
            100,
            8 * 1024 - 60,
            8 * 1024,
            8 * 1024 + 1,
            100_000,
            1 << 20,
        ] {
            let attachment: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let r = c
                .request(Echo::ID, 0)
                .payload(format!("size {size}"))
                .attachment(attachment.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(r.payload, Bytes::from(format!("size {size}")));
            assert_eq!(r.attachment.len(), size);
            assert!(
                r.attachment[..] == attachment[..],
                "corrupted echo at size {size}"
            );
        }
    })
    .unwrap();
}

/// Far more calls in flight than the credit window: the sender waits for credits, nothing
/// overruns the receiver, everything arrives.
#[test]
fn rdma_pipelining_beyond_the_credit_window() {
    pipelining_beyond_the_credit_window(polling());
}

/// The same with both sides sleeping on solicited completions only (credit acks and send
/// completions awaited by a writer must still wake them).
#[test]
fn rdma_pipelining_beyond_the_credit_window_with_solicited_wakeups() {
    pipelining_beyond_the_credit_window(solicited_event_mode());
}

fn pipelining_beyond_the_credit_window(base: RdmaConfig) {
    let s = setup(1, {
        let mut o = base;
        o.window = 4;
        o
    });
    let addr = s.addr;
    let n =
        s.rt.run_on(0, move || async move {
            let c = Client::connect_rdma(addr, {
                let mut o = ClientOptions::default();
                o.window = 256;
                o
            })
            .await
            .unwrap();
            let tasks: Vec<_> = (0..200u32)
                .map(|i| {
                    let c = c.clone();
                    spawn_local(async move {
                        // ~one buffer per request, so requests cannot share messages and the
                        // sender really runs out of credits.
                        let mut body = vec![(i % 251) as u8; 6000];
                        body[..4].copy_from_slice(&i.to_le_bytes());
                        let r = c
                            .call(Echo::ID, 1, Bytes::from(body.clone()))
                            .await
                            .unwrap();
                        assert_eq!(r[..], body[..]);
                    })
                })
                .collect();
            let mut n = 0;
            for t in tasks {
                t.await.unwrap();
                n += 1;
            }
            n
        })
        .unwrap();
    assert_eq!(n, 200);
    let st = rdma::stats(&s.rt);
    assert!(
        st[0].credit_waits > 0,
        "the window never filled: {:?}",
        st[0]
    );
}

#[test]
fn rdma_handoff_places_connections_least_connections_first() {
    let s = setup(2, polling());
    let addr = s.addr;
    let placed_before = s.server.as_ref().unwrap().placed_connections();
    assert_eq!(placed_before, vec![0, 0]);
    let _keep =
        s.rt.run_on(0, move || async move {
            let mut clients = Vec::new();
            for _ in 0..4 {
                let c = Client::connect_rdma(addr, ClientOptions::default())
                    .await
                    .unwrap();
                c.call(Echo::ID, 0, "x".into()).await.unwrap();
                clients.push(c);
            }
            clients.len()
        })
        .unwrap();
    assert_eq!(s.server.as_ref().unwrap().placed_connections(), vec![2, 2]);
}

fn run_modes(mode: PollerMode) -> Vec<rdma::RdmaStats> {
    run_config({
        let mut o = polling();
        o.mode = mode;
        o
    })
}

fn run_config(config: RdmaConfig) -> Vec<rdma::RdmaStats> {
    let s = setup(1, config);
    let addr = s.addr;
    s.rt.run_on(0, move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        for i in 0..50u32 {
            let r = c
                .call(Echo::ID, 0, Bytes::from(i.to_le_bytes().to_vec()))
                .await
                .unwrap();
            assert_eq!(&r[..], &i.to_le_bytes());
            if i % 10 == 0 {
                // Idle gaps, so adaptive mode falls back to waiting for events.
                sleep(Duration::from_millis(5)).await;
            }
        }
    })
    .unwrap();
    rdma::stats(&s.rt)
}

/// Calls one at a time leave an idle connection each time: the request and the reply are
/// posted by the task that sends them, not by the writer task a hop later (client and
/// server share the shard, so its counter sees both ends: 50 requests and 50 replies).
#[test]
fn rdma_idle_connection_posts_from_the_sending_task() {
    let st = run_config(polling());
    assert!(
        st[0].sends_inline >= 50,
        "fewer than half of 100 lone messages were posted inline: {:?}",
        st[0]
    );
}

#[test]
fn rdma_event_mode_completes_calls_through_the_completion_channel() {
    let st = run_modes(PollerMode::Event);
    assert!(st[0].cq_events > 0, "{:?}", st[0]);
}

/// One multishot poll on the completion channel serves every event (single-shot polls where
/// the kernel lacks it, or under `COREWIRE_IO_URING=plain`).
#[test]
fn rdma_event_mode_keeps_one_poll_armed_on_the_completion_channel() {
    let st = run_modes(PollerMode::Event);
    assert!(st[0].cq_events > 1, "{:?}", st[0]);
    let plain = std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain");
    if plain {
        assert!(st[0].cq_channel_arms >= st[0].cq_events, "{:?}", st[0]);
    } else {
        assert_eq!(st[0].cq_channel_arms, st[0].devices, "{:?}", st[0]);
    }
}

/// With solicited wake-ups only received messages wake the client's shard, never its
/// requests' own send completions. The client runs on a runtime of its own, so its CQ holds
/// one send and one receive completion per call: events (one per arming, each fired by a
/// distinct solicited completion) cannot exceed half its completions, with 8 to spare
/// for the armings that ask for every completion (at start, and while a close waits for its
/// last sends). Without the setting the send completions wake it too: 189 events for 200
/// completions in the VM, against 101 with it.
#[test]
fn rdma_solicited_wakeups_wake_on_messages_not_on_send_completions() {
    let config = {
        let mut o = polling();
        o.mode = PollerMode::Event;
        o.solicited_wakeups = true;
        o
    };
    let server = setup(1, config.clone());
    let client = rdma_common::runtime(1, config);
    let addr = server.addr;
    client
        .run_on(0, move || async move {
            let c = Client::connect_rdma(addr, ClientOptions::default())
                .await
                .unwrap();
            for i in 0..100u32 {
                let r = c
                    .call(Echo::ID, 0, Bytes::from(i.to_le_bytes().to_vec()))
                    .await
                    .unwrap();
                assert_eq!(&r[..], &i.to_le_bytes());
            }
        })
        .unwrap();
    let st = &rdma::stats(&client)[0];
    assert!(st.solicited_arms > 0, "{st:?}");
    assert!(st.cq_events > 0, "{st:?}");
    assert!(
        st.cq_events <= st.completions / 2 + 8,
        "send completions woke the shard: {st:?}"
    );
}

#[test]
fn rdma_adaptive_mode_switches_between_spinning_and_events() {
    let st = run_modes(PollerMode::Adaptive {
        idle: Duration::from_micros(500),
    });
    assert!(st[0].mode_switches >= 2, "{:?}", st[0]);
    assert!(st[0].cq_events > 0, "{:?}", st[0]);
}

#[test]
fn rdma_mode_can_be_switched_at_runtime() {
    let s = setup(1, polling());
    let addr = s.addr;
    let call = move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        c.call(Echo::ID, 0, "m".into()).await.unwrap()
    };
    s.rt.run_on(0, call).unwrap();
    rdma::set_mode(&s.rt, PollerMode::Event).unwrap();
    s.rt.run_on(0, call).unwrap();
    assert!(rdma::stats(&s.rt)[0].cq_events > 0);
}

/// A TCP echo on a shard whose RDMA poller busy-polls keeps working: the poller never blocks
/// the shard's ring.
#[test]
fn rdma_busy_poller_does_not_starve_tcp_on_the_same_shard() {
    let mut s = setup(1, polling());
    let tcp = Server::builder()
        .service(|_| Echo)
        .build()
        .serve(
            &s.rt,
            corewire::TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let tcp_addr = tcp.local_addr();
    s.tcp = Some(tcp);
    let rdma_addr = s.addr;
    let polls_before = rdma::stats(&s.rt)[0].cq_polls;
    let done =
        s.rt.run_on(0, move || async move {
            // Keep RDMA traffic going while TCP calls run on the same shard.
            let r = Client::connect_rdma(rdma_addr, ClientOptions::default())
                .await
                .unwrap();
            let rdma_load = spawn_local(async move {
                for _ in 0..200 {
                    r.call(Echo::ID, 0, "r".into()).await.unwrap();
                }
            });
            let t = Client::connect_tcp(tcp_addr, ClientOptions::default())
                .await
                .unwrap();
            let mut n = 0;
            for i in 0..500u32 {
                let reply = t
                    .call(Echo::ID, 0, Bytes::from(i.to_le_bytes().to_vec()))
                    .await
                    .unwrap();
                assert_eq!(&reply[..], &i.to_le_bytes());
                n += 1;
            }
            rdma_load.await.unwrap();
            n
        })
        .unwrap();
    assert_eq!(done, 500);
    assert!(rdma::stats(&s.rt)[0].cq_polls > polls_before + 500);
}

#[test]
fn rdma_peer_disconnect_fails_pending_calls() {
    peer_disconnect_fails_pending_calls(polling());
}

/// The same with both sides sleeping on solicited completions only.
#[test]
fn rdma_peer_disconnect_fails_pending_calls_with_solicited_wakeups() {
    peer_disconnect_fails_pending_calls(solicited_event_mode());
}

fn peer_disconnect_fails_pending_calls(config: RdmaConfig) {
    let s = setup(1, config.clone());
    let addr = s.addr;
    // A second runtime plays the client, so the server can go away under it.
    let crt = Runtime::builder().shards(1).pin(false).build().unwrap();
    rdma::install(&crt, config).unwrap();
    let (warm_tx, warm_rx) = std::sync::mpsc::channel();
    let calls = crt.spawn_on(0, move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        c.call(Echo::ID, 0, "warm".into()).await.unwrap();
        warm_tx.send(()).unwrap();
        let hs: Vec<_> = (0..5)
            .map(|_| {
                let c = c.clone();
                spawn_local(async move {
                    // Keeps calling until the connection dies.
                    loop {
                        if let Err(e) = c.call(Echo::ID, 1, "x".into()).await {
                            return e;
                        }
                    }
                })
            })
            .collect();
        let mut errs = Vec::new();
        for h in hs {
            errs.push(h.await.unwrap());
        }
        errs
    });
    // Connected and calling (not a fixed delay: set-up is slow on a loaded machine).
    warm_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the client never connected");
    std::thread::sleep(Duration::from_millis(100));
    drop(s); // stops the listener and shuts the server runtime down
    let errs = calls.wait().unwrap();
    assert_eq!(errs.len(), 5);
    for e in errs {
        assert!(matches!(e, ClientError::Disconnected(_)), "{e:?}");
    }
}

/// A queue pair forced into the error state ends its connection with an error; the shard's
/// other connections carry on.
#[test]
fn rdma_qp_error_ends_only_that_connection() {
    let s = setup(1, polling());
    let addr = s.addr;
    s.rt.run_on(0, move || async move {
        let good = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        let bad = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        bad.call(Echo::ID, 0, "a".into()).await.unwrap();
        bad.connection().inject_qp_error().unwrap();
        let err = bad.call(Echo::ID, 0, "b".into()).await.unwrap_err();
        assert!(matches!(err, ClientError::Disconnected(_)), "{err:?}");
        let why = bad.connection().end_reason().unwrap();
        assert!(
            why.contains("flush") || why.contains("Flush") || why.contains("failed"),
            "{why}"
        );
        for i in 0..20u32 {
            let r = good
                .call(Echo::ID, 0, Bytes::from(i.to_le_bytes().to_vec()))
                .await
                .unwrap();
            assert_eq!(&r[..], &i.to_le_bytes());
        }
    })
    .unwrap();
}

/// A frame over the receiver's limit closes that connection only.
#[test]
fn rdma_oversize_message_closes_only_that_connection() {
    corewire_verbs::testing::require_device();
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let small = {
        let mut o = polling();
        o.limits.max_body_len = 64 * 1024;
        o
    };
    rdma::install(&rt, small).unwrap();
    let addr = rdma_listen_addr();
    let server = Server::builder()
        .service(|_| Echo)
        .build()
        .serve(&rt, RdmaEndpoint::bind(addr))
        .unwrap();
    // The client side lives on its own runtime with the default (larger) limits.
    let crt = Runtime::builder().shards(1).pin(false).build().unwrap();
    rdma::install(&crt, polling()).unwrap();
    crt.run_on(0, move || async move {
        let good = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        let bad = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        let err = bad
            .request(Echo::ID, 0)
            .attachment(vec![0u8; 200 * 1024])
            .send()
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::Disconnected(_)), "{err:?}");
        let r = good.call(Echo::ID, 0, "fine".into()).await.unwrap();
        assert_eq!(&r[..], b"fine");
    })
    .unwrap();
    assert!(rt.stats()[0].protocol_errors >= 1);
    server.stop();
}

#[test]
fn rdma_listener_stop_keeps_live_connections() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut s = setup(1, polling());
    let addr = s.addr;
    // Handshakes both ways instead of fixed delays (set-up is slow on a loaded machine): the
    // listener stops once the connection is live, and the client goes on once it has stopped.
    let (live_tx, live_rx) = std::sync::mpsc::channel();
    let stopped = Arc::new(AtomicBool::new(false));
    let seen_stopped = stopped.clone();
    let client = s.rt.spawn_on(0, move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        c.call(Echo::ID, 0, "before".into()).await.unwrap();
        live_tx.send(()).unwrap();
        for _ in 0..6000 {
            if seen_stopped.load(Ordering::SeqCst) {
                break;
            }
            sleep(Duration::from_millis(10)).await;
        }
        assert!(
            seen_stopped.load(Ordering::SeqCst),
            "the listener never stopped"
        );
        let after = c.call(Echo::ID, 0, "after".into()).await.unwrap();
        let refused = Client::connect_rdma(addr, ClientOptions::default()).await;
        (after, refused.is_err())
    });
    live_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the client never connected");
    s.server.take().unwrap().stop();
    stopped.store(true, Ordering::SeqCst);
    let (after, refused) = client.wait().unwrap();
    assert_eq!(&after[..], b"after");
    assert!(refused, "a stopped listener still accepted");
}

/// A pool too small for a second connection: that connection is refused, the client is told
/// why, and the first one keeps working.
#[test]
fn rdma_pool_exhaustion_refuses_the_connection_cleanly() {
    // One 24-chunk slab, 8 (a window) kept for sends: exactly one connection's receive
    // buffers (window 8 + 3 acks) fit.
    let tight = {
        let mut o = polling();
        o.window = 8;
        o.receive = ReceiveQueues::PerConnection;
        o.chunk_size = 4096;
        o.slab_bytes = 24 * 4096;
        o.pool_bytes = 24 * 4096;
        o
    };
    let s = setup(1, tight);
    let addr = s.addr;
    let crt = rdma_common::runtime(1, {
        let mut o = polling();
        o.window = 8;
        o.chunk_size = 4096;
        o
    });
    crt.run_on(0, move || async move {
        let first = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        first.call(Echo::ID, 0, "one".into()).await.unwrap();
        let second = Client::connect_rdma(addr, ClientOptions::default()).await;
        let Err(err) = second else {
            panic!("the second connection should have been refused");
        };
        let text = err.to_string();
        assert!(
            text.contains("rejected") && text.contains("buffer pool full"),
            "{text}"
        );
        let r = first.call(Echo::ID, 0, "still".into()).await.unwrap();
        assert_eq!(&r[..], b"still");
    })
    .unwrap();
    let st = rdma::stats(&s.rt)[0];
    assert!(st.connections_refused >= 1, "{st:?}");
}

/// A handler slower than its sender: receive buffers are held back (no credits granted) while
/// the reader is behind, and everything still arrives in order.
#[test]
fn rdma_slow_reader_backpressures_the_sender() {
    slow_reader_backpressures_the_sender(polling());
}

/// The same with both sides sleeping on solicited completions only (credit acks and send
/// completions awaited by a writer must still wake them).
#[test]
fn rdma_slow_reader_backpressures_the_sender_with_solicited_wakeups() {
    slow_reader_backpressures_the_sender(solicited_event_mode());
}

fn slow_reader_backpressures_the_sender(base: RdmaConfig) {
    let s = setup(1, {
        let mut o = base;
        o.window = 4;
        o.max_rx_buffered = 16 * 1024;
        o
    });
    let addr = s.addr;
    let got =
        s.rt.run_on(0, move || async move {
            let c = Client::connect_rdma(addr, ClientOptions::default())
                .await
                .unwrap();
            let tasks: Vec<_> = (0..64u32)
                .map(|i| {
                    let c = c.clone();
                    spawn_local(async move {
                        let body = vec![i as u8; 6000];
                        let r = c
                            .request(Echo::ID, 1)
                            .attachment(body.clone())
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.attachment[..], body[..]);
                    })
                })
                .collect();
            let mut n = 0;
            for t in tasks {
                t.await.unwrap();
                n += 1;
            }
            n
        })
        .unwrap();
    assert_eq!(got, 64);
}

#[test]
fn rdma_connection_reports_its_stats_and_kind() {
    let s = setup(1, polling());
    let addr = s.addr;
    s.rt.run_on(0, move || async move {
        let c = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        c.call(Echo::ID, 0, "s".into()).await.unwrap();
        let conn = c.connection();
        assert_eq!(conn.kind(), corewire::transport::TransportKind::Rdma);
        let st = conn.stats();
        assert_eq!(st.frames_in, 1);
        assert_eq!(st.frames_out, 1);
        assert!(conn.peer_addr().is_some());
    })
    .unwrap();
}

fn solicited_event_mode() -> RdmaConfig {
    {
        let mut o = polling();
        o.mode = PollerMode::Event;
        o.solicited_wakeups = true;
        o
    }
}

/// An idle connection is probed every keepalive interval (a zero-byte RDMA WRITE, which rxe
/// acknowledges without a receive buffer), the probes succeed against a live peer, and the
/// connection carries calls afterwards; a busy one is not probed meanwhile.
#[test]
fn rdma_keepalive_probes_idle_connections_and_keeps_them_up() {
    let config = {
        let mut o = polling();
        o.keepalive = Some(Duration::from_millis(50));
        o
    };
    let s = setup(1, config);
    let addr = s.addr;
    let rt = &s.rt;
    let probes = || -> u64 { rdma::stats(rt).iter().map(|st| st.keepalives_sent).sum() };
    rt.run_on(0, move || async move {
        let client = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        let body = Bytes::from_static(b"before");
        assert_eq!(client.call(Echo::ID, 0, body.clone()).await.unwrap(), body);
        // Idle for many intervals: both ends probe; nothing fails.
        sleep(Duration::from_millis(600)).await;
        assert!(
            !client.is_closed(),
            "a probe to a live peer ended the connection"
        );
        let body = Bytes::from_static(b"after");
        assert_eq!(client.call(Echo::ID, 0, body.clone()).await.unwrap(), body);
    })
    .unwrap();
    let idle_probes = probes();
    // 600 ms / 50 ms on each of the two ends, one probe in flight at a time.
    assert!(idle_probes >= 4, "only {idle_probes} probes while idle");
    assert_eq!(
        rdma::stats(rt)
            .iter()
            .map(|st| st.connection_errors)
            .sum::<u64>(),
        0
    );
    // Busy for as long: calls back to back complete work every interval, so no probe.
    rt.run_on(0, move || async move {
        let client = Client::connect_rdma(addr, ClientOptions::default())
            .await
            .unwrap();
        let before = std::time::Instant::now();
        let mut calls = 0;
        while before.elapsed() < Duration::from_millis(600) {
            client
                .call(Echo::ID, 0, Bytes::from_static(b"x"))
                .await
                .unwrap();
            calls += 1;
        }
        assert!(calls > 0);
    })
    .unwrap();
    let busy_probes = probes() - idle_probes;
    // The idle connection was closed when its client dropped; the busy one may be probed
    // once per end at most, at a tick that fell between its establishment and first call.
    assert!(
        busy_probes <= 2,
        "the busy connection was probed: {busy_probes} probes"
    );
}

/// Frames written in place (`try_send_with`) on a busy connection are staged in the send
/// queue and arrive whole, among frames sent the ordinary way; an idle connection declines,
/// so its frame is posted from the sending task as before.
#[test]
fn rdma_frames_written_in_place_arrive_whole() {
    use corewire::transport::frame::{FrameHeader, FrameKind};

    const FRAMES: u64 = 300;
    fn body(id: u64) -> Vec<u8> {
        let len = [64, 4096, 6000, 20_000][(id % 4) as usize];
        (0..len).map(|i| (i as u64 + id) as u8).collect()
    }
    let s = setup(2, polling());
    let addr = s.addr;
    let (in_place, declined) =
        s.rt.run_on(1, move || async move {
            let conn = rdma::connect(addr).await.unwrap();
            let (mut in_place, mut declined) = (0u32, 0u32);
            for id in 0..FRAMES {
                let header = FrameHeader::request(Echo::ID, 0, id);
                let payload = body(id);
                let queued = conn
                    .try_send_with(&header, payload.len(), b"att", |buf| {
                        buf.put_slice(&payload)
                    })
                    .unwrap();
                if queued {
                    in_place += 1;
                } else {
                    declined += 1;
                    conn.send(&header, Bytes::from(payload), Bytes::from_static(b"att"))
                        .await
                        .unwrap();
                }
            }
            let mut seen = vec![false; FRAMES as usize];
            for _ in 0..FRAMES {
                let f = conn.recv().await.unwrap().expect("a reply");
                assert_eq!(f.header.kind, FrameKind::Response);
                let id = f.header.correlation_id;
                assert!(!std::mem::replace(&mut seen[id as usize], true));
                assert!(f.payload[..] == body(id)[..], "frame {id} corrupted");
                assert_eq!(&f.attachment[..], b"att");
            }
            (in_place, declined)
        })
        .unwrap();
    assert!(in_place > 0, "never busy: nothing was written in place");
    assert!(
        declined > 0,
        "never idle: the first frame is posted the ordinary way"
    );
}
