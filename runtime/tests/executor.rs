//! Executor behaviour: spawning, joining, wakeups from other threads, abort, panics.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use corewire_runtime::{shard_id, sleep, spawn_local, yield_now, JoinError, Runtime};

fn rt(shards: usize) -> Runtime {
    Runtime::builder()
        .shards(shards)
        .pin(false)
        .build()
        .expect("runtime")
}

#[test]
fn spawn_and_join_local_tasks() {
    let rt = rt(1);
    let out = rt
        .run_on(0, || async {
            let counter = Rc::new(Cell::new(0));
            let handles: Vec<_> = (0..100)
                .map(|i| {
                    let c = counter.clone();
                    spawn_local(async move {
                        yield_now().await;
                        c.set(c.get() + 1);
                        i * 2
                    })
                })
                .collect();
            let mut sum = 0;
            for h in handles {
                sum += h.await.unwrap();
            }
            (sum, counter.get())
        })
        .unwrap();
    assert_eq!(out, (9900, 100));
}

#[test]
fn run_on_runs_on_the_requested_shard() {
    let rt = rt(2);
    assert_eq!(rt.run_on(0, || async { shard_id() }).unwrap(), 0);
    assert_eq!(rt.run_on(1, || async { shard_id() }).unwrap(), 1);
}

/// A waker woken from a plain OS thread must reach the parked shard (eventfd path).
#[test]
fn wake_from_foreign_thread_unparks_shard() {
    let rt = rt(1);
    let got = rt
        .run_on(0, || async {
            let slot: Arc<std::sync::Mutex<(bool, Option<std::task::Waker>)>> = Default::default();
            let s2 = slot.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let mut g = s2.lock().unwrap();
                g.0 = true;
                if let Some(w) = g.1.take() {
                    w.wake();
                }
            });
            std::future::poll_fn(|cx| {
                let mut g = slot.lock().unwrap();
                if g.0 {
                    std::task::Poll::Ready(())
                } else {
                    g.1 = Some(cx.waker().clone());
                    std::task::Poll::Pending
                }
            })
            .await;
            true
        })
        .unwrap();
    assert!(got);
    assert!(
        rt.stats()[0].parks > 0,
        "the shard should have parked while waiting"
    );
}

#[test]
fn abort_drops_the_task() {
    let rt = rt(1);
    let (result, dropped) = rt
        .run_on(0, || async {
            struct Flag(Rc<Cell<bool>>);
            impl Drop for Flag {
                fn drop(&mut self) {
                    self.0.set(true);
                }
            }
            let dropped = Rc::new(Cell::new(false));
            let flag = Flag(dropped.clone());
            let h = spawn_local(async move {
                let _flag = flag;
                sleep(Duration::from_secs(3600)).await;
            });
            yield_now().await;
            h.abort();
            (h.await, dropped.get())
        })
        .unwrap();
    assert_eq!(result, Err(JoinError::Aborted));
    assert!(dropped);
}

#[test]
fn a_panicking_task_does_not_take_the_shard_down() {
    let rt = rt(1);
    let r = rt
        .run_on(0, || async {
            let bad = spawn_local(async {
                panic!("boom (expected by this test)");
            });
            let good = spawn_local(async { 7 });
            (bad.await, good.await)
        })
        .unwrap();
    assert_eq!(r, (Err(JoinError::Aborted), Ok(7)));
    assert_eq!(rt.stats()[0].task_panics, 1);
    // The shard still serves work afterwards.
    assert_eq!(rt.run_on(0, || async { 1 }).unwrap(), 1);
}

#[test]
fn shard_hooks_run_on_each_shard_thread() {
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let (s1, s2) = (started.clone(), stopped.clone());
    let rt = Runtime::builder()
        .shards(2)
        .pin(false)
        .on_shard_start(move |id| {
            assert!(std::thread::current()
                .name()
                .unwrap()
                .ends_with(&id.to_string()));
            s1.fetch_add(1, Ordering::SeqCst);
        })
        .on_shard_stop(move |_| {
            s2.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 2);
    rt.shutdown();
    assert_eq!(stopped.load(Ordering::SeqCst), 2);
}

#[test]
fn pinned_shards_run_on_their_cpu() {
    let cpus = affinity_cpus();
    let rt = Runtime::builder()
        .shards(cpus.len())
        .cpus(cpus.clone())
        .build()
        .unwrap();
    for (i, cpu) in cpus.iter().enumerate() {
        // SAFETY-free: sched_getcpu via libc is not needed; read the thread's affinity mask.
        let on = rt
            .run_on(i, || async {
                std::fs::read_to_string("/proc/thread-self/status").unwrap()
            })
            .unwrap();
        let line = on
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap()
            .to_string();
        assert_eq!(line.split_whitespace().last().unwrap(), cpu.to_string());
    }
}

fn affinity_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .to_string();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus.truncate(2);
    cpus
}
