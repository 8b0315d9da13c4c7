use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// A one-way "stop now" flag that tasks on any shard can await.
#[derive(Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    waiters: Mutex<Vec<Waker>>,
}

impl StopSignal {
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let waiters = std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|e| e.into_inner()));
        for w in waiters {
            w.wake();
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn poll_stopped(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_stopped() {
            return Poll::Ready(());
        }
        {
            let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
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
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            self.poll_stopped(cx).map(|()| None)
        })
        .await
    }
}

impl Future for &StopSignal {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_stopped(cx)
    }
}
