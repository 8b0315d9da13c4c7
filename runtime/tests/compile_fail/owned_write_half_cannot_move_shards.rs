// A split stream's write half is as shard-bound as the stream: it cannot move to another shard.
use corewire_runtime::{submit_to, Runtime};

fn main() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let _ = rt.run_on(0, || async {
        let stream = corewire_runtime::net::TcpStream::connect("127.0.0.1:1".parse().unwrap()).await.unwrap();
        let half = stream.into_split().1;
        let _ = submit_to(1, move || async move { drop(half) }).await;
    });
}
