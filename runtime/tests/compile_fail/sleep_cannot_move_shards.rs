// A timer registered on shard 0 must not be dropped (or polled) on shard 1.
use std::time::Duration;

use corewire_runtime::{sleep, submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let mut timer = Box::pin(sleep(Duration::from_secs(1)));
        let _ = futures_poll_once(timer.as_mut());
        let _ = submit_to(1, move || async move { drop(timer) }).await;
    });
}

fn futures_poll_once<F: std::future::Future>(_f: std::pin::Pin<&mut F>) {}
