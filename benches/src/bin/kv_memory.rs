//! Heap bytes per item of corewire-kv's store, without the server: the same loads
//! as `examples/kv/bench/percore.sh`'s memory part (N string keys, or N elements in one hash,
//! list, set or sorted set) run straight into a `Store`, and the live heap bytes counted by
//! [`CountingAlloc`] before and after, divided by N. RSS deltas of the server also carry what
//! a pipelined burst leaves behind (receive buffers, allocator pages not yet purged), which
//! varies by tens of bytes per item from run to run; this count does not. Compare it with
//! redis's `used_memory` delta (its allocator's count), not with RSS.
//!
//! Usage: `kv_memory [N (100000)]`; prints a Markdown table.

use bytes::Bytes;
use clap::Parser;
use corewire_bench::alloc_count::{live_bytes, CountingAlloc};
use corewire_kv::change::NoLog;
use corewire_kv::store::Store;
use corewire_kv::Command;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The command that adds item `i` of `kind`, as percore.sh's generator writes it.
fn command(kind: &str, i: usize) -> Vec<String> {
    match kind {
        "string" => vec!["SET".into(), format!("key:{i}"), format!("val{i:06}")],
        "hash" => vec![
            "HSET".into(),
            "h".into(),
            format!("field:{i}"),
            format!("val{i:06}"),
        ],
        "list" => vec!["RPUSH".into(), "l".into(), format!("val{i:06}")],
        "set" => vec!["SADD".into(), "s".into(), format!("member:{i}")],
        _ => vec![
            "ZADD".into(),
            "z".into(),
            i.to_string(),
            format!("member:{i}"),
        ],
    }
}

#[derive(Parser)]
#[command(
    name = "kv_memory",
    about = "Heap bytes per item of corewire-kv's store: a Markdown table"
)]
struct Flags {
    /// Items per load (at least 1).
    #[arg(default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    n: u32,
}

fn main() {
    let n = Flags::parse().n as usize;
    println!("| type | corewire heap bytes/item ({n} items) |");
    println!("|---|---|");
    for kind in ["string", "hash", "list", "set", "zset"] {
        let mut store = Store::default();
        let before = live_bytes();
        for i in 0..n {
            let args = command(kind, i).into_iter().map(Bytes::from).collect();
            let command = Command::parse(args).expect("a valid command");
            drop(store.execute(command, 0, &mut NoLog));
        }
        let after = live_bytes();
        println!("| {kind} | {} |", (after - before) / n as i64);
        drop(store);
    }
}
