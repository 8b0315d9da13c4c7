//! A deterministic stand-in for `redis-benchmark -P 16` against one shard, for
//! `valgrind --tool=callgrind`, which cannot run the io_uring server itself (it hangs): the
//! same requests (16 per read, keys `key:` + 12 digits from a fixed-seed generator over
//! `--keyspace` keys, 3-byte values) go through the server's per-request path without the
//! sockets: RESP parsing, command parsing, the store, reply encoding.
//!
//! Usage: kv-hotpath TEST [REQUESTS (100000)] [KEYSPACE (100000)]; TEST is set, get, incr,
//! sadd, hset, lpush or mset. The store is loaded with one round of REQUESTS first so the
//! measured round finds the keys (callgrind: `--toggle-collect=*measured_round*`).

use bytes::BytesMut;
use clap::Parser;

// The server's allocator, so allocation costs count as they do there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use corewire_kv::change::NoLog;
use corewire_kv::resp::{ParserLimits, RequestParser};
use corewire_kv::store::Store;
use corewire_kv::Command;

fn request(test: &str, key: &str, out: &mut Vec<u8>) {
    let args: Vec<&str> = match test {
        "set" => vec!["SET", key, "xxx"],
        "get" => vec!["GET", key],
        "incr" => vec!["INCR", key],
        "sadd" => vec!["SADD", "myset", key],
        "hset" => vec!["HSET", "myhash", key, "xxx"],
        "lpush" => vec!["LPUSH", "mylist", "xxx"],
        "mset" => (0..10)
            .flat_map(|_| [key, "xxx"])
            .fold(vec!["MSET"], |mut v, a| {
                v.push(a);
                v
            }),
        other => panic!("unknown test {other}"),
    };
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
}

/// The requests, already encoded in batches of 16 as a pipelining client sends them.
fn batches(test: &str, requests: usize, keyspace: u64, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut batches = Vec::new();
    let mut batch = Vec::new();
    for i in 0..requests {
        request(
            test,
            &format!("key:{:012}", rng.u64(..keyspace)),
            &mut batch,
        );
        if i % 16 == 15 {
            batches.push(std::mem::take(&mut batch));
        }
    }
    batches.push(batch);
    batches
}

#[inline(never)]
fn run_round(store: &mut Store, parser: &mut RequestParser, batches: &[Vec<u8>]) -> usize {
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut output = BytesMut::with_capacity(64 * 1024);
    let mut replies = 0;
    for batch in batches {
        input.extend_from_slice(batch);
        while let Some(args) = parser.parse(&mut input).expect("valid RESP") {
            let command = Command::parse(args).expect("valid command");
            store.execute(command, 1, &mut NoLog).encode(&mut output);
            replies += 1;
        }
        output.clear();
    }
    replies
}

#[inline(never)]
fn measured_round(store: &mut Store, parser: &mut RequestParser, batches: &[Vec<u8>]) -> usize {
    run_round(store, parser, batches)
}

#[derive(Parser)]
#[command(
    name = "kv-hotpath",
    about = "redis-benchmark -P 16's requests through the server's per-request path, no sockets"
)]
struct Cli {
    #[arg(default_value = "set", value_parser = ["set", "get", "incr", "sadd", "hset", "lpush", "mset"])]
    test: String,
    /// Requests per round.
    #[arg(default_value_t = 100_000)]
    requests: usize,
    /// Keys drawn from.
    #[arg(default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    keyspace: u64,
}

fn main() {
    let Cli {
        test,
        requests,
        keyspace,
    } = Cli::parse();
    let test = test.as_str();
    let mut store = Store::default();
    let mut parser = RequestParser::new(ParserLimits::default());
    run_round(
        &mut store,
        &mut parser,
        &batches(test, requests, keyspace, 1),
    );
    let measured = batches(test, requests, keyspace, 2);
    let replies = measured_round(&mut store, &mut parser, &measured);
    println!("{test}: {replies} replies, {} keys", store.len());
}
