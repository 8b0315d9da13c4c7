use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Give the rest of the shard (other tasks, pollers, the ring) a turn, then continue.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
