//! Shard timers. The loop fires expired timers each iteration and parks in the ring with the
//! nearest deadline as timeout, so a sleeping task costs no SQE and no syscall of its own.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::shard::context;

#[derive(Default)]
pub(crate) struct Timers {
    entries: BTreeMap<(Instant, u64), Waker>,
    next_id: u64,
}

impl Timers {
    pub(crate) fn insert(&mut self, deadline: Instant, waker: Waker) -> u64 {
        self.next_id += 1;
        self.entries.insert((deadline, self.next_id), waker);
        self.next_id
    }

    pub(crate) fn update(&mut self, key: (Instant, u64), waker: &Waker) {
        if let Some(w) = self.entries.get_mut(&key) {
            if !w.will_wake(waker) {
                *w = waker.clone();
            }
        }
    }

    pub(crate) fn remove(&mut self, key: (Instant, u64)) {
        self.entries.remove(&key);
    }

    /// Wake every timer due at `now`. Returns how many fired.
    pub(crate) fn fire(&mut self, now: Instant) -> usize {
        let mut fired = 0;
        while let Some(entry) = self.entries.first_entry() {
            if entry.key().0 > now {
                break;
            }
            entry.remove().wake();
            fired += 1;
        }
        fired
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.entries.keys().next().map(|(d, _)| *d)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Resolves at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
        _shard_bound: PhantomData,
    }
}

/// Resolves after `duration`.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// A timer of the current shard. `!Send`: its registration lives in the timer list of the
/// shard that polled it, and only that shard fires it.
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    entry: Option<(Instant, u64)>,
    _shard_bound: PhantomData<*const ()>,
}

impl Sleep {
    /// When the sleep ends.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Move the deadline (keeps the registration cheap for interval-like uses).
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
    }

    fn cancel(&mut self) {
        if let Some(key) = self.entry.take() {
            if let Some(ctx) = context::try_current() {
                ctx.timers.borrow_mut().remove(key);
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let ctx = context::current();
        let mut timers = ctx.timers.borrow_mut();
        match self.entry {
            Some(key) => timers.update(key, cx.waker()),
            None => {
                let id = timers.insert(self.deadline, cx.waker().clone());
                self.entry = Some((self.deadline, id));
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The deadline passed before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Run `future` for at most `duration`; it is dropped (and its I/O cancelled) on expiry.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
    .await
}

pin_project_lite::pin_project! {
    struct Timeout<F> {
        #[pin]
        future: F,
        sleep: Sleep,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Ticks every `period`, starting one period from now. Missed ticks are skipped, not bunched.
pub fn interval(period: Duration) -> Interval {
    assert!(!period.is_zero(), "interval period must be non-zero");
    Interval {
        period,
        sleep: sleep(period),
    }
}

/// Periodic ticks on the current shard (`!Send`, like [`Sleep`]).
pub struct Interval {
    period: Duration,
    sleep: Sleep,
}

impl Interval {
    /// Wait for the next tick; returns when it was due.
    pub async fn tick(&mut self) -> Instant {
        (&mut self.sleep).await;
        let now = Instant::now();
        let mut next = self.sleep.deadline() + self.period;
        if next <= now {
            next = now + self.period;
        }
        self.sleep.reset(next);
        now
    }
}
