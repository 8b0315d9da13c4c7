// A join handle refers to a task slot of its own shard.
use corewire_runtime::{submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let value = corewire_runtime::spawn_local(async {});
        let _ = submit_to(1, move || async move { drop(value) }).await;
    });
}
