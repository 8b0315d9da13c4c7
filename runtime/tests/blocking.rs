//! Blocking calls made on a shard thread fail at once with a clear panic (they would stall the
//! shard, and deadlock when they wait for work of that same shard), and their async forms
//! work there.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use corewire_runtime::accept::TcpEndpoint;
use corewire_runtime::{assert_can_block, Runtime};

fn runtime(shards: usize) -> Runtime {
    Runtime::builder()
        .shards(shards)
        .pin(false)
        .build()
        .unwrap()
}

fn message(payload: Box<dyn Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `f` on a shard and returns its panic message ("" when it did not panic).
fn panic_on_shard(f: impl FnOnce() + 'static) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => String::new(),
        Err(payload) => message(payload),
    }
}

fn assert_refused(msg: &str, operation: &str) {
    assert!(
        msg.starts_with("Cannot block the current thread from within a corewire shard"),
        "{msg:?}"
    );
    assert!(msg.contains(operation), "{msg:?} should name {operation}");
}

#[test]
fn assert_can_block_passes_off_a_shard_and_panics_on_one() {
    assert_can_block("a test");
    let rt = runtime(1);
    let msg = rt
        .run_on(0, || async {
            panic_on_shard(|| assert_can_block("a test"))
        })
        .unwrap();
    assert_refused(&msg, "a test");
}

/// Waiting on the shard the work runs on would never return: the check panics first, and
/// awaiting the same kind of handle works.
#[test]
fn remote_handle_wait_panics_on_a_shard_and_await_works() {
    let rt = runtime(2);
    let same_shard = rt.spawn_on(0, || async { 1 });
    let other_shard = rt.spawn_on(1, || async { 2 });
    let (msg, got) = rt
        .run_on(0, move || async move {
            let msg = panic_on_shard(move || {
                let _ = same_shard.wait();
            });
            (msg, other_shard.await.unwrap())
        })
        .unwrap();
    assert_refused(&msg, "RemoteHandle::wait");
    assert_eq!(got, 2);
}

#[test]
fn run_on_and_shutdown_panic_on_a_shard() {
    let rt = Arc::new(runtime(2));
    let inner = rt.clone();
    let msg = rt
        .run_on(0, move || async move {
            panic_on_shard(move || {
                let _ = inner.run_on(1, || async {});
            })
        })
        .unwrap();
    assert_refused(&msg, "Runtime::run_on");

    let other = runtime(1);
    let msg = rt
        .run_on(0, move || async move {
            panic_on_shard(move || other.shutdown())
        })
        .unwrap();
    assert_refused(&msg, "Runtime::shutdown");
}

/// `stop` on a shard panics (the listener keeps running); `stop_async` stops it from a shard,
/// the one its accept loop runs on included.
#[test]
fn listener_stop_panics_on_a_shard_and_stop_async_works() {
    let rt = runtime(2);
    let serve = || {
        TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
            .serve(&rt, |_accepted| async {})
            .unwrap()
    };
    let blocking = serve();
    let kept_addr = blocking.local_addr();
    let msg = rt
        .run_on(
            0,
            move || async move { panic_on_shard(move || blocking.stop()) },
        )
        .unwrap();
    assert_refused(&msg, "ListenerHandle::stop");
    // The refused stop did not stop it.
    assert!(std::net::TcpStream::connect(kept_addr).is_ok());

    let handle = serve();
    let addr = handle.local_addr();
    rt.run_on(0, move || async move { handle.stop_async().await })
        .unwrap();
    assert!(std::net::TcpStream::connect(addr).is_err());
}
