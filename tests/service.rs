//! The service framework end to end over TCP on loopback.

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire::runtime::accept::{AcceptMode, Placement, TcpServer};
use corewire::transport::frame::{FrameEncoder, FrameHeader, FrameKind, FrameLimits, StatusCode};
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

thread_local! {
    static COUNTER_HITS: Cell<u64> = const { Cell::new(0) };
}

struct TlsCounter;
impl Service for TlsCounter {
    const ID: u32 = service_id("tls-counter");
    async fn call(&self, _req: Request) -> Result<Response, Status> {
        COUNTER_HITS.with(|c| c.set(c.get() + 1));
        Ok(Response::default())
    }
}

fn start(shards: usize) -> (Runtime, SocketAddr, corewire::ServerHandle) {
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
        .serve_tcp(
            &rt,
            TcpServer::bind("127.0.0.1:0".parse().unwrap())
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
        .block_on(0, move || async move {
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
        .block_on(0, move || async move {
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
        .block_on(0, move || async move {
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
    assert_eq!(unknown_service.status(), Some(StatusCode::UnknownService));
    assert_eq!(unknown_method.status(), Some(StatusCode::UnknownMethod));
    assert_eq!(bad.status(), Some(StatusCode::BadRequest));
    assert_eq!(timeout, ClientError::Timeout);
    assert_eq!(&ok_after[..], b"still here");
}

#[test]
fn shard_local_state_gathered_across_shards() {
    let (rt, addr, _h) = start(2);
    let total = rt
        .block_on(0, move || async move {
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
            rt.block_on(s, || async { COUNTER_HITS.with(|c| c.get()) })
                .unwrap()
        })
        .collect();
    assert!(per_shard.iter().all(|&n| n > 0), "{per_shard:?}");
}

/// The server goes away mid-call: every pending call resolves with an error, none hangs.
#[test]
fn pending_calls_fail_when_the_peer_goes_away() {
    let server_rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let handle = Server::builder()
        .service(|_| Echo)
        .serve_tcp(&server_rt, "127.0.0.1:0".parse().unwrap())
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
                c.call(Echo::ID, 1, Bytes::from(vec![250u8])).await
            }));
        }
        let mut out = Vec::new();
        for h in hs {
            out.push(h.await.unwrap());
        }
        out
    });
    std::thread::sleep(Duration::from_millis(50));
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
        .block_on(0, move || async move {
            let c = Client::connect_tcp(
                addr,
                ClientOptions {
                    window: 4,
                    ..Default::default()
                },
            )
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
        .block_on(0, move || async move {
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
