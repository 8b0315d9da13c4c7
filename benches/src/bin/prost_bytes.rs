//! `prost_bytes vec|bytes SIZE ITERATIONS`: what a protobuf `bytes` field costs the typed
//! layer as prost's default `Vec<u8>` against `bytes::Bytes` (prost-build's `bytes([...])`,
//! which corewire-build leaves to the user): each iteration decodes a one-field message from
//! the `Bytes` it arrived in, as the typed layer does, and encodes it again into a send
//! buffer. Prints the allocations per iteration; run it under callgrind at N and 2N
//! iterations for the instructions (see BENCHMARKS.md).

use bytes::{Bytes, BytesMut};
use corewire_bench::alloc_count::{alloc_count, CountingAlloc};
use prost::Message;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[derive(Clone, PartialEq, Message)]
struct AsVec {
    #[prost(bytes = "vec", tag = "1")]
    payload: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct AsBytes {
    #[prost(bytes = "bytes", tag = "1")]
    payload: Bytes,
}

fn run<M: Message + Default>(wire: &Bytes, iterations: usize, out: &mut BytesMut) {
    for _ in 0..iterations {
        let message = M::decode(std::hint::black_box(wire.clone())).expect("decodes");
        out.clear();
        message.encode_raw(out);
        std::hint::black_box(&out);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, kind, size, iterations] = args.as_slice() else {
        eprintln!("usage: prost_bytes vec|bytes SIZE ITERATIONS");
        std::process::exit(2);
    };
    let size: usize = size.parse().expect("SIZE");
    let iterations: usize = iterations.parse().expect("ITERATIONS");
    let wire = Bytes::from(
        AsBytes {
            payload: Bytes::from(vec![7u8; size]),
        }
        .encode_to_vec(),
    );
    let mut out = BytesMut::with_capacity(size + 16);
    let before = alloc_count();
    match kind.as_str() {
        "vec" => run::<AsVec>(&wire, iterations, &mut out),
        "bytes" => run::<AsBytes>(&wire, iterations, &mut out),
        other => {
            eprintln!("unknown kind {other}: vec or bytes");
            std::process::exit(2);
        }
    }
    let allocs = alloc_count() - before;
    println!(
        "{{\"kind\":\"{kind}\",\"size\":{size},\"iterations\":{iterations},\"allocs_per_iteration\":{:.3}}}",
        allocs as f64 / iterations as f64
    );
}
