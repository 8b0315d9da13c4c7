//! A shard-local credit window: how many requests a connection may have in flight. The
//! writer takes credits (waiting when none are left), the reader returns one per reply.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

pub struct Window {
    free: Cell<usize>,
    closed: Cell<bool>,
    waiter: RefCell<Option<Waker>>,
}

impl Window {
    pub fn new(credits: usize) -> Window {
        Window {
            free: Cell::new(credits),
            closed: Cell::new(false),
            waiter: RefCell::new(None),
        }
    }

    /// Between 1 and `max` credits, as many as are free; `None` once closed.
    pub async fn acquire_up_to(&self, max: usize) -> Option<usize> {
        poll_fn(|cx| {
            if self.closed.get() {
                return Poll::Ready(None);
            }
            let free = self.free.get();
            if free > 0 {
                let n = free.min(max.max(1));
                self.free.set(free - n);
                return Poll::Ready(Some(n));
            }
            *self.waiter.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    pub fn release(&self, n: usize) {
        self.free.set(self.free.get() + n);
        self.wake();
    }

    /// Wake the writer for good (the reader failed or finished).
    pub fn close(&self) {
        self.closed.set(true);
        self.wake();
    }

    fn wake(&self) {
        if let Some(w) = self.waiter.borrow_mut().take() {
            w.wake();
        }
    }
}
