//! `corewire_runtime::sync` and `shard_local!` on real shards: tasks blocking, timing out and
//! being aborted while they wait, and per-shard values created and dropped with their shard.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use corewire_runtime::sync::{mpsc, oneshot, Mutex, Notify, Semaphore};
use corewire_runtime::{shard_id, shard_local, sleep, spawn_local, timeout, yield_now, Runtime};

#[corewire_runtime::test]
async fn bounded_channel_never_holds_more_than_its_capacity() {
    let (tx, mut rx) = mpsc::channel::<(usize, usize)>(4);
    for p in 0..8 {
        let tx = tx.clone();
        spawn_local(async move {
            for i in 0..50 {
                tx.send((p, i)).await.expect("receiver alive");
            }
        });
    }
    drop(tx);
    let mut next = [0usize; 8];
    let mut max_len = 0;
    let mut received = 0;
    while let Some((p, i)) = rx.recv().await {
        max_len = max_len.max(rx.len() + 1);
        assert_eq!(i, next[p], "one producer's messages stay in order");
        next[p] += 1;
        received += 1;
        if received % 7 == 0 {
            sleep(Duration::from_micros(100)).await;
        }
    }
    assert_eq!(received, 400);
    assert!(max_len <= 4, "queue held {max_len} > capacity 4");
}

#[corewire_runtime::test]
async fn mutex_held_across_awaits_and_a_timed_out_waiter_leaks_nothing() {
    let m = Rc::new(Mutex::new(Vec::new()));
    let holder = spawn_local({
        let m = m.clone();
        async move {
            let mut g = m.lock().await;
            g.push("holder-start");
            sleep(Duration::from_millis(30)).await;
            g.push("holder-end");
        }
    });
    yield_now().await;
    // Gives up while the holder sleeps: the lock future is dropped mid-wait.
    let gave_up = timeout(Duration::from_millis(5), m.lock()).await.is_err();
    assert!(gave_up, "the lock was held");
    holder.await.unwrap();
    let mut g = timeout(Duration::from_secs(5), m.lock())
        .await
        .expect("lock free again after the cancelled waiter");
    g.push("after");
    assert_eq!(*g, ["holder-start", "holder-end", "after"]);
}

#[corewire_runtime::test]
async fn aborted_task_returns_its_permit() {
    let sem = Rc::new(Semaphore::new(1));
    let task = spawn_local({
        let sem = sem.clone();
        async move {
            let _p = sem.acquire(1).await.unwrap();
            sleep(Duration::from_secs(3600)).await;
        }
    });
    yield_now().await;
    assert_eq!(sem.available_permits(), 0);
    task.abort();
    assert_eq!(sem.available_permits(), 1);
}

#[corewire_runtime::test]
async fn notify_and_oneshot_between_tasks() {
    let ready = Rc::new(Notify::new());
    let (tx, rx) = oneshot::channel();
    let state = Rc::new(Cell::new(0));
    spawn_local({
        let (ready, state) = (ready.clone(), state.clone());
        async move {
            ready.notified().await;
            tx.send(state.get() * 2).unwrap();
        }
    });
    sleep(Duration::from_millis(1)).await;
    state.set(21);
    ready.notify_one();
    assert_eq!(rx.await, Ok(42));
}

#[corewire_runtime::test]
async fn oneshot_sender_dropped_with_its_task() {
    let (tx, rx) = oneshot::channel::<u8>();
    let task = spawn_local(async move {
        sleep(Duration::from_secs(3600)).await;
        let _ = tx.send(1);
    });
    yield_now().await;
    task.abort();
    assert_eq!(rx.await, Err(oneshot::RecvError));
}

static DROPPED: AtomicUsize = AtomicUsize::new(0);

struct Tracked(RefCell<Vec<usize>>);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

shard_local! {
    static PER_SHARD: Tracked = Tracked(RefCell::new(Vec::new()));
    static UNUSED: Cell<u8> = Cell::new(0);
}

#[test]
fn shard_local_is_per_shard_and_dropped_when_the_shard_stops() {
    assert!(PER_SHARD.try_with(|_| ()).is_none(), "off a shard");
    let before = DROPPED.load(Ordering::SeqCst);
    let rt = Runtime::builder().shards(3).pin(false).build().unwrap();
    for round in 0..2 {
        let handles = rt.spawn_on_all(move |shard| async move {
            PER_SHARD.with(|t| t.0.borrow_mut().push(shard * 10 + round));
            assert_eq!(shard, shard_id());
        });
        for h in handles {
            h.wait().unwrap();
        }
    }
    let seen: Vec<Vec<usize>> = rt
        .spawn_on_all(|_| async { PER_SHARD.with(|t| t.0.borrow().clone()) })
        .into_iter()
        .map(|h| h.wait().unwrap())
        .collect();
    assert_eq!(seen, [vec![0, 1], vec![10, 11], vec![20, 21]]);
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        before,
        "alive while the shards run"
    );
    rt.shutdown();
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        before + 3,
        "one value per shard dropped"
    );
    let _ = &UNUSED;
}
