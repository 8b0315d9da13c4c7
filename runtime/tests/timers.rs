//! Timers: sleep, timeout, interval, and that a parked shard wakes for its nearest timer.

use std::time::{Duration, Instant};

use corewire_runtime::{interval, sleep, spawn_local, timeout, Elapsed, Runtime};

fn rt() -> Runtime {
    Runtime::builder().shards(1).pin(false).build().unwrap()
}

#[test]
fn sleep_waits_at_least_its_duration() {
    let rt = rt();
    let took = rt
        .run_on(0, || async {
            let t = Instant::now();
            sleep(Duration::from_millis(30)).await;
            t.elapsed()
        })
        .unwrap();
    assert!(took >= Duration::from_millis(30), "{took:?}");
    // It does wake: the bound is only there to fail rather than hang, generous for a loaded
    // machine.
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[test]
fn timers_fire_in_deadline_order() {
    let rt = rt();
    let order = rt
        .run_on(0, || async {
            let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let hs: Vec<_> = [30u64, 10, 20]
                .into_iter()
                .map(|ms| {
                    let log = log.clone();
                    spawn_local(async move {
                        sleep(Duration::from_millis(ms)).await;
                        log.borrow_mut().push(ms);
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            let v = log.borrow().clone();
            v
        })
        .unwrap();
    assert_eq!(order, vec![10, 20, 30]);
}

#[test]
fn timeout_expires_and_drops_the_future() {
    let rt = rt();
    let r = rt
        .run_on(0, || async {
            let slow = timeout(Duration::from_millis(10), sleep(Duration::from_secs(60))).await;
            let fast = timeout(Duration::from_secs(60), async { 5 }).await;
            (slow, fast)
        })
        .unwrap();
    assert!(matches!(r, (Err(Elapsed { .. }), Ok(5))), "{r:?}");
    // The abandoned 60 s sleep must not stay armed. The gauge is refreshed once per loop
    // iteration: wait (bounded, well under the 60 s) for the shard to run one.
    let deadline = Instant::now() + Duration::from_secs(20);
    while rt.stats()[0].timers_pending != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rt.stats()[0].timers_pending, 0);
}

#[test]
fn interval_ticks_periodically() {
    let rt = rt();
    let ticks = rt
        .run_on(0, || async {
            let start = Instant::now();
            let mut iv = interval(Duration::from_millis(10));
            let mut at = Vec::new();
            for _ in 0..5 {
                at.push(iv.tick().await.duration_since(start));
            }
            at
        })
        .unwrap();
    assert_eq!(ticks.len(), 5);
    for (i, t) in ticks.iter().enumerate() {
        assert!(
            *t >= Duration::from_millis(10 * (i as u64 + 1)),
            "tick {i} at {t:?}"
        );
    }
    assert!(ticks.windows(2).all(|w| w[1] > w[0]));
}
