use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// A one-way "stop now" flag that tasks on any shard can race their work against.
#[derive(Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    waiters: Mutex<slab::Slab<Waker>>,
}

impl StopSignal {
    /// Stop: every accept loop watching this signal ends.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let waiters = std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|e| e.into_inner()));
        for w in waiters.into_iter().map(|(_, w)| w) {
            w.wake();
        }
    }

    /// Whether `stop` was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn poll_stopped(&self, cx: &mut Context<'_>, key: &mut Option<usize>) -> Poll<()> {
        if self.is_stopped() {
            return Poll::Ready(());
        }
        {
            let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
            match key.and_then(|k| waiters.get_mut(k)) {
                Some(w) => {
                    if !w.will_wake(cx.waker()) {
                        *w = cx.waker().clone();
                    }
                }
                None => *key = Some(waiters.insert(cx.waker().clone())),
            }
        }
        if self.is_stopped() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Run `fut` until it completes (`Some`) or the signal stops it (`None`, `fut` dropped).
    pub async fn run_until_stopped<F: Future>(&self, fut: F) -> Option<F::Output> {
        struct Dereg<'a>(&'a StopSignal, Option<usize>);
        impl Drop for Dereg<'_> {
            fn drop(&mut self) {
                if let Some(k) = self.1 {
                    let mut w = self.0.waiters.lock().unwrap_or_else(|e| e.into_inner());
                    if w.contains(k) {
                        w.remove(k);
                    }
                }
            }
        }
        let mut fut = std::pin::pin!(fut);
        let mut reg = Dereg(self, None);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            self.poll_stopped(cx, &mut reg.1).map(|()| None)
        })
        .await
    }
}
