//! Support for `#[corewire::main]` and `#[corewire::test]` (corewire-macros). Not a public
//! API: the generated code calls these, nothing else should.

use std::any::Any;
use std::fmt::Debug;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};

use crate::Runtime;

/// What a `main` or test function may return.
pub trait Outcome {
    /// `Err` carries the error's `Debug` text.
    fn into_outcome(self) -> Result<(), String>;
}

impl Outcome for () {
    fn into_outcome(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: Debug> Outcome for Result<(), E> {
    fn into_outcome(self) -> Result<(), String> {
        self.map_err(|e| format!("{e:?}"))
    }
}

type Panic = Box<dyn Any + Send>;

/// Run `f()` on shard 0 of `rt`; the outcome or the panic payload comes back.
fn run_root<F, Fut>(rt: &Runtime, f: F) -> Result<Result<(), String>, Panic>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Outcome,
{
    let joined = rt.run_on(0, move || async move {
        CatchUnwind(Box::pin(async move { f().await.into_outcome() })).await
    });
    match joined {
        Ok(outcome) => outcome,
        Err(e) => Err(Box::new(format!(
            "the root task ended without a result: {e}"
        ))),
    }
}

/// `#[corewire::main]`: run `f()` on shard 0 of a `shards`-shard runtime; its outcome becomes the exit code.
pub fn run_main<F, Fut>(shards: usize, f: F) -> ExitCode
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Outcome,
{
    let rt = match Runtime::builder().shards(shards).build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: could not start the corewire runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = run_root(&rt, f);
    rt.shutdown();
    match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
        Err(panic) => resume_unwind(panic),
    }
}

/// `#[corewire::test]`: run `f()` on shard 0 of a fresh unpinned runtime; a panic or an `Err` fails the test.
pub fn run_test<F, Fut>(shards: usize, f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Outcome,
{
    // Unpinned: test binaries run many tests at once on few CPUs.
    let rt = Runtime::builder()
        .shards(shards)
        .pin(false)
        .name("corewire-test")
        .build()
        .expect("could not start the test's corewire runtime");
    let outcome = run_root(&rt, f);
    rt.shutdown();
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("the test returned an error: {e}"),
        Err(panic) => resume_unwind(panic),
    }
}

/// Polls a future, turning a panic into an `Err` with its payload.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}
