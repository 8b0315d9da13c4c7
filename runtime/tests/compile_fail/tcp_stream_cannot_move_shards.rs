// A stream's descriptor closes through its own shard's ring.
use corewire_runtime::{submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let value = corewire_runtime::net::TcpStream::connect("127.0.0.1:1".parse().unwrap()).await.unwrap();
        let _ = submit_to(1, move || async move { drop(value) }).await;
    });
}
