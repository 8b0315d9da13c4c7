//! hyper's runtime glue: [`LocalExecutor`] spawns hyper's background futures as shard-local
//! tasks, [`Timer`] gives it the shard's timers, and [`Compat`](super::Compat) is its I/O.
//! With these, `hyper::server::conn::http1` serves on every shard:
//!
//! ```no_run
//! use corewire_runtime::accept::{Accepted, TcpEndpoint};
//! use corewire_runtime::compat::{hyper::Timer, Compat};
//! use corewire_runtime::Runtime;
//! use hyper::{body::Incoming, server::conn::http1, service::service_fn, Request, Response};
//!
//! async fn hello(_req: Request<Incoming>) -> Result<Response<String>, std::convert::Infallible> {
//!     Ok(Response::new("hello\n".to_string()))
//! }
//!
//! let rt = Runtime::builder().shards(2).build().unwrap();
//! let server = TcpEndpoint::bind("127.0.0.1:8080".parse().unwrap())
//!     .serve(&rt, |conn: Accepted| async move {
//!         let _ = http1::Builder::new()
//!             .timer(Timer)
//!             .serve_connection(Compat::new(conn.stream), service_fn(hello))
//!             .await;
//!     })
//!     .unwrap();
//! # drop(server);
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::shard::{context, ShardRemote};

/// Spawns hyper's futures (HTTP/2 streams, upgrades) on the current shard.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalExecutor;

impl<F> ::hyper::rt::Executor<F> for LocalExecutor
where
    F: Future + 'static,
{
    fn execute(&self, fut: F) {
        crate::spawn_local(Discarding::new(fut));
    }
}

/// hyper's timers (header-read timeouts, keep-alive) on the current shard's timer wheel.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer;

impl ::hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(Sleep::until(Instant::now() + duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(Sleep::until(deadline))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn ::hyper::rt::Sleep>>, new_deadline: Instant) {
        *sleep = self.sleep_until(new_deadline);
    }
}

/// hyper wants `Send + Sync` sleeps (its trait says so, even for `!Send` connections), and the
/// shard's own [`Sleep`](crate::timer::Sleep) is `!Send`. This one holds only plain data:
/// its registration remembers the shard it was made on, and it only touches that shard's
/// timer list; polled or dropped anywhere else it leaves the old entry to fire harmlessly
/// (a wake of a task that no longer waits) and registers afresh.
struct Sleep {
    deadline: Instant,
    entry: Option<(Arc<ShardRemote>, (Instant, u64))>,
}

impl Sleep {
    fn until(deadline: Instant) -> Sleep {
        Sleep {
            deadline,
            entry: None,
        }
    }

    fn cancel(&mut self) {
        let Some((shard, key)) = self.entry.take() else {
            return;
        };
        if let Some(ctx) = context::try_current() {
            if Arc::ptr_eq(&ctx.remote, &shard) {
                ctx.timers.borrow_mut().remove(key);
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let ctx = context::current();
        match &self.entry {
            Some((shard, key)) if Arc::ptr_eq(&ctx.remote, shard) => {
                ctx.timers.borrow_mut().update(*key, cx.waker());
            }
            _ => {
                self.cancel();
                let id = ctx
                    .timers
                    .borrow_mut()
                    .insert(self.deadline, cx.waker().clone());
                self.entry = Some((ctx.remote.clone(), (self.deadline, id)));
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl ::hyper::rt::Sleep for Sleep {}

pin_project_lite::pin_project! {
    /// Runs `future` and discards its output (for spawning futures whose output need not be
    /// `'static`), without the double storage of an `async` wrapper.
    pub(crate) struct Discarding<F> {
        #[pin]
        future: F,
    }
}

impl<F> Discarding<F> {
    pub(crate) fn new(future: F) -> Discarding<F> {
        Discarding { future }
    }
}

impl<F: Future> Future for Discarding<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.project().future.poll(cx).map(drop)
    }
}
