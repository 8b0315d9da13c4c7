use std::cell::{RefCell, RefMut};
use std::fmt;
use std::ops::{Deref, DerefMut};

use super::semaphore::{Permit, Semaphore, TryAcquireError};

/// A lock for holding state across `.await` points within one shard. Tasks get the lock in
/// the order they asked for it (FIFO). `!Sync`: share it through an `Rc` or a reference.
///
/// Use it only where a critical section awaits; for state touched between awaits a `RefCell`
/// (or a `Cell`) is enough and cheaper.
///
/// **`lock` is cancel-safe**: a dropped `lock()` future gives up its place in the queue and
/// never leaves the mutex held.
///
/// ```
/// use corewire_runtime::sync::Mutex;
/// # let rt = corewire_runtime::Runtime::builder().shards(1).pin(false).build().unwrap();
/// # rt.run_on(0, || async {
/// let log = Mutex::new(Vec::new());
/// let mut guard = log.lock().await;
/// guard.push("a");
/// corewire_runtime::yield_now().await; // still held across the await
/// guard.push("b");
/// drop(guard);
/// assert_eq!(*log.lock().await, ["a", "b"]);
/// # }).unwrap();
/// ```
pub struct Mutex<T: ?Sized> {
    sem: Semaphore,
    value: RefCell<T>,
}

/// The mutex is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TryLockError;

impl fmt::Display for TryLockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("lock is held")
    }
}

impl std::error::Error for TryLockError {}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub fn new(value: T) -> Mutex<T> {
        Mutex {
            sem: Semaphore::new(1),
            value: RefCell::new(value),
        }
    }

    /// The value (no guard can exist: `self` is owned).
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Wait for the lock (FIFO, cancel-safe).
    pub async fn lock(&self) -> MutexGuard<'_, T> {
        let permit = self.sem.acquire(1).await.expect("a mutex is never closed");
        self.guard(permit)
    }

    /// Take the lock if it is free and nobody waits for it.
    pub fn try_lock(&self) -> Result<MutexGuard<'_, T>, TryLockError> {
        match self.sem.try_acquire(1) {
            Ok(permit) => Ok(self.guard(permit)),
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => Err(TryLockError),
        }
    }

    /// The value, without locking: `&mut self` proves nobody holds the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    fn guard<'a>(&'a self, permit: Permit<'a>) -> MutexGuard<'a, T> {
        MutexGuard {
            // Never fails: the permit is the only way to this borrow.
            value: self.value.borrow_mut(),
            _permit: permit,
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.value.try_borrow() {
            Ok(v) => d.field("value", &&*v),
            Err(_) => d.field("value", &"<locked>"),
        };
        d.finish()
    }
}

/// Access to a [`Mutex`]'s value; unlocks (and lets the next waiter in) on drop.
pub struct MutexGuard<'a, T: ?Sized> {
    // Field order matters: the borrow ends before the permit lets the next holder in.
    value: RefMut<'a, T>,
    _permit: Permit<'a>,
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.value, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::{poll, CountingWaker};
    use std::task::Poll;

    #[test]
    fn fifo_handoff_and_cancel() {
        let m = Mutex::new(0);
        let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
        let g = m.try_lock().unwrap();
        let mut a = Box::pin(m.lock());
        let mut b = Box::pin(m.lock());
        assert!(poll(&mut a, &wa).is_pending());
        assert!(poll(&mut b, &wb).is_pending());
        assert!(m.try_lock().is_err());
        drop(g);
        assert_eq!((wa.count(), wb.count()), (1, 0));
        // `a` was granted but is dropped before it looked: the lock passes to `b`.
        drop(a);
        assert_eq!(wb.count(), 1);
        let Poll::Ready(mut g) = poll(&mut b, &wb) else {
            panic!("b holds the lock")
        };
        *g += 1;
        drop(g);
        assert_eq!(*m.try_lock().unwrap(), 1);
    }
}
