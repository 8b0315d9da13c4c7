//! A wake-up flag for one shard-local task: set by anyone on the shard, consumed by the task.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// Notifications coalesce: any number of `notify` calls before the task looks again wake it
/// once. A notification sent while the task is busy is not lost: its next `notified` returns
/// at once.
#[derive(Default)]
pub(crate) struct Notify {
    pending: Cell<bool>,
    waiter: RefCell<Option<Waker>>,
}

impl Notify {
    pub fn notify(&self) {
        if !self.pending.replace(true) {
            let waiter = self.waiter.borrow_mut().take();
            if let Some(waker) = waiter {
                waker.wake();
            }
        }
    }

    pub async fn notified(&self) {
        poll_fn(|cx| {
            if self.pending.replace(false) {
                return Poll::Ready(());
            }
            let mut waiter = self.waiter.borrow_mut();
            if !waiter.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waiter = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::Notify;

    #[test]
    fn notifications_coalesce_and_are_not_lost() {
        let notify = Notify::default();
        let mut cx = Context::from_waker(Waker::noop());
        {
            let mut waiting = pin!(notify.notified());
            assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Pending);
            notify.notify();
            notify.notify();
            assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Ready(()));
        }
        // Both notifications above were consumed by one wake-up.
        assert_eq!(pin!(notify.notified()).poll(&mut cx), Poll::Pending);
        // Sent while nobody waits: the next wait returns at once.
        notify.notify();
        assert_eq!(pin!(notify.notified()).poll(&mut cx), Poll::Ready(()));
    }
}
