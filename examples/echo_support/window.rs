//! A shard-local credit window: how many requests a connection may have in flight. The
//! writer takes credits (waiting when none are left), the reader returns one per reply.

use corewire::sync::{Semaphore, TryAcquireError};

pub struct Window {
    credits: Semaphore,
}

impl Window {
    pub fn new(credits: usize) -> Window {
        Window {
            credits: Semaphore::new(credits),
        }
    }

    /// Between 1 and `max` credits, as many as are free; `None` once closed.
    pub async fn acquire_up_to(&self, max: usize) -> Option<usize> {
        let want = max.max(1).min(self.credits.available_permits()).max(1);
        let permit = match self.credits.try_acquire(want) {
            Ok(p) => p,
            Err(TryAcquireError::NoPermits) => self.credits.acquire(1).await.ok()?,
            // Closed.
            Err(_) => return None,
        };
        let n = permit.num_permits();
        // Credits come back one per reply through `release`, not when a guard drops.
        permit.forget();
        Some(n)
    }

    pub fn release(&self, n: usize) {
        self.credits.add_permits(n);
    }

    /// Wake the writer for good (the reader failed or finished).
    pub fn close(&self) {
        self.credits.close();
    }
}
