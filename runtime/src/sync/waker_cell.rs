use std::cell::RefCell;
use std::task::Waker;

/// The one task to wake when what it waits for happens, for **poll-based** code with exactly
/// one waiting task that does not keep a future between polls (a connection's writer polled
/// through `poll_*` methods, a hand-written connection future). Registering replaces the
/// task registered before; [`wake`](WakerCell::wake) takes it out, so each registration is
/// woken at most once.
///
/// Async code with a future to hold, or with several waiters, uses [`Notify`](super::Notify)
/// instead: its stored permit also covers a wake-up that comes before the wait.
///
/// ```
/// use corewire_runtime::sync::WakerCell;
/// use std::task::{Context, Poll};
/// # use std::future::Future;
/// struct Flag { set: std::cell::Cell<bool>, task: WakerCell }
/// impl Flag {
///     fn poll_set(&self, cx: &mut Context<'_>) -> Poll<()> {
///         if self.set.get() { return Poll::Ready(()); }
///         self.task.register(cx.waker()); // checked, then registered: same poll, no gap
///         Poll::Pending
///     }
///     fn set(&self) { self.set.set(true); self.task.wake(); }
/// }
/// # let f = Flag { set: false.into(), task: WakerCell::new() };
/// # let mut cx = Context::from_waker(std::task::Waker::noop());
/// # assert!(f.poll_set(&mut cx).is_pending());
/// # f.set();
/// # assert!(f.poll_set(&mut cx).is_ready());
/// ```
#[derive(Default)]
pub struct WakerCell {
    waker: RefCell<Option<Waker>>,
}

impl std::fmt::Debug for WakerCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakerCell")
            .field("registered", &self.is_registered())
            .finish()
    }
}

impl WakerCell {
    /// An empty cell.
    pub const fn new() -> WakerCell {
        WakerCell {
            waker: RefCell::new(None),
        }
    }

    /// Make `waker` the task to wake (no clone when it is the one registered already).
    pub fn register(&self, waker: &Waker) {
        let mut slot = self.waker.borrow_mut();
        match &mut *slot {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
    }

    /// Wake the registered task, if any, and forget it.
    pub fn wake(&self) {
        // Taken before waking: the woken task may register again from inside `wake`.
        let waker = self.waker.borrow_mut().take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Whether a task is registered and not yet woken.
    pub fn is_registered(&self) -> bool {
        self.waker.borrow().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::CountingWaker;

    #[test]
    fn wakes_the_last_registered_task_once() {
        let cell = WakerCell::new();
        let (a, b) = (CountingWaker::new(), CountingWaker::new());
        cell.register(a.waker());
        cell.register(b.waker());
        cell.wake();
        cell.wake();
        assert_eq!((a.count(), b.count()), (0, 1));
        assert!(!cell.is_registered());
    }

    #[test]
    fn a_wake_before_any_registration_is_not_stored() {
        let cell = WakerCell::new();
        cell.wake();
        let a = CountingWaker::new();
        cell.register(a.waker());
        assert!(cell.is_registered());
        assert_eq!(a.count(), 0);
    }
}
