//! Pollers run on every loop iteration of their shard; a poller that panics is dropped and
//! counted, and the shard, its tasks and its other pollers carry on.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use corewire_runtime::{register_poller, sleep, PollOutcome, Poller};

struct Boom;

impl Poller for Boom {
    fn name(&self) -> &str {
        "boom"
    }
    fn poll(&mut self) -> PollOutcome {
        panic!("poller bug")
    }
}

/// Counts its own polls.
struct Steady(Rc<Cell<u64>>);

impl Poller for Steady {
    fn name(&self) -> &str {
        "steady"
    }
    fn poll(&mut self) -> PollOutcome {
        self.0.set(self.0.get() + 1);
        PollOutcome::Idle
    }
}

#[test]
fn a_panicking_poller_is_dropped_and_the_shard_carries_on() {
    let rt = common::runtime(1);
    rt.run_on(0, || async {
        register_poller(Box::new(Boom));
    })
    .unwrap();
    let counted =
        common::process::wait_until(Duration::from_secs(10), || rt.stats()[0].poller_panics == 1);
    assert!(
        counted,
        "the poller's panic was not counted: {}",
        rt.stats()[0]
    );
    // The review's check: a later call to the shard completes (it used to hang forever).
    let later = rt.spawn_on(0, || async { 1 });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(later.wait()));
    let got = rx.recv_timeout(Duration::from_secs(10));
    assert_eq!(
        got,
        Ok(Ok(1)),
        "a call to the shard after the poller panicked"
    );

    // Pollers registered afterwards keep running, and the panicking one was polled once.
    let polls = rt
        .run_on(0, || async {
            let count = Rc::new(Cell::new(0));
            register_poller(Box::new(Steady(count.clone())));
            sleep(Duration::from_millis(20)).await;
            count.get()
        })
        .unwrap();
    assert!(polls > 0, "a poller registered after the panic never ran");
    assert_eq!(
        rt.stats()[0].poller_panics,
        1,
        "the panicking poller was dropped"
    );
}
