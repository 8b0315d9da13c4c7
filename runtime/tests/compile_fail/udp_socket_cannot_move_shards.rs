// A socket's descriptor closes through its own shard's ring.
use corewire_runtime::{submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let value = corewire_runtime::net::UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let _ = submit_to(1, move || async move { drop(value) }).await;
    });
}
