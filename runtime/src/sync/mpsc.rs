//! Many-producer, one-consumer queues between the tasks of one shard. Every handle is
//! `!Send`; for another shard use [`send_to`](crate::send_to) / [`submit_to`](crate::submit_to).
//!
//! - [`channel`] is bounded: at most `capacity` messages queued, senders wait for room in the
//!   order they asked (FIFO), so a slow consumer slows its producers down.
//! - [`unbounded_channel`] never makes a sender wait. Use it only where something else bounds
//!   the number of messages (each one answers a request that is itself bounded).
//!
//! Cancel safety: [`Receiver::recv`] is cancel-safe (a dropped `recv` future takes no
//! message). [`Sender::send`] is not: dropping it while it waits for room drops the message
//! with it; await [`Sender::reserve`] (cancel-safe) and then `Permit::send` to keep it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::semaphore::{Semaphore, TryAcquireError};

/// The receiver is gone or closed; the message comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("channel closed")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Why [`Sender::try_send`] did not queue the message (which comes back).
#[derive(PartialEq, Eq, Clone, Copy)]
#[non_exhaustive]
pub enum TrySendError<T> {
    /// The queue is at capacity (or other senders are waiting for room first).
    Full(T),
    /// The receiver is gone or closed.
    Closed(T),
}

impl<T> TrySendError<T> {
    /// The message that was not queued.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Closed(v) => v,
        }
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("channel full"),
            TrySendError::Closed(_) => f.write_str("channel closed"),
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}

/// Why [`Receiver::try_recv`] returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryRecvError {
    /// Nothing queued now.
    Empty,
    /// Nothing queued and every sender is gone.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("channel empty"),
            TryRecvError::Disconnected => f.write_str("channel empty and every sender gone"),
        }
    }
}

impl std::error::Error for TryRecvError {}

struct Chan<T> {
    queue: VecDeque<T>,
    rx_waker: Option<Waker>,
    senders: usize,
    rx_closed: bool,
}

struct Shared<T> {
    chan: RefCell<Chan<T>>,
    /// Free places in the queue; `None` for an unbounded channel.
    room: Option<Semaphore>,
}

impl<T> Shared<T> {
    fn new(room: Option<Semaphore>) -> Rc<Shared<T>> {
        Rc::new(Shared {
            chan: RefCell::new(Chan {
                queue: VecDeque::new(),
                rx_waker: None,
                senders: 1,
                rx_closed: false,
            }),
            room,
        })
    }

    /// Queue a message whose place was already taken (bounded) or needs none (unbounded).
    fn push(&self, value: T) -> Result<(), T> {
        let waker = {
            let mut c = self.chan.borrow_mut();
            if c.rx_closed {
                return Err(value);
            }
            c.queue.push_back(value);
            c.rx_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut c = self.chan.borrow_mut();
        if let Some(v) = c.queue.pop_front() {
            drop(c);
            if let Some(room) = &self.room {
                room.add_permits(1);
            }
            return Poll::Ready(Some(v));
        }
        if c.senders == 0 || c.rx_closed {
            return Poll::Ready(None);
        }
        match &c.rx_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => c.rx_waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut c = self.chan.borrow_mut();
        match c.queue.pop_front() {
            Some(v) => {
                drop(c);
                if let Some(room) = &self.room {
                    room.add_permits(1);
                }
                Ok(v)
            }
            None if c.senders == 0 || c.rx_closed => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    fn close(&self) {
        self.chan.borrow_mut().rx_closed = true;
        if let Some(room) = &self.room {
            room.close();
        }
    }

    fn add_sender(&self) {
        self.chan.borrow_mut().senders += 1;
    }

    fn drop_sender(&self) {
        let waker = {
            let mut c = self.chan.borrow_mut();
            c.senders -= 1;
            if c.senders > 0 {
                return;
            }
            c.rx_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn drop_receiver(&self) {
        self.close();
        // Queued messages go now, not when the last sender does.
        let queued = std::mem::take(&mut self.chan.borrow_mut().queue);
        drop(queued);
    }
}

/// A bounded channel holding at most `capacity` queued messages (at least 1).
///
/// ```
/// use corewire_runtime::sync::mpsc;
/// # let rt = corewire_runtime::Runtime::builder().shards(1).pin(false).build().unwrap();
/// # rt.run_on(0, || async {
/// let (tx, mut rx) = mpsc::channel(2);
/// corewire_runtime::spawn_local(async move {
///     for i in 0..5 {
///         tx.send(i).await.unwrap(); // waits while two are queued
///     }
/// });
/// let mut got = Vec::new();
/// while let Some(i) = rx.recv().await {
///     got.push(i);
/// }
/// assert_eq!(got, [0, 1, 2, 3, 4]);
/// # }).unwrap();
/// ```
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Shared::new(Some(Semaphore::new(capacity.max(1))));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// A channel whose senders never wait (see the module docs for when that is right).
pub fn unbounded_channel<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
    let shared = Shared::new(None);
    (
        UnboundedSender {
            shared: shared.clone(),
        },
        UnboundedReceiver { shared },
    )
}

/// Sending half of a bounded [`channel`]. Clone it for more producers.
pub struct Sender<T> {
    shared: Rc<Shared<T>>,
}

impl<T> Sender<T> {
    fn room(&self) -> &Semaphore {
        self.shared
            .room
            .as_ref()
            .expect("a bounded channel has room")
    }

    /// Queue `value`, waiting for room. Not cancel-safe (see the module docs).
    pub async fn send(&self, value: T) -> Result<(), SendError<T>> {
        match self.reserve().await {
            Ok(permit) => {
                permit.send(value);
                Ok(())
            }
            Err(SendError(())) => Err(SendError(value)),
        }
    }

    /// Wait for a place in the queue (FIFO among senders). Cancel-safe: a dropped `reserve`
    /// takes no place; a dropped [`Permit`] gives its place back.
    pub async fn reserve(&self) -> Result<Permit<'_, T>, SendError<()>> {
        match self.room().acquire(1).await {
            Ok(p) => {
                // The place now belongs to the message; the receiver frees it on pop.
                p.forget();
                Ok(Permit { sender: self })
            }
            Err(_) => Err(SendError(())),
        }
    }

    /// Queue `value` if there is room now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        match self.room().try_acquire(1) {
            Ok(p) => {
                p.forget();
                Permit { sender: self }.send(value);
                Ok(())
            }
            Err(TryAcquireError::NoPermits) => Err(TrySendError::Full(value)),
            Err(TryAcquireError::Closed) => Err(TrySendError::Closed(value)),
        }
    }

    /// Whether the receiver was dropped or closed.
    pub fn is_closed(&self) -> bool {
        self.shared.chan.borrow().rx_closed
    }

    /// Free places in the queue now.
    pub fn capacity(&self) -> usize {
        self.room().available_permits()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.add_sender();
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.drop_sender();
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::Sender").finish_non_exhaustive()
    }
}

/// A reserved place in a bounded channel's queue.
pub struct Permit<'a, T> {
    sender: &'a Sender<T>,
}

impl<T> Permit<'_, T> {
    /// Queue `value` in the reserved place. If the receiver closed meanwhile the value is
    /// dropped (there is nobody to read it).
    pub fn send(self, value: T) {
        let shared = &self.sender.shared;
        std::mem::forget(self);
        if shared.push(value).is_err() {
            if let Some(room) = &shared.room {
                room.add_permits(1);
            }
        }
    }
}

impl<T> Drop for Permit<'_, T> {
    fn drop(&mut self) {
        self.sender.room().add_permits(1);
    }
}

/// Receiving half of a bounded [`channel`].
pub struct Receiver<T> {
    shared: Rc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next message; `None` once every sender is gone and the queue is empty (or after
    /// [`close`](Receiver::close) once it is drained). Cancel-safe.
    pub async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| self.shared.poll_recv(cx)).await
    }

    /// [`recv`](Receiver::recv) for hand-written futures.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.shared.poll_recv(cx)
    }

    /// Take a queued message without waiting.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.shared.try_recv()
    }

    /// Refuse new messages (waiting senders fail); queued ones can still be received.
    pub fn close(&mut self) {
        self.shared.close();
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.shared.chan.borrow().queue.len()
    }

    /// Whether no message is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.drop_receiver();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::Receiver").finish_non_exhaustive()
    }
}

/// Sending half of an [`unbounded_channel`].
pub struct UnboundedSender<T> {
    shared: Rc<Shared<T>>,
}

impl<T> UnboundedSender<T> {
    /// Queue `value` now; fails only if the receiver is gone or closed.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.shared.push(value).map_err(SendError)
    }

    /// Whether the receiver was dropped or closed.
    pub fn is_closed(&self) -> bool {
        self.shared.chan.borrow().rx_closed
    }
}

impl<T> Clone for UnboundedSender<T> {
    fn clone(&self) -> Self {
        self.shared.add_sender();
        UnboundedSender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for UnboundedSender<T> {
    fn drop(&mut self) {
        self.shared.drop_sender();
    }
}

impl<T> fmt::Debug for UnboundedSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::UnboundedSender")
            .finish_non_exhaustive()
    }
}

/// Receiving half of an [`unbounded_channel`].
pub struct UnboundedReceiver<T> {
    shared: Rc<Shared<T>>,
}

impl<T> UnboundedReceiver<T> {
    /// The next message; `None` once every sender is gone and the queue is empty. Cancel-safe.
    pub async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| self.shared.poll_recv(cx)).await
    }

    /// [`recv`](UnboundedReceiver::recv) for hand-written futures.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.shared.poll_recv(cx)
    }

    /// Take a queued message without waiting.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.shared.try_recv()
    }

    /// Refuse new messages; queued ones can still be received.
    pub fn close(&mut self) {
        self.shared.close();
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.shared.chan.borrow().queue.len()
    }

    /// Whether no message is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Drop for UnboundedReceiver<T> {
    fn drop(&mut self) {
        self.shared.drop_receiver();
    }
}

impl<T> fmt::Debug for UnboundedReceiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::UnboundedReceiver")
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::{poll, CountingWaker};

    #[test]
    fn bounded_holds_capacity_then_wakes_senders_in_order() {
        let (tx, mut rx) = channel(1);
        let tx2 = tx.clone();
        let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
        tx.try_send(0).unwrap();
        assert!(matches!(tx.try_send(9), Err(TrySendError::Full(9))));
        let mut a = Box::pin(tx.send(1));
        let mut b = Box::pin(tx2.send(2));
        assert!(poll(&mut a, &wa).is_pending());
        assert!(poll(&mut b, &wb).is_pending());
        assert_eq!(rx.try_recv(), Ok(0));
        assert_eq!((wa.count(), wb.count()), (1, 0));
        assert!(poll(&mut a, &wa).is_ready());
        assert_eq!(rx.try_recv(), Ok(1));
        assert!(poll(&mut b, &wb).is_ready());
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    }

    #[test]
    fn recv_is_cancel_safe() {
        let (tx, mut rx) = channel(4);
        let w = CountingWaker::new();
        {
            let mut r = Box::pin(rx.recv());
            assert!(poll(&mut r, &w).is_pending());
        }
        tx.try_send(5).unwrap();
        // The dropped recv took nothing.
        assert_eq!(rx.try_recv(), Ok(5));
    }

    #[test]
    fn last_sender_drop_ends_the_stream_after_the_queue() {
        let (tx, mut rx) = channel(4);
        let w = CountingWaker::new();
        tx.try_send(1).unwrap();
        let tx2 = tx.clone();
        drop(tx);
        assert_eq!(rx.try_recv(), Ok(1));
        let mut r = Box::pin(rx.recv());
        assert!(poll(&mut r, &w).is_pending());
        drop(tx2);
        assert_eq!(w.count(), 1);
        assert_eq!(poll(&mut r, &w), Poll::Ready(None));
    }

    #[test]
    fn receiver_drop_fails_waiting_senders_and_frees_the_queue() {
        let (tx, rx) = channel(1);
        let w = CountingWaker::new();
        let item = Rc::new(());
        tx.try_send(item.clone()).unwrap();
        let mut s = Box::pin(tx.send(item.clone()));
        assert!(poll(&mut s, &w).is_pending());
        drop(rx);
        assert_eq!(w.count(), 1);
        assert!(matches!(poll(&mut s, &w), Poll::Ready(Err(SendError(_)))));
        drop(s);
        assert_eq!(
            Rc::strong_count(&item),
            1,
            "queued message dropped with the receiver"
        );
        assert!(tx.is_closed());
    }

    #[test]
    fn dropped_reservation_returns_its_place() {
        let (tx, mut rx) = channel::<u8>(1);
        let w = CountingWaker::new();
        {
            let mut r = Box::pin(tx.reserve());
            let Poll::Ready(Ok(permit)) = poll(&mut r, &w) else {
                panic!("room for one")
            };
            assert_eq!(tx.capacity(), 0);
            drop(permit);
        }
        assert_eq!(tx.capacity(), 1);
        tx.try_send(1).unwrap();
        assert_eq!(rx.try_recv(), Ok(1));
    }

    #[test]
    fn unbounded_never_waits_and_closes() {
        let (tx, mut rx) = unbounded_channel();
        for i in 0..1000 {
            tx.send(i).unwrap();
        }
        assert_eq!(rx.len(), 1000);
        rx.close();
        assert_eq!(tx.send(0), Err(SendError(0)));
        assert_eq!(rx.try_recv(), Ok(0));
    }
}
