//! A one-value channel between two tasks of one shard (the reply slot of a request). Both
//! halves are `!Send`. For a result coming back from another shard use
//! [`submit_to`](crate::submit_to) instead.

use std::cell::RefCell;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

struct Shared<T> {
    value: Option<T>,
    rx_waker: Option<Waker>,
    tx_waker: Option<Waker>,
    tx_gone: bool,
    rx_closed: bool,
}

/// Make a connected sender and receiver.
///
/// ```
/// use corewire_runtime::sync::oneshot;
/// # let rt = corewire_runtime::Runtime::builder().shards(1).pin(false).build().unwrap();
/// # rt.run_on(0, || async {
/// let (tx, rx) = oneshot::channel();
/// corewire_runtime::spawn_local(async move { tx.send(7).unwrap() });
/// assert_eq!(rx.await, Ok(7));
/// # }).unwrap();
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Rc::new(RefCell::new(Shared {
        value: None,
        rx_waker: None,
        tx_waker: None,
        tx_gone: false,
        rx_closed: false,
    }));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// The sender was dropped without sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the sender was dropped without sending")
    }
}

impl std::error::Error for RecvError {}

/// Why [`Receiver::try_recv`] returned no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryRecvError {
    /// Nothing sent yet.
    Empty,
    /// The sender was dropped without sending (or the value was already taken).
    Closed,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("no value sent yet"),
            TryRecvError::Closed => f.write_str("the sender is gone"),
        }
    }
}

impl std::error::Error for TryRecvError {}

/// Sends the one value. Dropping it unsent makes the receiver see [`RecvError`].
pub struct Sender<T> {
    shared: Rc<RefCell<Shared<T>>>,
}

impl<T> Sender<T> {
    /// Send the value; gives it back if the receiver is gone or closed.
    pub fn send(self, value: T) -> Result<(), T> {
        let waker = {
            let mut s = self.shared.borrow_mut();
            if s.rx_closed {
                return Err(value);
            }
            s.value = Some(value);
            s.rx_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Whether the receiver was dropped or closed (nobody wants the value any more).
    pub fn is_closed(&self) -> bool {
        self.shared.borrow().rx_closed
    }

    /// Wait until the receiver is dropped or closed: lets the producer stop work whose
    /// result nobody will read. Cancel-safe.
    pub async fn closed(&self) {
        poll_fn(|cx| {
            let mut s = self.shared.borrow_mut();
            if s.rx_closed {
                return Poll::Ready(());
            }
            match &s.tx_waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => s.tx_waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.shared.borrow_mut();
            s.tx_gone = true;
            s.rx_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Sender").finish_non_exhaustive()
    }
}

/// Receives the one value: await it (cancel-safe: awaiting `&mut receiver` and dropping that
/// future leaves the value in the channel) or poll with [`try_recv`](Receiver::try_recv).
pub struct Receiver<T> {
    shared: Rc<RefCell<Shared<T>>>,
}

impl<T> Receiver<T> {
    /// Take the value if it was sent.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let mut s = self.shared.borrow_mut();
        match s.value.take() {
            Some(v) => Ok(v),
            None if s.tx_gone => Err(TryRecvError::Closed),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Refuse the value from now on (the sender's `send` fails, `closed()` resolves); a value
    /// sent before this can still be taken with `try_recv`.
    pub fn close(&mut self) {
        let waker = {
            let mut s = self.shared.borrow_mut();
            s.rx_closed = true;
            s.tx_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.shared.borrow_mut();
        if let Some(v) = s.value.take() {
            return Poll::Ready(Ok(v));
        }
        if s.tx_gone {
            return Poll::Ready(Err(RecvError));
        }
        match &s.rx_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.rx_waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Receiver").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::{poll, CountingWaker};

    #[test]
    fn send_then_receive() {
        let (tx, mut rx) = channel();
        let w = CountingWaker::new();
        assert!(poll(&mut rx, &w).is_pending());
        tx.send(3).unwrap();
        assert_eq!(w.count(), 1);
        assert_eq!(poll(&mut rx, &w), Poll::Ready(Ok(3)));
    }

    #[test]
    fn dropped_sender_is_an_error() {
        let (tx, mut rx) = channel::<u8>();
        let w = CountingWaker::new();
        assert!(poll(&mut rx, &w).is_pending());
        drop(tx);
        assert_eq!(w.count(), 1);
        assert_eq!(poll(&mut rx, &w), Poll::Ready(Err(RecvError)));
    }

    #[test]
    fn dropped_receiver_gives_the_value_back_and_wakes_closed() {
        let (tx, rx) = channel();
        let w = CountingWaker::new();
        {
            let mut closed = Box::pin(tx.closed());
            assert!(poll(&mut closed, &w).is_pending());
            drop(rx);
            assert_eq!(w.count(), 1);
            assert!(poll(&mut closed, &w).is_ready());
        }
        assert!(tx.is_closed());
        assert_eq!(tx.send(9), Err(9));
    }

    #[test]
    fn value_sent_before_close_can_still_be_taken() {
        let (tx, mut rx) = channel();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.send("v").unwrap();
        rx.close();
        assert_eq!(rx.try_recv(), Ok("v"));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    }
}
