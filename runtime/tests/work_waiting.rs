//! `work_waiting`: a task that does long work in pieces learns that another task is ready,
//! or that a datagram arrived for a receive in flight, without yielding to find out.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use corewire_runtime::net::UdpSocket;
use corewire_runtime::{sleep, spawn_local, work_waiting};

const WAIT: Duration = Duration::from_secs(10);

#[corewire_runtime::test]
async fn a_ready_task_is_work_waiting() {
    let task = spawn_local(async { 7 });
    assert!(work_waiting(), "a task spawned and not yet run");
    assert_eq!(task.await.unwrap(), 7);
}

#[corewire_runtime::test]
async fn a_datagram_for_a_receive_in_flight_is_work_waiting() {
    let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let receive = spawn_local(async move {
        let (got, buf) = socket.recv_from(BytesMut::new(), 64).await;
        (got.unwrap().len, buf)
    });
    // The receive reaches the kernel (epoll: finds nothing and waits for readiness), and
    // the shard has nothing else to do.
    sleep(Duration::from_millis(5)).await;
    assert!(!work_waiting(), "nothing arrived yet");
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.send_to(b"ping", addr).unwrap();
    // Spins without yielding, as a walk step between two batches would.
    let started = Instant::now();
    while !work_waiting() {
        assert!(
            started.elapsed() < WAIT,
            "the datagram never showed as work"
        );
        std::hint::spin_loop();
    }
    let (len, buf) = receive.await.unwrap();
    assert_eq!((len, &buf[..]), (4, &b"ping"[..]));
}
