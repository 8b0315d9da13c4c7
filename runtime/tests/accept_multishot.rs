//! TCP accept with one armed multishot accept per listener (single-shot under
//! `COREWIRE_IO_URING=plain` or on kernels without it): many connections through few arms,
//! the bounded queue cancelling and re-arming without losing a connection, and connections
//! queued for a listener that goes away being closed.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use corewire_runtime::accept::{AcceptMode, Placement};
use corewire_runtime::net::{ListenOptions, TcpListener};
use corewire_runtime::{sleep, timeout, with_local_stats, Budget};

use common::client::{FramedClient, IO_TIMEOUT};
use common::echo;

fn plain() -> bool {
    std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain")
}

#[test]
fn many_connections_through_few_armed_accepts() {
    const CONNS: usize = 200;
    let rt = common::runtime(2);
    let multishot = rt.features().accept_multishot;
    if plain() {
        assert!(
            !multishot,
            "COREWIRE_IO_URING=plain left multishot accept on"
        );
    }
    let server = echo::start(
        &rt,
        AcceptMode::handoff(Placement::RoundRobin),
        Budget::default(),
        1024,
    );
    let addr = server.addr();
    let clients: Vec<_> = (0..CONNS)
        .map(|i| {
            thread::spawn(move || {
                let mut c = FramedClient::connect(addr).expect("connect");
                let msg = format!("hello {i}");
                c.send_frame(msg.as_bytes()).unwrap();
                assert_eq!(c.read_frame().unwrap(), msg.as_bytes());
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a client failed");
    }
    let stats = rt.stats();
    let accepted: u64 = stats.iter().map(|s| s.accepted).sum();
    let arms: u64 = stats.iter().map(|s| s.accept_multishot_arms).sum();
    assert_eq!(accepted, CONNS as u64);
    if multishot {
        assert!(arms >= 1, "no multishot accept armed");
        assert!(
            arms < CONNS as u64 / 2,
            "re-armed for most connections: {arms}"
        );
    } else {
        assert_eq!(arms, 0);
    }
}

/// More clients than the accept queue holds arrive while the acceptor is slow: the driver
/// cancels the accept at its bound (the kernel may have posted a whole batch by then), the
/// rest wait in the backlog, every one is accepted, and a later client gets a re-armed
/// accept.
#[test]
fn queue_bound_cancels_and_rearms_without_losing_connections() {
    const CONNS: u32 = 150;
    let rt = common::runtime(1);
    let multishot = rt.features().accept_multishot;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let (all_tx, all_rx) = std::sync::mpsc::channel::<()>();
    let (late_tx, late_rx) = std::sync::mpsc::channel::<()>();
    let clients = thread::spawn(move || {
        let addr = addr_rx.recv().unwrap();
        let mut first = std::net::TcpStream::connect(addr).unwrap();
        first.write_all(&u32::MAX.to_le_bytes()).unwrap();
        // Let the acceptor take the first one and fall asleep.
        thread::sleep(Duration::from_millis(50));
        let mut streams = vec![first];
        for i in 0..CONNS {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(&i.to_le_bytes()).unwrap();
            streams.push(s);
        }
        all_tx.send(()).unwrap();
        late_rx.recv().unwrap();
        let mut late = std::net::TcpStream::connect(addr).unwrap();
        late.write_all(&(u32::MAX - 1).to_le_bytes()).unwrap();
        streams.push(late);
        streams
    });
    let (seen, arms) = rt
        .run_on(0, move || async move {
            let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap(), {
                let mut o = ListenOptions::default();
                o.backlog = 1024;
                o
            })
            .unwrap();
            addr_tx.send(listener.local_addr()).unwrap();
            let mut seen = BTreeSet::new();
            let mut streams = Vec::new();
            for n in 0..=CONNS {
                let (stream, _) = timeout(IO_TIMEOUT, listener.accept())
                    .await
                    .expect("accepted in time")
                    .expect("accept");
                let chunk = stream.recv_chunk().await.unwrap().unwrap();
                let id = u32::from_le_bytes(chunk[..4].try_into().unwrap());
                seen.insert(id);
                streams.push(stream);
                if n == 0 {
                    // Slow acceptor: the clients pile up (all of them, however slowly the
                    // client thread runs), and the shard reaps their accepts meanwhile.
                    while all_rx.try_recv().is_err() {
                        sleep(Duration::from_millis(5)).await;
                    }
                    sleep(Duration::from_millis(100)).await;
                }
            }
            // The accept was cancelled at the bound: a client arriving now needs a new one.
            late_tx.send(()).unwrap();
            let (late, _) = timeout(IO_TIMEOUT, listener.accept())
                .await
                .expect("the late client was accepted in time")
                .expect("accept");
            let chunk = late.recv_chunk().await.unwrap().unwrap();
            seen.insert(u32::from_le_bytes(chunk[..4].try_into().unwrap()));
            (seen, with_local_stats(|s| s.accept_multishot_arms()))
        })
        .unwrap();
    drop(clients.join().unwrap());
    assert_eq!(
        seen.len(),
        CONNS as usize + 2,
        "a connection was lost or seen twice"
    );
    assert!(seen.contains(&u32::MAX) && seen.contains(&(u32::MAX - 1)));
    assert!((0..CONNS).all(|i| seen.contains(&i)));
    if multishot {
        assert!(arms >= 2, "the bounded queue never re-armed: {arms} arm(s)");
    } else {
        assert_eq!(arms, 0);
    }
}

/// Connections the kernel accepted for a listener that then goes away are closed, not
/// leaked: their clients see the connection end.
#[test]
fn connections_queued_for_a_dropped_listener_are_closed() {
    const QUEUED: usize = 5;
    let rt = common::runtime(1);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let (queued_tx, queued_rx) = std::sync::mpsc::channel::<()>();
    let clients = thread::spawn(move || {
        let addr = addr_rx.recv().unwrap();
        let first = std::net::TcpStream::connect(addr).unwrap();
        let rest: Vec<_> = (0..QUEUED)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        queued_tx.send(()).unwrap();
        (first, rest)
    });
    rt.run_on(0, move || async move {
        let listener =
            TcpListener::bind("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        addr_tx.send(listener.local_addr()).unwrap();
        let (first, _) = listener.accept().await.unwrap();
        while queued_rx.try_recv().is_err() {
            sleep(Duration::from_millis(5)).await;
        }
        // Let the armed accept take the rest (multishot), then drop the listener.
        sleep(Duration::from_millis(50)).await;
        drop(listener);
        drop(first);
        sleep(Duration::from_millis(50)).await;
    })
    .unwrap();
    let (_first, rest) = clients.join().unwrap();
    for mut s in rest {
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("a queued connection was left open: {other:?}"),
        }
    }
}
