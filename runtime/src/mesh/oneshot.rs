use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

use crate::executor::JoinError;

struct State<T> {
    value: Option<Result<T, JoinError>>,
    waker: Option<Waker>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// The result of work running on another shard. Await it from a shard, or `wait()` for it
/// from any other thread.
pub struct RemoteHandle<T> {
    shared: Arc<Shared<T>>,
}

/// Sends the result; dropped unsent (the task was dropped), it reports `JoinError::Aborted`
/// so no waiter hangs.
pub(crate) struct Sender<T> {
    shared: Option<Arc<Shared<T>>>,
}

pub(crate) fn channel<T>() -> (Sender<T>, RemoteHandle<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            value: None,
            waker: None,
        }),
        ready: Condvar::new(),
    });
    (
        Sender {
            shared: Some(shared.clone()),
        },
        RemoteHandle { shared },
    )
}

impl<T> Sender<T> {
    pub(crate) fn send(mut self, value: T) {
        if let Some(shared) = self.shared.take() {
            complete(&shared, Ok(value));
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            complete(&shared, Err(JoinError::Aborted));
        }
    }
}

fn complete<T>(shared: &Shared<T>, value: Result<T, JoinError>) {
    let waker = {
        let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.value = Some(value);
        state.waker.take()
    };
    shared.ready.notify_all();
    if let Some(w) = waker {
        w.wake();
    }
}

impl<T> RemoteHandle<T> {
    /// Block the calling thread until the result arrives.
    ///
    /// # Panics
    /// On a shard thread, where it would stall the shard (and deadlock if the result comes
    /// from that shard): await the handle there instead.
    #[track_caller]
    pub fn wait(self) -> Result<T, JoinError> {
        crate::assert_can_block("RemoteHandle::wait");
        self.wait_unchecked()
    }

    /// `wait`, for callers that checked already (and named themselves in the panic).
    pub(crate) fn wait_unchecked(self) -> Result<T, JoinError> {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = state.value.take() {
                return v;
            }
            state = self
                .shared
                .ready
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl<T> Future for RemoteHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
