use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::TaskKey;
use crate::shard::context;

/// Why a task produced no output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// The task panicked, was aborted, or its shard shut down before it finished.
    Aborted,
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task ended without a result (panicked, aborted or its shard stopped)")
    }
}

impl std::error::Error for JoinError {}

struct JoinState<T> {
    result: Option<Result<T, JoinError>>,
    waiter: Option<Waker>,
    detached: bool,
}

/// Awaits a local task's output. Dropping it detaches the task (it keeps running).
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
    key: TaskKey,
}

impl<T> JoinHandle<T> {
    /// Drop the task now; awaiting the handle then yields `JoinError::Aborted`.
    pub fn abort(&self) {
        context::with_executor(|e| e.abort(self.key));
    }

    /// Whether the task has finished (its output is waiting for the handle).
    pub fn is_finished(&self) -> bool {
        self.state.borrow().result.is_some()
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        self.state.borrow_mut().detached = true;
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.state.borrow_mut();
        match state.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                state.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Completes the join state with `Aborted` if the task is dropped before it finishes.
struct Completion<T> {
    state: Rc<RefCell<JoinState<T>>>,
    done: bool,
}

impl<T> Completion<T> {
    fn finish(&mut self, result: Result<T, JoinError>) {
        self.done = true;
        let waiter = {
            let mut state = self.state.borrow_mut();
            if state.detached {
                return;
            }
            state.result = Some(result);
            state.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

impl<T> Drop for Completion<T> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(Err(JoinError::Aborted));
        }
    }
}

pub(super) fn wrap<F, T>(future: F, key: TaskKey) -> (impl Future<Output = ()>, JoinHandle<T>)
where
    F: Future<Output = T> + 'static,
    T: 'static,
{
    let state = Rc::new(RefCell::new(JoinState {
        result: None,
        waiter: None,
        detached: false,
    }));
    let completion = Completion {
        state: state.clone(),
        done: false,
    };
    let wrapped = Wrapped { future, completion };
    (wrapped, JoinHandle { state, key })
}

pin_project_lite::pin_project! {
    /// The task's future and where its output goes. A struct, not an `async` block: an
    /// `async move { future.await }` keeps the captured future and the awaited one in
    /// separate slots (rustc #62958), doubling every task's allocation.
    struct Wrapped<F: Future> {
        #[pin]
        future: F,
        completion: Completion<F::Output>,
    }
}

impl<F: Future> Future for Wrapped<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.completion.done {
            return Poll::Ready(());
        }
        let out = std::task::ready!(this.future.poll(cx));
        this.completion.finish(Ok(out));
        Poll::Ready(())
    }
}
