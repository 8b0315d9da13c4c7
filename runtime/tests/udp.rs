//! UDP on the ring: datagrams both ways, connected sockets, truncation reported, an ICMP
//! error as an error value, and a socket dropped with a receive in flight.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire_runtime::net::UdpSocket;
use corewire_runtime::{sleep, spawn_local, timeout};

const WAIT: Duration = Duration::from_secs(10);

fn bind() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap()
}

#[corewire_runtime::test]
async fn send_to_and_recv_from() {
    let (a, b) = (bind(), bind());
    let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let (sent, _) = a.send_to(Bytes::from_static(b"ping"), b_addr).await;
    assert_eq!(sent.unwrap(), 4);
    let (got, buf) = b.recv_from(BytesMut::new(), 1500).await;
    let got = got.unwrap();
    assert_eq!(
        (&buf[..], got.len, got.truncated, got.from),
        (&b"ping"[..], 4, false, a_addr)
    );
    b.send_to(Bytes::from_static(b"pong"), got.from)
        .await
        .0
        .unwrap();
    let (got, buf) = a.recv_from(BytesMut::new(), 1500).await;
    assert_eq!((&buf[..], got.unwrap().from), (&b"pong"[..], b_addr));
}

#[corewire_runtime::test]
async fn connected_sockets_keep_datagram_boundaries() {
    let (server, client) = (bind(), bind());
    client.connect(server.local_addr().unwrap()).unwrap();
    assert_eq!(client.peer_addr().unwrap(), server.local_addr().unwrap());
    for i in 0..10u8 {
        client.send(Bytes::from(vec![i; 100])).await.0.unwrap();
    }
    for i in 0..10u8 {
        let (got, buf) = server.recv_from(BytesMut::with_capacity(4096), 4096).await;
        let got = got.unwrap();
        assert_eq!((got.len, got.from), (100, client.local_addr().unwrap()));
        assert_eq!(&buf[..], &[i; 100][..]);
    }
}

#[corewire_runtime::test]
async fn a_datagram_larger_than_the_buffer_is_reported_truncated() {
    let (a, b) = (bind(), bind());
    let to = b.local_addr().unwrap();
    let big: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    a.send_to(Bytes::from(big.clone()), to).await.0.unwrap();
    a.send_to(Bytes::from_static(b"next"), to).await.0.unwrap();
    let (got, buf) = b.recv_from(BytesMut::with_capacity(1000), 1000).await;
    let got = got.unwrap();
    assert!(
        got.truncated,
        "3000 bytes into a {}-byte buffer",
        buf.capacity()
    );
    assert!(buf.capacity() < 3000);
    assert_eq!(got.len, buf.len());
    assert_eq!(&buf[..], &big[..buf.len()]);
    // Truncation cut only that datagram: the next one is whole.
    let (got, buf) = b.recv_from(BytesMut::with_capacity(1000), 1000).await;
    assert!(!got.unwrap().truncated);
    assert_eq!(&buf[..], b"next");
}

#[corewire_runtime::test]
async fn port_unreachable_is_an_error_value_on_a_connected_socket() {
    // A port that was just free and is closed now (closed at once: a std socket off the ring).
    let gone = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let gone_addr = gone.local_addr().unwrap();
    drop(gone);
    let a = bind();
    a.connect(gone_addr).unwrap();
    a.send(Bytes::from_static(b"anyone?")).await.0.unwrap();
    // The ICMP port-unreachable comes back as ECONNREFUSED on the connected socket.
    let (got, _) = timeout(WAIT, a.recv_from(BytesMut::new(), 64))
        .await
        .expect("the ICMP error was reported");
    assert_eq!(
        got.unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
}

#[corewire_runtime::test]
async fn a_socket_dropped_with_a_receive_in_flight_is_closed_and_its_port_freed() {
    let a = bind();
    let addr = a.local_addr().unwrap();
    let pending = spawn_local(a.recv_from(BytesMut::new(), 64));
    sleep(Duration::from_millis(10)).await;
    // The receive holds a share of the descriptor: dropping the socket alone closes nothing.
    drop(a);
    assert!(
        UdpSocket::bind(addr).is_err(),
        "closed under a receive in flight"
    );
    // Sending to it still lands in that receive.
    bind()
        .send_to(Bytes::from_static(b"late"), addr)
        .await
        .0
        .unwrap();
    let (got, buf) = timeout(WAIT, pending).await.unwrap().unwrap();
    assert_eq!((got.unwrap().len, &buf[..]), (4, &b"late"[..]));
    // Now the last holder is gone: the port is free once the ring closed the socket.
    let mut rebound = None;
    for _ in 0..1000 {
        if let Ok(s) = UdpSocket::bind(addr) {
            rebound = Some(s);
            break;
        }
        sleep(Duration::from_millis(5)).await;
    }
    assert!(rebound.is_some(), "{addr} never freed");
}
