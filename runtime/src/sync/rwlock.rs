use std::cell::{Ref, RefCell, RefMut};
use std::fmt;
use std::ops::{Deref, DerefMut};

use super::mutex::TryLockError;
use super::semaphore::{Permit, Semaphore};

/// Every reader holds one permit; a writer holds them all.
const MAX_READERS: usize = (u32::MAX >> 3) as usize;

/// A reader-writer lock for holding state across `.await` points within one shard. Fair:
/// requests are served in arrival order, so a waiting writer holds back readers that came
/// after it (no writer starvation). `!Sync`: share it through an `Rc` or a reference.
///
/// **`read` and `write` are cancel-safe**: a dropped future gives up its place and never
/// leaves the lock held.
pub struct RwLock<T: ?Sized> {
    sem: Semaphore,
    value: RefCell<T>,
}

impl<T> RwLock<T> {
    /// An unlocked lock holding `value`.
    pub fn new(value: T) -> RwLock<T> {
        RwLock {
            sem: Semaphore::new(MAX_READERS),
            value: RefCell::new(value),
        }
    }

    /// The value (no guard can exist: `self` is owned).
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access; waits behind writers that asked first.
    pub async fn read(&self) -> RwLockReadGuard<'_, T> {
        let permit = self.sem.acquire(1).await.expect("a lock is never closed");
        self.read_guard(permit)
    }

    /// Exclusive access; waits for current readers to finish.
    pub async fn write(&self) -> RwLockWriteGuard<'_, T> {
        let permit = self
            .sem
            .acquire(MAX_READERS)
            .await
            .expect("a lock is never closed");
        self.write_guard(permit)
    }

    /// Shared access now, if no writer holds or waits for the lock.
    pub fn try_read(&self) -> Result<RwLockReadGuard<'_, T>, TryLockError> {
        let permit = self.sem.try_acquire(1).map_err(|_| TryLockError)?;
        Ok(self.read_guard(permit))
    }

    /// Exclusive access now, if nobody holds or waits for the lock.
    pub fn try_write(&self) -> Result<RwLockWriteGuard<'_, T>, TryLockError> {
        let permit = self
            .sem
            .try_acquire(MAX_READERS)
            .map_err(|_| TryLockError)?;
        Ok(self.write_guard(permit))
    }

    /// The value, without locking: `&mut self` proves nobody holds the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    fn read_guard<'a>(&'a self, permit: Permit<'a>) -> RwLockReadGuard<'a, T> {
        RwLockReadGuard {
            // Never fails: a reader's permit excludes every writer.
            value: self.value.borrow(),
            _permit: permit,
        }
    }

    fn write_guard<'a>(&'a self, permit: Permit<'a>) -> RwLockWriteGuard<'a, T> {
        RwLockWriteGuard {
            // Never fails: a writer holds every permit.
            value: self.value.borrow_mut(),
            _permit: permit,
        }
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.value.try_borrow() {
            Ok(v) => d.field("value", &&*v),
            Err(_) => d.field("value", &"<write-locked>"),
        };
        d.finish()
    }
}

/// Shared access to an [`RwLock`]'s value.
pub struct RwLockReadGuard<'a, T: ?Sized> {
    value: Ref<'a, T>,
    _permit: Permit<'a>,
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// Exclusive access to an [`RwLock`]'s value.
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    value: RefMut<'a, T>,
    _permit: Permit<'a>,
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::{poll, CountingWaker};
    use std::task::Poll;

    #[test]
    fn readers_share_and_a_waiting_writer_holds_back_later_readers() {
        let l = RwLock::new(1);
        let (ww, wr) = (CountingWaker::new(), CountingWaker::new());
        let r1 = l.try_read().unwrap();
        let r2 = l.try_read().unwrap();
        assert_eq!(*r1 + *r2, 2);
        let mut w = Box::pin(l.write());
        assert!(poll(&mut w, &ww).is_pending());
        let mut late_reader = Box::pin(l.read());
        assert!(poll(&mut late_reader, &wr).is_pending(), "writer first");
        assert!(l.try_read().is_err());
        drop(r1);
        assert_eq!(ww.count(), 0);
        drop(r2);
        assert_eq!(ww.count(), 1);
        let Poll::Ready(mut g) = poll(&mut w, &ww) else {
            panic!("writer holds it")
        };
        *g = 5;
        assert_eq!(wr.count(), 0);
        drop(g);
        assert_eq!(wr.count(), 1);
        let Poll::Ready(r) = poll(&mut late_reader, &wr) else {
            panic!("reader next")
        };
        assert_eq!(*r, 5);
    }

    #[test]
    fn cancelled_writer_lets_readers_through() {
        let l = RwLock::new(());
        let (ww, wr) = (CountingWaker::new(), CountingWaker::new());
        let r = l.try_read().unwrap();
        let mut w = Box::pin(l.write());
        assert!(poll(&mut w, &ww).is_pending());
        let mut reader = Box::pin(l.read());
        assert!(poll(&mut reader, &wr).is_pending());
        drop(w);
        assert_eq!(wr.count(), 1);
        assert!(poll(&mut reader, &wr).is_ready());
        drop(r);
    }
}
