use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::wait_queue::WaitQueue;

/// A counting semaphore for the tasks of one shard, strictly FIFO: a waiter at the head that
/// asks for more permits than are free holds back everyone behind it (no starvation of large
/// requests). `!Sync`: share it through an `Rc` or a reference.
///
/// Permits go back when the [`Permit`] is dropped. **`acquire` is cancel-safe**: dropping the
/// future gives back any permits it had been granted and lets the waiters behind it move up.
pub struct Semaphore {
    inner: RefCell<Inner>,
}

struct Inner {
    permits: usize,
    closed: bool,
    waiters: WaitQueue<Acq>,
}

struct Acq {
    need: usize,
    granted: bool,
}

/// The semaphore was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireError;

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("semaphore closed")
    }
}

impl std::error::Error for AcquireError {}

/// Why [`Semaphore::try_acquire`] gave no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryAcquireError {
    /// The semaphore was closed.
    Closed,
    /// Not enough permits free now, or other tasks are already waiting (FIFO).
    NoPermits,
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryAcquireError::Closed => f.write_str("semaphore closed"),
            TryAcquireError::NoPermits => f.write_str("no permits available"),
        }
    }
}

impl std::error::Error for TryAcquireError {}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.borrow();
        f.debug_struct("Semaphore")
            .field("permits", &inner.permits)
            .field("closed", &inner.closed)
            .finish_non_exhaustive()
    }
}

impl Semaphore {
    /// The most permits a semaphore can hold.
    pub const MAX_PERMITS: usize = usize::MAX >> 3;

    /// A semaphore with `permits` free permits (at most [`Semaphore::MAX_PERMITS`]).
    pub fn new(permits: usize) -> Semaphore {
        assert!(permits <= Self::MAX_PERMITS, "too many permits");
        Semaphore {
            inner: RefCell::new(Inner {
                permits,
                closed: false,
                waiters: WaitQueue::default(),
            }),
        }
    }

    /// Permits free now.
    pub fn available_permits(&self) -> usize {
        self.inner.borrow().permits
    }

    /// Whether tasks are waiting in [`acquire`](Semaphore::acquire) (then no newcomer gets a
    /// permit before them, even if enough are free).
    pub fn has_waiters(&self) -> bool {
        !self.inner.borrow().waiters.is_empty()
    }

    /// Whether [`close`](Semaphore::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.borrow().closed
    }

    /// Add `n` permits (waking waiters that now fit, in order).
    pub fn add_permits(&self, n: usize) {
        let wakers = {
            let mut inner = self.inner.borrow_mut();
            inner.permits = inner.permits.saturating_add(n).min(Self::MAX_PERMITS);
            inner.grant()
        };
        wake_all(wakers);
    }

    /// Close: waiting and future acquires fail; permits already handed out stay valid.
    pub fn close(&self) {
        let mut wakers = Vec::new();
        {
            let mut inner = self.inner.borrow_mut();
            inner.closed = true;
            while let Some(key) = inner.waiters.front() {
                wakers.extend(inner.waiters.unlink(key));
            }
        }
        wake_all(wakers);
    }

    /// Wait for `n` permits (cancel-safe, see the type's docs).
    pub fn acquire(&self, n: usize) -> Acquire<'_> {
        Acquire {
            waiter: Waiter::new(self, n),
        }
    }

    /// Like [`acquire`](Semaphore::acquire), holding the semaphore by `Rc` so the permit can
    /// be kept in a struct or moved into another task of the shard.
    pub fn acquire_owned(self: Rc<Self>, n: usize) -> AcquireOwned {
        AcquireOwned {
            waiter: Waiter::new(self, n),
        }
    }

    /// Take `n` permits now. Fails while others wait, even if `n` are free (FIFO).
    pub fn try_acquire(&self, n: usize) -> Result<Permit<'_>, TryAcquireError> {
        self.take_now(n).map(|()| Permit { sem: self, n })
    }

    /// [`try_acquire`](Semaphore::try_acquire) for an `Rc`-held semaphore.
    pub fn try_acquire_owned(self: Rc<Self>, n: usize) -> Result<OwnedPermit, TryAcquireError> {
        self.take_now(n).map(|()| OwnedPermit { sem: self, n })
    }

    fn take_now(&self, n: usize) -> Result<(), TryAcquireError> {
        let mut inner = self.inner.borrow_mut();
        if inner.closed {
            return Err(TryAcquireError::Closed);
        }
        if inner.waiters.is_empty() && inner.permits >= n {
            inner.permits -= n;
            Ok(())
        } else {
            Err(TryAcquireError::NoPermits)
        }
    }

    fn release(&self, n: usize) {
        self.add_permits(n);
    }
}

impl Inner {
    /// Grant permits to the waiters at the head while they fit; returns the wakers to wake.
    fn grant(&mut self) -> Vec<Waker> {
        let mut wakers = Vec::new();
        while let Some(key) = self.waiters.front() {
            let need = self.waiters.state(key).need;
            if self.permits < need {
                break;
            }
            self.permits -= need;
            self.waiters.state_mut(key).granted = true;
            wakers.extend(self.waiters.unlink(key));
        }
        wakers
    }
}

fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

/// The waiting logic shared by [`Acquire`] and [`AcquireOwned`].
struct Waiter<S: Deref<Target = Semaphore>> {
    sem: Option<S>,
    n: usize,
    key: Option<usize>,
}

impl<S: Deref<Target = Semaphore>> Waiter<S> {
    fn new(sem: S, n: usize) -> Self {
        Waiter {
            sem: Some(sem),
            n,
            key: None,
        }
    }

    /// Ready with the semaphore handle once `n` permits are ours.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<S, AcquireError>> {
        let sem = self.sem.as_ref().expect("acquire polled after completion");
        let mut inner = sem.inner.borrow_mut();
        match self.key {
            None => {
                if inner.closed {
                    return Poll::Ready(Err(AcquireError));
                }
                if inner.waiters.is_empty() && inner.permits >= self.n {
                    inner.permits -= self.n;
                    drop(inner);
                    return Poll::Ready(Ok(self.sem.take().expect("checked above")));
                }
                let acq = Acq {
                    need: self.n,
                    granted: false,
                };
                self.key = Some(inner.waiters.push_back(acq, cx.waker()));
                Poll::Pending
            }
            Some(key) => {
                if inner.waiters.state(key).granted {
                    inner.waiters.remove(key);
                    self.key = None;
                    drop(inner);
                    return Poll::Ready(Ok(self.sem.take().expect("checked above")));
                }
                if inner.closed {
                    inner.waiters.remove(key);
                    self.key = None;
                    return Poll::Ready(Err(AcquireError));
                }
                inner.waiters.set_waker(key, cx.waker());
                Poll::Pending
            }
        }
    }
}

impl<S: Deref<Target = Semaphore>> Drop for Waiter<S> {
    fn drop(&mut self) {
        let (Some(sem), Some(key)) = (self.sem.as_ref(), self.key.take()) else {
            return;
        };
        let wakers = {
            let mut inner = sem.inner.borrow_mut();
            let was_head = inner.waiters.front() == Some(key);
            let acq = inner.waiters.remove(key);
            if acq.granted {
                // Granted but never seen: give the permits back.
                inner.permits += acq.need;
                inner.grant()
            } else if was_head {
                // Smaller requests behind a large one may fit now.
                inner.grant()
            } else {
                Vec::new()
            }
        };
        wake_all(wakers);
    }
}

/// Future of [`Semaphore::acquire`].
#[must_use = "futures do nothing unless awaited"]
pub struct Acquire<'a> {
    waiter: Waiter<&'a Semaphore>,
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, AcquireError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let n = self.waiter.n;
        self.waiter.poll(cx).map_ok(|sem| Permit { sem, n })
    }
}

/// Future of [`Semaphore::acquire_owned`].
#[must_use = "futures do nothing unless awaited"]
pub struct AcquireOwned {
    waiter: Waiter<Rc<Semaphore>>,
}

impl Future for AcquireOwned {
    type Output = Result<OwnedPermit, AcquireError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let n = self.waiter.n;
        self.waiter.poll(cx).map_ok(|sem| OwnedPermit { sem, n })
    }
}

/// Permits borrowed from a [`Semaphore`]; given back on drop.
#[must_use = "the permits go back as soon as this is dropped"]
pub struct Permit<'a> {
    sem: &'a Semaphore,
    n: usize,
}

impl Permit<'_> {
    /// How many permits this holds.
    pub fn num_permits(&self) -> usize {
        self.n
    }

    /// Keep the permits out of the semaphore for good.
    pub fn forget(mut self) {
        self.n = 0;
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.n > 0 {
            self.sem.release(self.n);
        }
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("n", &self.n).finish()
    }
}

/// Permits held through an `Rc<Semaphore>`; given back on drop.
#[must_use = "the permits go back as soon as this is dropped"]
pub struct OwnedPermit {
    sem: Rc<Semaphore>,
    n: usize,
}

impl OwnedPermit {
    /// How many permits this holds.
    pub fn num_permits(&self) -> usize {
        self.n
    }

    /// Keep the permits out of the semaphore for good.
    pub fn forget(mut self) {
        self.n = 0;
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if self.n > 0 {
            self.sem.release(self.n);
        }
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit").field("n", &self.n).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::{poll, CountingWaker};

    #[test]
    fn immediate_and_returned_on_drop() {
        let s = Semaphore::new(2);
        let w = CountingWaker::new();
        let p = match poll(&mut s.acquire(2), &w) {
            Poll::Ready(Ok(p)) => p,
            _ => panic!("two permits were free"),
        };
        assert_eq!(s.available_permits(), 0);
        assert_eq!(s.try_acquire(1).unwrap_err(), TryAcquireError::NoPermits);
        drop(p);
        assert_eq!(s.available_permits(), 2);
    }

    #[test]
    fn fifo_large_request_holds_back_small_ones() {
        let s = Semaphore::new(1);
        let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
        let held = s.try_acquire(1).unwrap();
        let mut big = Box::pin(s.acquire(2));
        let mut small = Box::pin(s.acquire(1));
        assert!(poll(&mut big, &wa).is_pending());
        assert!(poll(&mut small, &wb).is_pending());
        drop(held);
        // One permit free, but the head wants two: nobody moves, and try_acquire respects
        // the queue.
        assert_eq!((wa.count(), wb.count()), (0, 0));
        assert!(s.try_acquire(1).is_err());
        s.add_permits(1);
        assert_eq!((wa.count(), wb.count()), (1, 0));
        let big_permit = match poll(&mut big, &wa) {
            Poll::Ready(Ok(p)) => p,
            _ => panic!("granted"),
        };
        assert_eq!(big_permit.num_permits(), 2);
        drop(big_permit);
        assert_eq!(wb.count(), 1);
        assert!(matches!(poll(&mut small, &wb), Poll::Ready(Ok(_))));
    }

    #[test]
    fn cancelled_head_lets_the_next_waiter_in() {
        let s = Semaphore::new(1);
        let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
        let mut big = Box::pin(s.acquire(2));
        let mut small = Box::pin(s.acquire(1));
        assert!(poll(&mut big, &wa).is_pending());
        assert!(poll(&mut small, &wb).is_pending());
        drop(big);
        assert_eq!(wb.count(), 1);
        assert!(matches!(poll(&mut small, &wb), Poll::Ready(Ok(_))));
    }

    #[test]
    fn granted_then_cancelled_returns_the_permits() {
        let s = Semaphore::new(0);
        let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
        let mut a = Box::pin(s.acquire(1));
        let mut b = Box::pin(s.acquire(1));
        assert!(poll(&mut a, &wa).is_pending());
        assert!(poll(&mut b, &wb).is_pending());
        s.add_permits(1);
        assert_eq!(wa.count(), 1);
        drop(a); // granted, never polled again
        assert_eq!(wb.count(), 1, "the permit moved on");
        let Poll::Ready(Ok(permit)) = poll(&mut b, &wb) else {
            panic!("b was granted the returned permit")
        };
        assert_eq!(s.available_permits(), 0);
        drop(permit);
        assert_eq!(s.available_permits(), 1);
    }

    #[test]
    fn close_fails_waiters_and_new_acquires() {
        let s = Rc::new(Semaphore::new(0));
        let w = CountingWaker::new();
        let mut a = Box::pin(s.clone().acquire_owned(1));
        assert!(poll(&mut a, &w).is_pending());
        s.close();
        assert_eq!(w.count(), 1);
        assert!(matches!(poll(&mut a, &w), Poll::Ready(Err(AcquireError))));
        assert!(matches!(poll(&mut s.acquire(1), &w), Poll::Ready(Err(_))));
        assert_eq!(s.try_acquire(0).unwrap_err(), TryAcquireError::Closed);
    }

    #[test]
    fn forget_keeps_permits_out() {
        let s = Semaphore::new(3);
        s.try_acquire(2).unwrap().forget();
        assert_eq!(s.available_permits(), 1);
    }
}
