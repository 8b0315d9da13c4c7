//! A future that keeps a value alive until it finishes (a connection's count, a permit).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project_lite::pin_project! {
    /// Runs `future`, dropping `held` with it. A struct rather than
    /// `async move { let _held = held; future.await }`, which stores the future twice
    /// (rustc #62958): for a connection task that doubled its allocation.
    pub(crate) struct Holding<F, H> {
        #[pin]
        future: F,
        held: H,
    }
}

impl<F, H> Holding<F, H> {
    pub(crate) fn new(future: F, held: H) -> Holding<F, H> {
        Holding { future, held }
    }
}

impl<F: Future, H> Future for Holding<F, H> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().future.poll(cx)
    }
}
