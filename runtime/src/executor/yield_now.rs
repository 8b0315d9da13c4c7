use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Give the rest of the shard (other tasks, pollers, the ring) a turn, then continue. On a
/// shard the task is queued again only after the next ring reap, so completions that arrived
/// meanwhile (another connection's data) run first — a budget yield would achieve little if
/// the yielding task went straight back into the queue being drained.
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
        match crate::shard::context::try_current() {
            Some(ctx) => ctx.executor.defer(cx.waker().clone()),
            None => cx.waker().wake_by_ref(),
        }
        Poll::Pending
    }
}
