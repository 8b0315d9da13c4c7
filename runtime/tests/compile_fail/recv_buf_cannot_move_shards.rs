// A received chunk goes back into the buffer ring of the shard that received it.
use corewire_runtime::{submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let (a, _b) = corewire_runtime::net::UnixStream::pair().unwrap();
        let value = a.recv_chunk().await.unwrap().unwrap();
        let _ = submit_to(1, move || async move { drop(value) }).await;
    });
}
