use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::wait_queue::WaitQueue;

/// Wakes tasks of one shard waiting for an event. Holds at most one stored permit: a
/// [`notify_one`](Notify::notify_one) with nobody waiting is kept for the next
/// [`notified`](Notify::notified), so a wake-up between a check and the wait is never lost.
///
/// Waiters are woken in FIFO order. `Notify` is `!Sync`: share it between the tasks of one
/// shard through an `Rc` or a reference (no atomics, no locks).
///
/// ```
/// use corewire_runtime::sync::Notify;
/// use std::rc::Rc;
/// # let rt = corewire_runtime::Runtime::builder().shards(1).pin(false).build().unwrap();
/// # rt.run_on(0, || async {
/// let ready = Rc::new(Notify::new());
/// let waiter = corewire_runtime::spawn_local({
///     let ready = ready.clone();
///     async move { ready.notified().await; "woken" }
/// });
/// ready.notify_one();
/// assert_eq!(waiter.await.unwrap(), "woken");
/// # }).unwrap();
/// ```
#[derive(Default)]
pub struct Notify {
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    permit: bool,
    /// Bumped by every `notify_waiters`, so a `Notified` created before one completes.
    epoch: u64,
    waiters: WaitQueue<Wait>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Waiting,
    /// Chosen by `notify_one`: passed on to the next waiter if dropped unconsumed.
    One,
    /// Woken by `notify_waiters`.
    All,
}

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.borrow();
        f.debug_struct("Notify")
            .field("permit", &inner.permit)
            .finish_non_exhaustive()
    }
}

impl Notify {
    /// A `Notify` with no waiter and no stored permit.
    pub fn new() -> Notify {
        Notify::default()
    }

    /// Wait for a notification. A `Notified` created before a
    /// [`notify_waiters`](Notify::notify_waiters) call completes even if it was not polled
    /// yet.
    ///
    /// **Cancel-safe**: dropping a `Notified` that `notify_one` had picked hands the
    /// notification to the next waiter (or stores it as the permit), so it is never lost.
    pub fn notified(&self) -> Notified<'_> {
        Notified {
            notify: self,
            epoch: self.inner.borrow().epoch,
            key: None,
            done: false,
        }
    }

    /// Wake the first waiter, or store a permit for the next `notified()` if none waits
    /// (several calls with nobody waiting store one permit).
    pub fn notify_one(&self) {
        let waker = {
            let mut inner = self.inner.borrow_mut();
            match inner.waiters.front() {
                Some(key) => {
                    *inner.waiters.state_mut(key) = Wait::One;
                    inner.waiters.unlink(key)
                }
                None => {
                    inner.permit = true;
                    None
                }
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Wake every task waiting now (and every `Notified` already created). Stores no permit.
    pub fn notify_waiters(&self) {
        let mut wakers: Vec<Waker> = Vec::new();
        {
            let mut inner = self.inner.borrow_mut();
            inner.epoch += 1;
            while let Some(key) = inner.waiters.front() {
                *inner.waiters.state_mut(key) = Wait::All;
                wakers.extend(inner.waiters.unlink(key));
            }
        }
        for w in wakers {
            w.wake();
        }
    }
}

/// Future of [`Notify::notified`].
#[must_use = "futures do nothing unless awaited"]
pub struct Notified<'a> {
    notify: &'a Notify,
    epoch: u64,
    key: Option<usize>,
    done: bool,
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(());
        }
        let mut inner = this.notify.inner.borrow_mut();
        match this.key {
            None => {
                if inner.epoch != this.epoch || std::mem::take(&mut inner.permit) {
                    this.done = true;
                    return Poll::Ready(());
                }
                this.key = Some(inner.waiters.push_back(Wait::Waiting, cx.waker()));
                Poll::Pending
            }
            Some(key) => {
                if *inner.waiters.state(key) == Wait::Waiting {
                    inner.waiters.set_waker(key, cx.waker());
                    return Poll::Pending;
                }
                inner.waiters.remove(key);
                this.key = None;
                this.done = true;
                Poll::Ready(())
            }
        }
    }
}

impl Drop for Notified<'_> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        let state = self.notify.inner.borrow_mut().waiters.remove(key);
        if state == Wait::One {
            self.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::{poll, CountingWaker};

    #[test]
    fn permit_is_stored_once() {
        let n = Notify::new();
        n.notify_one();
        n.notify_one();
        let w = CountingWaker::new();
        assert!(poll(&mut n.notified(), &w).is_ready());
        assert!(poll(&mut n.notified(), &w).is_pending());
    }

    #[test]
    fn notify_one_wakes_in_fifo_order() {
        let n = Notify::new();
        let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
        let mut a = Box::pin(n.notified());
        let mut b = Box::pin(n.notified());
        assert!(poll(&mut a, &wa).is_pending());
        assert!(poll(&mut b, &wb).is_pending());
        n.notify_one();
        assert_eq!((wa.count(), wb.count()), (1, 0));
        assert!(poll(&mut b, &wb).is_pending());
        assert!(poll(&mut a, &wa).is_ready());
        n.notify_one();
        assert_eq!(wb.count(), 1);
        assert!(poll(&mut b, &wb).is_ready());
    }

    #[test]
    fn dropped_chosen_waiter_passes_the_notification_on() {
        let n = Notify::new();
        let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
        let mut a = Box::pin(n.notified());
        let mut b = Box::pin(n.notified());
        assert!(poll(&mut a, &wa).is_pending());
        assert!(poll(&mut b, &wb).is_pending());
        n.notify_one();
        drop(a);
        assert_eq!(wb.count(), 1, "the notification moved to the next waiter");
        assert!(poll(&mut b, &wb).is_ready());
        // Dropped with nobody else waiting: the notification becomes the permit.
        let mut c = Box::pin(n.notified());
        assert!(poll(&mut c, &wa).is_pending());
        n.notify_one();
        drop(c);
        assert!(poll(&mut n.notified(), &wa).is_ready());
    }

    #[test]
    fn dropped_waiting_waiter_is_forgotten() {
        let n = Notify::new();
        let w = CountingWaker::new();
        let mut a = Box::pin(n.notified());
        assert!(poll(&mut a, &w).is_pending());
        drop(a);
        n.notify_one();
        assert_eq!(w.count(), 0);
        assert!(poll(&mut n.notified(), &w).is_ready(), "kept as the permit");
    }

    #[test]
    fn notify_waiters_wakes_everyone_including_unpolled() {
        let n = Notify::new();
        let w = CountingWaker::new();
        let mut a = Box::pin(n.notified());
        assert!(poll(&mut a, &w).is_pending());
        let mut unpolled = Box::pin(n.notified());
        n.notify_waiters();
        assert_eq!(w.count(), 1);
        assert!(poll(&mut a, &w).is_ready());
        assert!(poll(&mut unpolled, &w).is_ready());
        // No permit stored.
        assert!(poll(&mut n.notified(), &w).is_pending());
    }
}
