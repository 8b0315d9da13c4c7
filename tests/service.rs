//! The service framework end to end over TCP on loopback.

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire::runtime::accept::{AcceptMode, Placement};
use corewire::transport::frame::{FrameEncoder, FrameHeader, FrameKind, FrameLimits, StatusCode};
use corewire::TcpEndpoint;
use corewire::{
    service_id, sleep, submit_to, Client, ClientError, ClientOptions, Request, Response, Runtime,
    Server, Service, Status,
};

struct Echo;
impl Service for Echo {
    const ID: u32 = service_id("echo");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        match req.method {
            0 => Ok(Response::new(req.payload).with_attachment(req.attachment)),
            1 => {
                // Sleep as many ms as the payload says, so replies complete out of order.
                let ms = req.payload.first().copied().unwrap_or(0) as u64;
                sleep(Duration::from_millis(ms)).await;
                Ok(Response::new(req.payload))
            }
            2 => Err(Status::BadRequest("method 2 always fails".into())),
            m => Err(Status::UnknownMethod {
                service_id: Self::ID,
                method_id: m,
            }),
        }
    }
}

/// Never answers: counts each call it then holds forever.
struct Hang(Arc<AtomicUsize>);
impl Service for Hang {
    const ID: u32 = service_id("hang");
    async fn call(&self, _req: Request) -> Result<Response, Status> {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
}

/// Per-shard state: each shard counts its own calls; `total` gathers across shards.
struct Counter {
    hits: Cell<u64>,
}
impl Service for Counter {
    const ID: u32 = service_id("counter");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        match req.method {
            0 => {
                self.hits.set(self.hits.get() + 1);
                Ok(Response::new(Bytes::from(
                    self.hits.get().to_le_bytes().to_vec(),
                )))
            }
            1 => {
                let mut total = 0;
                for shard in 0..corewire::shard_count() {
                    total += submit_to(shard, || async { COUNTER_HITS.with(|c| c.get()) })
                        .await
                        .map_err(|e| Status::Internal(e.to_string()))?;
                }
                Ok(Response::new(Bytes::from(total.to_le_bytes().to_vec())))
            }
            _ => Err(Status::BadRequest("no such method".into())),
        }
    }
}

corewire::shard_local! {
    static COUNTER_HITS: Cell<u64> = Cell::new(0);
}

struct TlsCounter;
impl Service for TlsCounter {
    const ID: u32 = service_id("tls-counter");
    async fn call(&self, _req: Request) -> Result<Response, Status> {
        COUNTER_HITS.with(|c| c.set(c.get() + 1));
        Ok(Response::default())
    }
}

fn start(shards: usize) -> (Runtime, SocketAddr, corewire::ListenerHandle) {
    let rt = Runtime::builder()
        .shards(shards)
        .pin(false)
        .build()
        .unwrap();
    let server = Server::builder()
        .service(|_| Echo)
        .service(|_| Counter { hits: Cell::new(0) })
        .service(|_| TlsCounter)
        .build();
    let handle = server
        .serve(
            &rt,
            TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
                .mode(AcceptMode::handoff(Placement::RoundRobin)),
        )
        .unwrap();
    let addr = handle.local_addr();
    (rt, addr, handle)
}

#[test]
fn echo_with_attachment() {
    let (rt, addr, _h) = start(2);
    let reply = rt
        .run_on(0, move || async move {
            let c = Client::connect_tcp(addr, ClientOptions::default())
                .await
                .unwrap();
            c.request(Echo::ID, 0)
                .payload("head")
                .attachment(vec![7u8; 100_000])
                .send()
                .await
                .unwrap()
        })
        .unwrap();
    assert_eq!(&reply.payload[..], b"head");
    assert_eq!(reply.attachment.len(), 100_000);
    assert!(reply.attachment.iter().all(|&b| b == 7));
}

#[test]
fn pipelined_calls_complete_out_of_order() {
    let (rt, addr, _h) = start(1);
    let order = rt
        .run_on(0, move || async move {
            let c = Client::connect_tcp(addr, ClientOptions::default())
                .await
                .unwrap();
            let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let mut hs = Vec::new();
            for ms in [60u8, 5, 30] {
                let c = c.clone();
                let log = log.clone();
                hs.push(corewire::spawn_local(async move {
                    let r = c.call(Echo::ID, 1, Bytes::from(vec![ms])).await.unwrap();
                    log.borrow_mut().push(r[0]);
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
            let v = log.borrow().clone();
            v
        })
        .unwrap();
    assert_eq!(order, vec![5, 30, 60]);
}

#[test]
fn errors_travel_as_typed_statuses() {
    let (rt, addr, _h) = start(1);
    let (unknown_service, unknown_method, bad, timeout, ok_after) = rt
        .run_on(0, move || async move {
            let c = Client::connect_tcp(addr, ClientOptions::default())
                .await
                .unwrap();
            let a = c.call(12345, 0, Bytes::new()).await.unwrap_err();
            let b = c.call(Echo::ID, 99, Bytes::new()).await.unwrap_err();
            let d = c.call(Echo::ID, 2, Bytes::new()).await.unwrap_err();
            let e = c
                .request(Echo::ID, 1)
                .payload(vec![200u8])
                .timeout(Duration::from_millis(20))
                .send()
                .await
                .unwrap_err();
            // The connection survives all of that.
            let ok = c.call(Echo::ID, 0, "still here".into()).await.unwrap();
            (a, b, d, e, ok)
        })
        .unwrap();
    // The very values the server produced, typed, with the service's own text.
    assert_eq!(
        unknown_service,
        ClientError::Status(Status::UnknownService(12345))
    );
    assert_eq!(
        unknown_method,
        ClientError::Status(Status::UnknownMethod {
            service_id: Echo::ID,
            method_id: 99
        })
    );
    assert_eq!(
        bad,
        ClientError::Status(Status::BadRequest("method 2 always fails".into()))
    );
    assert_eq!(bad.code(), Some(StatusCode::BadRequest));
    assert_eq!(timeout, ClientError::Timeout);
    assert_eq!(&ok_after[..], b"still here");
}

#[test]
fn shard_local_state_gathered_across_shards() {
    let (rt, addr, _h) = start(2);
    let total = rt
        .run_on(0, move || async move {
            // Four connections, placed round-robin: two land on each shard.
            let mut clients = Vec::new();
            for _ in 0..4 {
                clients.push(
                    Client::connect_tcp(addr, ClientOptions::default())
                        .await
                        .unwrap(),
                );
            }
            for (i, c) in clients.iter().enumerate() {
                for _ in 0..=i {
                    c.call(TlsCounter::ID, 0, Bytes::new()).await.unwrap();
                }
            }
            let r = clients[0].call(Counter::ID, 1, Bytes::new()).await.unwrap();
            u64::from_le_bytes(r[..8].try_into().unwrap())
        })
        .unwrap();
    assert_eq!(total, 1 + 2 + 3 + 4);
    let per_shard: Vec<u64> = (0..2)
        .map(|s| {
            rt.run_on(s, || async { COUNTER_HITS.with(|c| c.get()) })
                .unwrap()
        })
        .collect();
    assert!(per_shard.iter().all(|&n| n > 0), "{per_shard:?}");
}

/// The server goes away mid-call: every pending call resolves with an error, none hangs.
#[test]
fn pending_calls_fail_when_the_peer_goes_away() {
    let server_rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let held = Arc::new(AtomicUsize::new(0));
    let counted = held.clone();
    let handle = Server::builder()
        .service(move |_| Hang(counted.clone()))
        .build()
        .serve(
            &server_rt,
            corewire::TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let addr = handle.local_addr();
    let client_rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let calls = client_rt.spawn_on(0, move || async move {
        let c = Client::connect_tcp(addr, ClientOptions::default())
            .await
            .unwrap();
        let mut hs = Vec::new();
        for _ in 0..10 {
            let c = c.clone();
            hs.push(corewire::spawn_local(async move {
                c.call(Hang::ID, 0, Bytes::from_static(b"x")).await
            }));
        }
        let mut out = Vec::new();
        for h in hs {
            out.push(h.await.unwrap());
        }
        out
    });
    // Every call is in the server's hands before it goes away.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while held.load(Ordering::SeqCst) < 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "the calls never arrived"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server_rt.shutdown();
    let results = calls.wait().unwrap();
    assert_eq!(results.len(), 10);
    for r in results {
        assert!(matches!(r, Err(ClientError::Disconnected(_))), "{r:?}");
    }
}

/// Each kind of bad input closes (or errors) only its own connection; a well-behaved client
/// on the same shard keeps working.
#[test]
fn bad_input_leaves_neighbours_alone() {
    let (rt, addr, _h) = start(1);
    let good = rt.spawn_on(0, move || async move {
        let c = Client::connect_tcp(addr, ClientOptions::default())
            .await
            .unwrap();
        let mut n = 0u32;
        for i in 0..400u32 {
            let r = c
                .call(Echo::ID, 0, Bytes::from(i.to_le_bytes().to_vec()))
                .await
                .unwrap();
            assert_eq!(&r[..], &i.to_le_bytes());
            n += 1;
            if i % 20 == 0 {
                sleep(Duration::from_millis(1)).await;
            }
        }
        n
    });
    let limits = FrameLimits::default();
    let mut enc = FrameEncoder::new(limits);
    let valid_request = {
        let mut b = BytesMut::new();
        enc.encode_frame(&FrameHeader::request(Echo::ID, 0, 1), b"x", b"", &mut b)
            .unwrap();
        b.to_vec()
    };
    let response_never_asked = {
        let mut h = FrameHeader::request(Echo::ID, 0, 77);
        h.kind = FrameKind::Response;
        let mut b = BytesMut::new();
        enc.encode_frame(&h, b"", b"", &mut b).unwrap();
        b.to_vec()
    };
    let mut bad_header = valid_request.clone();
    for b in &mut bad_header[8..20] {
        *b = 0xff;
    }
    let mut oversize = valid_request[..8].to_vec();
    oversize[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let truncated = valid_request[..valid_request.len() - 1].to_vec();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"GET / HTTP/1.1\r\n\r\n".to_vec()),
        ("invalid header", bad_header),
        ("oversize header length", oversize),
        ("response to a request never made", response_never_asked),
        ("truncated then closed", truncated),
    ];
    for (what, bytes) in &cases {
        for _ in 0..5 {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(bytes).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut sink = Vec::new();
            // The server must close the connection (EOF), not hang.
            let r = s.read_to_end(&mut sink);
            assert!(r.is_ok(), "{what}: server did not close: {r:?}");
        }
    }
    // An unknown service gets an error reply on a connection that stays usable.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut b = BytesMut::new();
    enc.encode_frame(&FrameHeader::request(999, 0, 5), b"", b"", &mut b)
        .unwrap();
    s.write_all(&b).unwrap();
    let mut buf = BytesMut::zeroed(256);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = s.read(&mut buf).unwrap();
    buf.truncate(n);
    let mut dec = corewire::transport::frame::FrameDecoder::new(limits);
    let reply = dec.decode(&mut buf).unwrap().expect("a whole error frame");
    assert_eq!(reply.header.kind, FrameKind::Error);
    assert_eq!(reply.header.status, StatusCode::UnknownService);
    assert_eq!(reply.header.correlation_id, 5);

    assert_eq!(good.wait().unwrap(), 400);
    let stats = &rt.stats()[0];
    assert!(
        stats.protocol_errors >= 20,
        "protocol_errors = {}",
        stats.protocol_errors
    );
}

#[test]
fn window_limits_calls_in_flight() {
    let (rt, addr, _h) = start(1);
    let max_seen = rt
        .run_on(0, move || async move {
            let c = Client::connect_tcp(addr, {
                let mut o = ClientOptions::default();
                o.window = 4;
                o
            })
            .await
            .unwrap();
            let max_seen = std::rc::Rc::new(Cell::new(0));
            let mut hs = Vec::new();
            for _ in 0..20 {
                let c = c.clone();
                let m = max_seen.clone();
                hs.push(corewire::spawn_local(async move {
                    let fut = c.call(Echo::ID, 1, Bytes::from(vec![2u8]));
                    m.set(m.get().max(c.in_flight()));
                    fut.await.unwrap();
                    m.set(m.get().max(c.in_flight()));
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
            max_seen.get()
        })
        .unwrap();
    assert!(max_seen <= 4, "{max_seen}");
}

#[test]
fn pool_replaces_a_dead_connection() {
    let (rt, addr, _h) = start(1);
    let (live_before, live_after) = rt
        .run_on(0, move || async move {
            use corewire::transport::Connection;
            let pool = corewire::ClientPool::new(addr, 2, ClientOptions::default());
            for _ in 0..4 {
                let c = pool.get().await.unwrap();
                c.call(Echo::ID, 0, "p".into()).await.unwrap();
            }
            let before = pool.live();
            // Kill one pooled connection; the pool must hand out working clients anyway.
            pool.get().await.unwrap().connection().close();
            sleep(Duration::from_millis(20)).await;
            for _ in 0..4 {
                let c = pool.get().await.unwrap();
                c.call(Echo::ID, 0, "q".into()).await.unwrap();
            }
            (before, pool.live())
        })
        .unwrap();
    assert_eq!((live_before, live_after), (2, 2));
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn encode_request(enc: &mut FrameEncoder, id: u64, method: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    enc.encode_frame(
        &FrameHeader::request(Echo::ID, method, id),
        payload,
        b"",
        &mut b,
    )
    .unwrap();
    b.to_vec()
}

/// A client that writes requests and never reads: the server stops reading from it (its
/// writes stall), holds at most the window's handlers and the send queue's bytes, and once the
/// client reads, every reply arrives.
#[test]
fn a_client_that_never_reads_keeps_the_server_bounded() {
    const WINDOW: usize = 16;
    const REQUESTS: u64 = 2000;
    const PAYLOAD: usize = 64 << 10; // 2000 x 64 KiB = 125 MiB of requests
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let handle = Server::builder()
        .service(|_| Echo)
        .options({
            let mut o = corewire::service::ServerOptions::default();
            o.max_in_flight_per_conn = WINDOW;
            o.max_queued_bytes = 1 << 20;
            o
        })
        .build()
        .serve(&rt, TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let tasks_before = rt.stats()[0].tasks_live;
    let rss_before = rss_kib();

    let stream = std::net::TcpStream::connect(handle.local_addr()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sent_w = sent.clone();
    let write_all = std::thread::spawn(move || {
        let mut enc = FrameEncoder::new(FrameLimits::default());
        let payload = vec![7u8; PAYLOAD];
        for id in 0..REQUESTS {
            writer
                .write_all(&encode_request(&mut enc, id, 0, &payload))
                .unwrap();
            sent_w.store(id + 1, std::sync::atomic::Ordering::SeqCst);
        }
    });

    // Wait until the writer stalls: no progress for half a second (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = sent.load(std::sync::atomic::Ordering::SeqCst);
        if now == last || now == REQUESTS || std::time::Instant::now() > deadline {
            break;
        }
        last = now;
    }
    let stalled_at = sent.load(std::sync::atomic::Ordering::SeqCst);
    let tasks = rt.stats()[0].tasks_live - tasks_before;
    let grown_mib = rss_kib().saturating_sub(rss_before) / 1024;
    assert!(
        stalled_at < REQUESTS / 4,
        "the server kept reading from a client that never reads ({stalled_at} requests taken)"
    );
    // The connection's reader and writer tasks, plus at most one handler per window slot.
    assert!(
        tasks <= WINDOW as u64 + 2,
        "{tasks} tasks for one connection with a window of {WINDOW}"
    );
    assert!(grown_mib < 64, "server grew by {grown_mib} MiB");

    // Now read: the server resumes, and every request is answered exactly once.
    let mut reader = stream;
    reader
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut dec = corewire::transport::frame::FrameDecoder::new(FrameLimits::default());
    let mut buf = BytesMut::with_capacity(1 << 20);
    let mut seen = vec![false; REQUESTS as usize];
    let mut answered = 0;
    while answered < REQUESTS {
        while let Some(f) = dec.decode(&mut buf).unwrap() {
            assert_eq!(f.header.kind, FrameKind::Response);
            assert_eq!(f.payload.len(), PAYLOAD);
            let id = f.header.correlation_id as usize;
            assert!(!seen[id], "reply {id} twice");
            seen[id] = true;
            answered += 1;
        }
        if answered == REQUESTS {
            break;
        }
        let mut chunk = [0u8; 64 << 10];
        let n = reader
            .read(&mut chunk)
            .unwrap_or_else(|e| panic!("after {answered} replies: {e}; {}", rt.stats()[0]));
        assert!(n > 0, "server closed after {answered} replies");
        buf.extend_from_slice(&chunk[..n]);
    }
    write_all.join().unwrap();
}

corewire::shard_local! {
    static ABANDONED: Cell<u64> = Cell::new(0);
}

/// Counts handler futures the server dropped before they finished.
struct Abandoned;
impl Drop for Abandoned {
    fn drop(&mut self) {
        ABANDONED.with(|a| a.set(a.get() + 1));
    }
}

struct Stuck;
impl Service for Stuck {
    const ID: u32 = service_id("stuck");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        if req.method == 1 {
            let guard = Abandoned;
            std::future::pending::<()>().await;
            drop(guard);
        }
        Ok(Response::new(req.payload))
    }
}

/// Dropping a call (here: raced against a timer) frees its window slot at once and cancels
/// the request on the server, which drops the handler.
#[test]
fn a_dropped_call_frees_its_slot_and_cancels_on_the_server() {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let handle = Server::builder()
        .service(|_| Stuck)
        .build()
        .serve(
            &rt,
            corewire::TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let addr = handle.local_addr();
    let (gave_up, in_flight, next, abandoned) = rt
        .run_on(0, move || async move {
            let c = Client::connect_tcp(addr, {
                let mut o = ClientOptions::default();
                o.window = 1;
                o
            })
            .await
            .unwrap();
            let gave_up = corewire::timeout(
                Duration::from_millis(50),
                c.call(Stuck::ID, 1, "never".into()),
            )
            .await
            .is_err();
            let in_flight = c.in_flight();
            // The only window slot is free again.
            let next = c.call(Stuck::ID, 0, "next".into()).await.unwrap();
            let mut abandoned = 0;
            for _ in 0..1000 {
                abandoned = ABANDONED.with(|a| a.get());
                if abandoned > 0 {
                    break;
                }
                sleep(Duration::from_millis(5)).await;
            }
            (gave_up, in_flight, next, abandoned)
        })
        .unwrap();
    assert!(gave_up);
    assert_eq!(in_flight, 0);
    assert_eq!(&next[..], b"next");
    assert_eq!(
        abandoned, 1,
        "the server never dropped the cancelled handler"
    );
}

/// A correlation id reused while its request runs is a protocol error: that connection
/// closes, counted.
#[test]
fn a_reused_request_id_closes_the_connection() {
    let (rt, addr, _h) = start(1);
    let errors_before = rt.stats()[0].protocol_errors;
    let mut enc = FrameEncoder::new(FrameLimits::default());
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // Method 1 sleeps 200 ms, so the first request is still running when the second arrives.
    let mut twice = encode_request(&mut enc, 3, 1, &[200]);
    twice.extend(encode_request(&mut enc, 3, 1, &[200]));
    s.write_all(&twice).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = Vec::new();
    assert!(s.read_to_end(&mut sink).is_ok(), "server did not close");
    assert_eq!(rt.stats()[0].protocol_errors, errors_before + 1);
}
