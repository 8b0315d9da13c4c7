// An interval's timer lives in its own shard's timer list.
use corewire_runtime::{submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let value = corewire_runtime::interval(std::time::Duration::from_secs(1));
        let _ = submit_to(1, move || async move { drop(value) }).await;
    });
}
