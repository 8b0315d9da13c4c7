//! A shard-local one-shot slot: the reader task fills it, the calling task awaits it.

use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

pub(crate) struct Slot<T> {
    inner: Rc<RefCell<(Option<T>, Option<Waker>)>>,
}

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Slot {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Slot<T> {
    pub(crate) fn new() -> Slot<T> {
        Slot {
            inner: Rc::new(RefCell::new((None, None))),
        }
    }

    pub(crate) fn fill(&self, value: T) {
        let waker = {
            let mut inner = self.inner.borrow_mut();
            inner.0 = Some(value);
            inner.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) async fn wait(&self) -> T {
        poll_fn(|cx| {
            let mut inner = self.inner.borrow_mut();
            match inner.0.take() {
                Some(v) => Poll::Ready(v),
                None => {
                    inner.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }
}
