//! Polling futures by hand in unit tests, with a waker that counts its wake-ups.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub(crate) struct CountingWaker {
    count: Arc<Count>,
    waker: Waker,
}

impl CountingWaker {
    pub(crate) fn new() -> CountingWaker {
        let count = Arc::new(Count::default());
        CountingWaker {
            waker: Waker::from(count.clone()),
            count,
        }
    }

    pub(crate) fn waker(&self) -> &Waker {
        &self.waker
    }

    pub(crate) fn count(&self) -> usize {
        self.count.0.load(Ordering::SeqCst)
    }
}

pub(crate) fn poll<F: Future + Unpin>(f: &mut F, w: &CountingWaker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(&w.waker))
}
