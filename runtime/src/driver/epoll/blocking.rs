//! Blocking calls of the epoll backend (file I/O): each runs on the blocking pool
//! (`crate::spawn_blocking`) and comes back as a completion, as from a kernel. The op's data
//! stays in a slot here until the call returned, even when its future was dropped: the call
//! writes through pointers into it.

use std::any::Any;
use std::sync::Arc;
use std::task::Waker;

use crossbeam_queue::SegQueue;
use slab::Slab;

use crate::driver::op::BlockingCall;
use crate::shard::ShardRemote;

enum Slot {
    Pending(Option<Waker>),
    Completed(i32),
    /// The future went away; `release` frees what the result carries (a new descriptor).
    Abandoned {
        #[allow(dead_code)]
        data: Box<dyn Any>,
        release: fn(i32, u32),
    },
}

/// Results the helper threads hand back, and how they wake the shard.
struct Done {
    results: SegQueue<(usize, i32)>,
    remote: Arc<ShardRemote>,
}

/// Hands the call's result back when dropped: also when the pool never ran the call (no
/// thread could be started) or the call unwound, so no slot waits forever.
struct Completion {
    key: usize,
    result: i32,
    done: Arc<Done>,
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.done.results.push((self.key, self.result));
        self.done.remote.notify();
    }
}

pub(super) struct Blocking {
    slots: Slab<Slot>,
    done: Arc<Done>,
}

impl Blocking {
    pub(super) fn new(remote: Arc<ShardRemote>) -> Blocking {
        Blocking {
            slots: Slab::new(),
            done: Arc::new(Done {
                results: SegQueue::new(),
                remote,
            }),
        }
    }

    /// Start `call` on the blocking pool; its slot key.
    pub(super) fn submit(&mut self, call: BlockingCall) -> usize {
        let key = self.slots.insert(Slot::Pending(None));
        let mut completion = Completion {
            key,
            result: -libc::EIO,
            done: self.done.clone(),
        };
        drop(crate::spawn_blocking(move || {
            completion.result = call();
            drop(completion);
        }));
        key
    }

    /// Whether results wait to be reaped (the shard must not sleep then).
    pub(super) fn has_results(&self) -> bool {
        !self.done.results.is_empty()
    }

    /// Take the results the helper threads handed back: wake their tasks, free what
    /// abandoned ones left. How many there were.
    pub(super) fn reap(&mut self) -> usize {
        let mut n = 0;
        while let Some((key, result)) = self.done.results.pop() {
            n += 1;
            let Some(slot) = self.slots.get_mut(key) else {
                continue;
            };
            match slot {
                Slot::Pending(waker) => {
                    let waker = waker.take();
                    *slot = Slot::Completed(result);
                    if let Some(w) = waker {
                        w.wake();
                    }
                }
                Slot::Abandoned { release, .. } => {
                    let release = *release;
                    self.slots.remove(key);
                    release(result, 0);
                }
                Slot::Completed(_) => {}
            }
        }
        n
    }

    pub(super) fn poll(&mut self, key: usize, waker: &Waker) -> Option<(i32, u32)> {
        match self.slots.get_mut(key)? {
            Slot::Completed(result) => {
                let result = *result;
                self.slots.remove(key);
                Some((result, 0))
            }
            Slot::Pending(w) => {
                match w {
                    Some(old) if old.will_wake(waker) => {}
                    _ => *w = Some(waker.clone()),
                }
                None
            }
            Slot::Abandoned { .. } => None,
        }
    }

    pub(super) fn abandon(&mut self, key: usize, data: Box<dyn Any>, release: fn(i32, u32)) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        match slot {
            Slot::Completed(result) => {
                let result = *result;
                self.slots.remove(key);
                drop(data);
                release(result, 0);
            }
            Slot::Pending(_) => *slot = Slot::Abandoned { data, release },
            Slot::Abandoned { .. } => {}
        }
    }

    /// Calls still running.
    pub(super) fn running(&self) -> usize {
        self.slots
            .iter()
            .filter(|(_, s)| !matches!(s, Slot::Completed(_)))
            .count()
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// At shutdown, when calls are still running: keep their data for good (a helper thread
    /// may still write into it); free the rest.
    pub(super) fn leak_running(&mut self) {
        for (_, slot) in std::mem::take(&mut self.slots) {
            match slot {
                Slot::Completed(_) => {}
                other => std::mem::forget(other),
            }
        }
    }
}
