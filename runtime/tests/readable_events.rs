//! `io::ReadableEvents`: one armed multishot poll serves every wake-up of a foreign
//! descriptor (single-shot polls under `COREWIRE_IO_URING=plain`), wake-ups that arrive
//! while nobody waits are kept (merged), and dropping it cancels the poll.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use corewire_runtime::io::ReadableEvents;
use corewire_runtime::{sleep, timeout};

fn plain() -> bool {
    std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain")
}

/// Generous: this is a "did it wake at all" limit, not a latency check.
const WAKE_LIMIT: Duration = Duration::from_secs(20);

#[corewire_runtime::test]
async fn one_armed_poll_serves_every_wake_up() {
    let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
    ours.set_nonblocking(true).unwrap();
    let mut events = ReadableEvents::new(ours);
    assert_eq!(events.is_multishot(), !plain());
    for round in 0..5u8 {
        theirs.write_all(&[round]).unwrap();
        timeout(WAKE_LIMIT, events.readable())
            .await
            .expect("woken")
            .expect("no error");
        let mut byte = [0u8; 1];
        events.get_ref().read_exact(&mut byte).unwrap();
        assert_eq!(byte[0], round);
    }
    if events.is_multishot() {
        assert_eq!(events.arms(), 1, "the multishot poll was re-armed");
    } else {
        assert_eq!(events.arms(), 5);
    }
}

#[corewire_runtime::test]
async fn a_wake_up_while_nobody_waits_is_kept() {
    let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
    ours.set_nonblocking(true).unwrap();
    let mut events = ReadableEvents::new(ours);
    // Armed by a wait that is given up (dropped) before anything arrives.
    assert!(timeout(Duration::from_millis(1), events.readable())
        .await
        .is_err());
    // Several writes while nobody waits: at least one wake-up is kept for the next wait.
    for _ in 0..3 {
        theirs.write_all(b"x").unwrap();
    }
    timeout(WAKE_LIMIT, events.readable())
        .await
        .expect("the wake-up was kept")
        .expect("no error");
}

#[corewire_runtime::test]
async fn dropping_it_cancels_the_poll_and_closes_the_descriptor() {
    let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
    let mut events = ReadableEvents::new(ours);
    assert!(timeout(Duration::from_millis(1), events.readable())
        .await
        .is_err());
    drop(events);
    // Our end is closed once the poll let go of it (the cancel goes out when this shard
    // next submits, hence the asynchronous wait): the peer sees end of stream.
    theirs.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + WAKE_LIMIT;
    let mut buf = [0u8; 1];
    loop {
        match theirs.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => panic!("nothing was written"),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the descriptor stayed open"
                );
                sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("read: {e}"),
        }
    }
}
