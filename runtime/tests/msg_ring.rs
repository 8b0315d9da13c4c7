//! Cross-shard wake-ups: a shard wakes a parked peer by posting a completion into the peer's
//! ring (MSG_RING) where the kernel has it, by its eventfd otherwise, with the setting off,
//! under `COREWIRE_IO_URING=plain`, and from threads that are not shards. No wake-up is lost
//! either way: every round trip to a parked shard completes.

use std::time::Duration;

use corewire_runtime::{sleep, submit_to, timeout, Runtime};

const ROUNDS: u64 = 50;

/// Round trips from shard 0 to shard 1, each after both had time to park.
fn round_trips(rt: &Runtime) {
    let answered = rt
        .run_on(0, || async {
            let mut answered = 0;
            for i in 0..ROUNDS {
                sleep(Duration::from_millis(3)).await;
                let v = timeout(
                    Duration::from_secs(10),
                    submit_to(1, move || async move { i * 2 }),
                )
                .await
                .expect("a parked shard was never woken")
                .unwrap();
                assert_eq!(v, i * 2);
                answered += 1;
            }
            answered
        })
        .unwrap();
    assert_eq!(answered, ROUNDS);
}

fn runtime(msg_ring: bool) -> Runtime {
    Runtime::builder()
        .shards(2)
        .pin(false)
        .msg_ring_wakeups(msg_ring)
        .build()
        .unwrap()
}

#[test]
fn parked_shards_are_woken_through_their_ring() {
    let rt = runtime(true);
    let msg_ring = rt.features().msg_ring;
    if std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain") {
        assert!(!msg_ring, "COREWIRE_IO_URING=plain left MSG_RING on");
    }
    round_trips(&rt);
    let stats = rt.stats();
    let by_ring: u64 = stats.iter().map(|s| s.msg_ring_wakeups).sum();
    if msg_ring {
        // Shard 1 parks between requests and shard 0 between replies.
        assert!(stats[1].msg_ring_wakeups > 0, "{}", stats[1]);
        assert!(by_ring > 0);
    } else {
        assert_eq!(by_ring, 0);
        assert!(stats[1].wakeups_sent > 0, "{}", stats[1]);
    }
}

#[test]
fn with_the_setting_off_wake_ups_use_the_eventfd() {
    let rt = runtime(false);
    round_trips(&rt);
    let stats = rt.stats();
    assert_eq!(stats.iter().map(|s| s.msg_ring_wakeups).sum::<u64>(), 0);
    assert!(stats[1].wakeups_sent > 0, "{}", stats[1]);
}

#[test]
fn threads_that_are_not_shards_wake_by_eventfd() {
    let rt = runtime(true);
    for i in 0..20u64 {
        std::thread::sleep(Duration::from_millis(3));
        assert_eq!(rt.run_on(1, move || async move { i + 1 }).unwrap(), i + 1);
    }
    let stats = rt.stats();
    assert!(stats[1].wakeups_sent > 0, "{}", stats[1]);
    assert_eq!(stats[1].msg_ring_wakeups, 0, "{}", stats[1]);
}
