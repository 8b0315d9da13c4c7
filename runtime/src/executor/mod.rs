//! The shard's single-threaded executor: `!Send` tasks in a slab, a local run queue, and wakers
//! that may be woken from any thread (a foreign wake goes through the shard's remote queue).

mod holding;
mod join;
mod waker;
mod yield_now;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::Location;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use slab::Slab;

pub(crate) use holding::Holding;
pub use join::{JoinError, JoinHandle};
pub(crate) use waker::TaskWaker;
pub use yield_now::yield_now;

use crate::coop::PollEnd;
use crate::shard::stall::{StallDetector, StallSource};
use crate::shard::ShardRemote;

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

/// A task key: slab index in the low 32 bits, spawn generation in the high 32, so a stale
/// waker of a finished task never wakes the task that reused its slot.
pub(crate) type TaskKey = u64;

fn split(key: TaskKey) -> (usize, u32) {
    ((key & 0xffff_ffff) as usize, (key >> 32) as u32)
}

struct Task {
    generation: u32,
    /// `None` while the task is being polled.
    future: Option<BoxFuture>,
    waker: Arc<TaskWaker>,
    /// Aborted while it was being polled: drop it as soon as the poll returns.
    aborted: bool,
    /// Where it was spawned (`#[track_caller]`), for stall reports.
    spawned_at: &'static Location<'static>,
}

pub(crate) struct Executor {
    tasks: RefCell<Slab<Task>>,
    /// Ready tasks, each with the shard's message clock when it was woken.
    queue: RefCell<VecDeque<(TaskKey, u64)>>,
    /// Messages handed up by connections on this shard (see [`crate::coop::message_clock`]).
    messages: Cell<u64>,
    /// The message clock when the task being polled was woken.
    woken_at: Cell<u64>,
    /// When the poll running now began (`None` between polls, or with no stall detector).
    poll_started: Cell<Option<Instant>>,
    generation: Cell<u32>,
    remote: Arc<ShardRemote>,
    /// Tasks that yielded: woken only after the shard's pollers and ring had their turn.
    yielded: RefCell<Vec<Waker>>,
    /// Told when the poll running now ends ([`crate::coop::at_poll_end`]).
    poll_end: RefCell<Vec<Rc<dyn PollEnd>>>,
}

impl Executor {
    pub(crate) fn new(remote: Arc<ShardRemote>) -> Executor {
        Executor {
            tasks: RefCell::new(Slab::with_capacity(1024)),
            queue: RefCell::new(VecDeque::with_capacity(1024)),
            generation: Cell::new(0),
            remote,
            yielded: RefCell::new(Vec::new()),
            messages: Cell::new(0),
            woken_at: Cell::new(0),
            poll_started: Cell::new(None),
            poll_end: RefCell::new(Vec::new()),
        }
    }

    /// Tell `hook` when the poll running now ends; false when polls are not timed (no stall
    /// detector) or no task is being polled.
    pub(crate) fn at_poll_end(&self, hook: Rc<dyn PollEnd>) -> bool {
        if self.poll_started.get().is_none() {
            return false;
        }
        self.poll_end.borrow_mut().push(hook);
        true
    }

    /// The poll that began at `started` ended at `ended`: tell those who asked.
    fn poll_ended(&self, started: Instant, ended: Instant) {
        if self.poll_end.borrow().is_empty() {
            return;
        }
        // Taken out while the hooks run (one may ask again, for a later poll).
        let mut hooks = std::mem::take(&mut *self.poll_end.borrow_mut());
        for hook in hooks.drain(..) {
            hook.poll_ended(started, ended);
        }
        let mut kept = self.poll_end.borrow_mut();
        if kept.is_empty() {
            *kept = hooks;
        }
    }

    /// One more message handed up on this shard.
    pub(crate) fn tick_messages(&self) {
        self.messages.set(self.messages.get().wrapping_add(1));
    }

    pub(crate) fn messages(&self) -> u64 {
        self.messages.get()
    }

    /// The message clock when the task now being polled was woken (or spawned).
    pub(crate) fn poll_started(&self) -> Option<Instant> {
        self.poll_started.get()
    }

    pub(crate) fn woken_at(&self) -> u64 {
        self.woken_at.get()
    }

    pub(crate) fn spawn<F, T>(
        &self,
        future: F,
        spawned_at: &'static Location<'static>,
    ) -> JoinHandle<T>
    where
        F: Future<Output = T> + 'static,
        T: 'static,
    {
        let mut handle = None;
        self.insert(
            |key| {
                let (wrapped, join) = join::wrap(future, key);
                handle = Some(join);
                Box::pin(wrapped)
            },
            spawned_at,
        );
        handle.expect("insert makes the task")
    }

    /// A task whose output nobody awaits: no join state, so a connection's task (one per
    /// connection, idle ones included) costs its future and the executor's slot only.
    pub(crate) fn spawn_detached<F>(&self, future: F, spawned_at: &'static Location<'static>)
    where
        F: Future<Output = ()> + 'static,
    {
        self.insert(|_| Box::pin(future), spawned_at);
    }

    /// Puts the future `make` builds (given the task's key) in a new slot, ready to run.
    fn insert(
        &self,
        make: impl FnOnce(TaskKey) -> BoxFuture,
        spawned_at: &'static Location<'static>,
    ) {
        let generation = self.generation.get().wrapping_add(1);
        self.generation.set(generation);
        let mut tasks = self.tasks.borrow_mut();
        let entry = tasks.vacant_entry();
        let key = entry.key() as u64 | (u64::from(generation) << 32);
        let future = make(key);
        let waker = Arc::new(TaskWaker::new(key, self.remote.clone()));
        waker.mark_scheduled();
        entry.insert(Task {
            generation,
            future: Some(future),
            waker,
            aborted: false,
            spawned_at,
        });
        drop(tasks);
        self.queue
            .borrow_mut()
            .push_back((key, self.messages.get()));
    }

    /// Park a yielding task until the loop has reaped the ring once more.
    pub(crate) fn defer(&self, waker: Waker) {
        self.yielded.borrow_mut().push(waker);
    }

    /// Whether tasks wait in [`Executor::defer`] for the loop's next reap.
    pub(crate) fn has_yielded(&self) -> bool {
        !self.yielded.borrow().is_empty()
    }

    /// Wake the tasks that yielded; returns how many.
    pub(crate) fn wake_yielded(&self) -> usize {
        let wakers = std::mem::take(&mut *self.yielded.borrow_mut());
        let n = wakers.len();
        for w in wakers {
            w.wake();
        }
        n
    }

    /// Queue a woken task (called by wakers on the shard's own thread).
    pub(crate) fn schedule(&self, key: TaskKey) {
        self.queue
            .borrow_mut()
            .push_back((key, self.messages.get()));
    }

    pub(crate) fn has_ready(&self) -> bool {
        !self.queue.borrow().is_empty()
    }

    pub(crate) fn ready_len(&self) -> usize {
        self.queue.borrow().len()
    }

    pub(crate) fn task_count(&self) -> usize {
        self.tasks.borrow().len()
    }

    /// Poll up to `budget` ready tasks, timing each poll when `stall` is on. Returns
    /// (polled, panicked).
    pub(crate) fn run_ready(&self, budget: usize, stall: Option<&StallDetector>) -> (usize, usize) {
        let mut polled = 0;
        let mut panicked = 0;
        // One clock read per poll: each poll's end is the next one's start.
        let mut mark = stall.map(|_| Instant::now());
        while polled < budget {
            let Some((key, woken_at)) = self.queue.borrow_mut().pop_front() else {
                break;
            };
            let (index, generation) = split(key);
            let taken = {
                let mut tasks = self.tasks.borrow_mut();
                match tasks.get_mut(index) {
                    Some(t) if t.generation == generation => {
                        t.future.take().map(|f| (f, t.waker.clone(), t.spawned_at))
                    }
                    _ => None,
                }
            };
            let Some((mut future, task_waker, spawned_at)) = taken else {
                continue;
            };
            polled += 1;
            self.woken_at.set(woken_at);
            // Clear before polling so a wake during the poll queues the task again.
            task_waker.scheduled.store(false, Ordering::Release);
            let waker = Waker::from(task_waker);
            let mut cx = Context::from_waker(&waker);
            self.poll_started.set(mark);
            let outcome = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
            self.poll_started.set(None);
            if let (Some(detector), Some(start)) = (stall, mark.as_mut()) {
                let now = Instant::now();
                self.poll_ended(*start, now);
                let (shard, stats) = (self.remote.id, &self.remote.stats);
                detector.check(shard, stats, *start, now, || StallSource::Task {
                    spawned_at,
                });
                *start = now;
            }
            let finished = match outcome {
                Ok(Poll::Pending) => false,
                Ok(Poll::Ready(())) => true,
                Err(panic) => {
                    panicked += 1;
                    self.remote.stats.task_panics.incr();
                    tracing::error!(panic = %panic_message(&panic), "task panicked; dropped it");
                    true
                }
            };
            let mut tasks = self.tasks.borrow_mut();
            let task = tasks.get_mut(index).expect("a polled task keeps its slot");
            if finished || task.aborted {
                tasks.remove(index);
                drop(tasks);
                drop(future);
            } else {
                task.future = Some(future);
            }
        }
        (polled, panicked)
    }

    /// Drop a task (JoinHandle::abort). Safe to call from inside the task itself.
    pub(crate) fn abort(&self, key: TaskKey) {
        let (index, generation) = split(key);
        let future = {
            let mut tasks = self.tasks.borrow_mut();
            match tasks.get_mut(index) {
                Some(t) if t.generation == generation => match t.future.take() {
                    Some(f) => {
                        tasks.remove(index);
                        Some(f)
                    }
                    None => {
                        t.aborted = true;
                        None
                    }
                },
                _ => None,
            }
        };
        // Dropped outside the borrow: a future's destructor may spawn or abort tasks.
        drop(future);
    }

    /// Shutdown: drop every task. Destructors may spawn more, so repeat until none is left.
    pub(crate) fn drop_all(&self) {
        loop {
            let futures: Vec<BoxFuture> = {
                let mut tasks = self.tasks.borrow_mut();
                if tasks.is_empty() {
                    break;
                }
                tasks.drain().filter_map(|t| t.future).collect()
            };
            for future in futures {
                if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(future))) {
                    self.remote.stats.task_panics.incr();
                    tracing::error!(panic = %panic_message(&panic), "dropping a task panicked");
                }
            }
        }
        self.queue.borrow_mut().clear();
        self.yielded.borrow_mut().clear();
    }
}

pub(crate) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}
