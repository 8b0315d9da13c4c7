// The review's use-after-free: a receive submitted on shard 0 and dropped on shard 1.
use bytes::BytesMut;
use corewire_runtime::net::TcpStream;
use corewire_runtime::{submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let stream = TcpStream::connect("127.0.0.1:1".parse().unwrap()).await.unwrap();
        let op = stream.recv(BytesMut::with_capacity(200), 200);
        let _ = submit_to(1, move || async move { drop(op) }).await;
    });
}
