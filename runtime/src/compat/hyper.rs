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
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Spawns hyper's futures (HTTP/2 streams, upgrades) on the current shard.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalExecutor;

impl<F> ::hyper::rt::Executor<F> for LocalExecutor
where
    F: Future + 'static,
{
    fn execute(&self, fut: F) {
        crate::spawn_local(async move {
            fut.await;
        });
    }
}

/// hyper's timers (header-read timeouts, keep-alive) on the current shard's timer wheel.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer;

impl ::hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(Sleep(crate::timer::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(Sleep(crate::timer::sleep_until(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn ::hyper::rt::Sleep>>, new_deadline: Instant) {
        *sleep = self.sleep_until(new_deadline);
    }
}

struct Sleep(crate::timer::Sleep);

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl ::hyper::rt::Sleep for Sleep {}
