//! Pollers run on every loop iteration of their shard; a poller that panics is dropped and
//! counted, and the shard, its tasks and its other pollers carry on.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use corewire_runtime::{register_poller, sleep, with_local_stats, PollOutcome, Poller};

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

/// Wakes a waiting task from its poll, once, and notes the loop iteration it did so in.
struct Waking {
    waiter: Rc<std::cell::RefCell<Option<std::task::Waker>>>,
    woke_in: Rc<Cell<u64>>,
}

impl Poller for Waking {
    fn name(&self) -> &str {
        "waking"
    }
    fn poll(&mut self) -> PollOutcome {
        match self.waiter.borrow_mut().take() {
            Some(waker) => {
                self.woke_in.set(with_local_stats(|s| s.loop_iterations()));
                waker.wake();
                PollOutcome::Progress(1)
            }
            None => PollOutcome::Idle,
        }
    }
}

/// A task a poller's completion wakes runs in the same pass of the shard loop (an RDMA reply
/// is posted in the pass that found its request), not after the inbox, the ring and the next
/// pass's timers.
#[test]
fn tasks_woken_by_a_poller_run_in_the_same_loop_pass() {
    let rt = common::runtime(1);
    let (woke_in, ran_in) = rt
        .run_on(0, || async {
            let waiter = Rc::new(std::cell::RefCell::new(None));
            let woke_in = Rc::new(Cell::new(0));
            register_poller(Box::new(Waking {
                waiter: waiter.clone(),
                woke_in: woke_in.clone(),
            }));
            let mut registered = false;
            std::future::poll_fn(|cx| {
                if registered {
                    return std::task::Poll::Ready(());
                }
                registered = true;
                *waiter.borrow_mut() = Some(cx.waker().clone());
                std::task::Poll::Pending
            })
            .await;
            let ran_in = with_local_stats(|s| s.loop_iterations());
            (woke_in.get(), ran_in)
        })
        .unwrap();
    assert!(woke_in > 0, "the poller never woke the task");
    assert_eq!(
        ran_in,
        woke_in,
        "the task ran {} loop passes after the poller woke it",
        ran_in - woke_in
    );
}
