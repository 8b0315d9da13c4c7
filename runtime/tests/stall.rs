//! The stall detector sees a shard held on purpose, names what held it, and stays quiet for
//! well-behaved work.

use std::panic::Location;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corewire_runtime::poller::{register_poller, PollOutcome, Poller};
use corewire_runtime::shard::{StallReport, StallSource};
use corewire_runtime::{send_to, sleep, spawn_local, Runtime};

fn runtime_recording(shards: usize) -> (Runtime, Arc<Mutex<Vec<StallReport>>>) {
    runtime_with_threshold(shards, Duration::from_millis(10))
}

fn runtime_with_threshold(
    shards: usize,
    threshold: Duration,
) -> (Runtime, Arc<Mutex<Vec<StallReport>>>) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let rt = Runtime::builder()
        .shards(shards)
        .pin(false)
        .stall_threshold(Some(threshold))
        .on_stall(move |r| sink.lock().unwrap().push(r.clone()))
        .build()
        .expect("runtime");
    (rt, reports)
}

#[test]
fn a_blocking_task_is_reported_with_its_spawn_location() {
    let (rt, reports) = runtime_recording(1);
    let spawned_at = rt
        .run_on(0, || async {
            let at = Location::caller();
            let task = spawn_local(async {
                // Holds the shard: nothing else on it runs for 40 ms.
                std::thread::sleep(Duration::from_millis(40));
            });
            task.await.unwrap();
            (at.file(), at.line() + 1)
        })
        .unwrap();
    let reports = reports.lock().unwrap().clone();
    let stats = &rt.stats()[0];
    // On a loaded machine a preempted poll of another task (run_on's own) can pass the 10 ms
    // threshold too: look for the report that names the spawn_local call.
    let task_report = reports
        .iter()
        .find(|r| {
            matches!(&r.source, StallSource::Task { spawned_at: loc }
                if (loc.file(), loc.line()) == spawned_at)
        })
        .unwrap_or_else(|| panic!("no task stall at {spawned_at:?} among {reports:?}"));
    assert_eq!(task_report.shard, 0);
    assert!(task_report.duration >= Duration::from_millis(40));
    assert!(stats.stalls >= 1);
    assert!(stats.stall_longest_us >= 40_000);
}

struct Slow {
    calls: usize,
}

impl Poller for Slow {
    fn name(&self) -> &str {
        "slow-test-poller"
    }
    fn poll(&mut self) -> PollOutcome {
        self.calls += 1;
        if self.calls == 3 {
            std::thread::sleep(Duration::from_millis(25));
        }
        PollOutcome::Idle
    }
}

#[test]
fn a_blocking_poller_and_message_are_reported() {
    let (rt, reports) = runtime_recording(2);
    rt.run_on(1, || async {
        register_poller(Box::new(Slow { calls: 0 }));
        send_to(0, || std::thread::sleep(Duration::from_millis(25)))
            .await
            .unwrap();
        sleep(Duration::from_millis(50)).await;
    })
    .unwrap();
    let wait = std::time::Instant::now();
    loop {
        let r = reports.lock().unwrap().clone();
        let poller = r.iter().any(|r| {
            r.shard == 1
                && r.source
                    == StallSource::Poller {
                        name: "slow-test-poller".into(),
                    }
        });
        let message = r
            .iter()
            .any(|r| r.shard == 0 && r.source == StallSource::Message);
        if poller && message {
            break;
        }
        assert!(
            wait.elapsed() < Duration::from_secs(10),
            "missing poller or message stall in {r:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn waiting_is_not_a_stall_and_the_detector_can_be_off() {
    // Tasks that sleep longer than the threshold: the shard parks meanwhile, and parked time
    // must not count. (The threshold is generous, a second, so a poll preempted on a loaded
    // machine does not count either.)
    let (rt, reports) = runtime_with_threshold(1, Duration::from_secs(1));
    rt.run_on(0, || async {
        for _ in 0..2 {
            spawn_local(async { sleep(Duration::from_millis(1500)).await })
                .await
                .unwrap();
        }
    })
    .unwrap();
    assert!(reports.lock().unwrap().is_empty());
    assert_eq!(rt.stats()[0].stalls, 0);

    let off = Runtime::builder()
        .shards(1)
        .pin(false)
        .stall_threshold(None)
        .build()
        .unwrap();
    off.run_on(0, || async {
        std::thread::sleep(Duration::from_millis(20))
    })
    .unwrap();
    assert_eq!(off.stats()[0].stalls, 0);
}

/// A hook registered during a task's poll hears when that poll ended, once, with the start
/// `poll_started_at` gave; with no detector there are no timed polls to hook.
#[test]
fn a_poll_end_hook_hears_the_end_of_the_poll_that_registered_it() {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Instant;

    use corewire_runtime::{at_poll_end, poll_started_at, PollEnd};

    #[derive(Default)]
    struct Heard(RefCell<Vec<(Instant, Instant)>>);
    impl PollEnd for Heard {
        fn poll_ended(&self, started: Instant, ended: Instant) {
            self.0.borrow_mut().push((started, ended));
        }
    }

    let (rt, _reports) = runtime_with_threshold(1, Duration::from_secs(10));
    let (heard, started) = rt
        .run_on(0, || async {
            let heard = Rc::new(Heard::default());
            let hook = heard.clone();
            let started = spawn_local(async move {
                let started = poll_started_at().expect("a timed poll");
                assert!(at_poll_end(hook.clone()));
                std::thread::sleep(Duration::from_millis(2));
                started
            })
            .await
            .unwrap();
            let heard = heard.0.borrow().clone();
            (heard, started)
        })
        .unwrap();
    assert_eq!(heard.len(), 1, "told once: {heard:?}");
    assert_eq!(heard[0].0, started);
    assert!(heard[0].1 >= started + Duration::from_millis(2));

    let untimed = Runtime::builder()
        .shards(1)
        .pin(false)
        .stall_threshold(None)
        .build()
        .expect("runtime");
    let registered = untimed
        .run_on(0, || async {
            spawn_local(async { at_poll_end(Rc::new(Heard::default())) })
                .await
                .unwrap()
        })
        .unwrap();
    assert!(!registered, "no detector: polls are not timed");
}
