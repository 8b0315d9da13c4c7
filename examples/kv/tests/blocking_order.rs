//! Blocking commands and writes sent from connections on every shard at once, with nothing
//! waited for in between. Whatever the interleaving across shards, every request is answered
//! and no item is lost or popped twice. Both I/O backends (`COREWIRE_BACKEND=epoll` too).

mod common;

use std::thread;

use common::{Reply, Resp, Server};

const SHARDS: &str = "4";
/// Consumers and producers: with the listener's least-connections placement, on every shard.
const CLIENTS: usize = 4;
const ITEMS: usize = 200;

fn backends() -> [(&'static str, Vec<(&'static str, &'static str)>); 2] {
    [
        ("default", vec![]),
        ("epoll", vec![("COREWIRE_BACKEND", "epoll")]),
    ]
}

#[test]
fn blocking_pops_and_pushes_from_every_shard_all_complete_each_item_once() {
    for (backend, env) in backends() {
        let server = Server::start_with_env(&["--shards", SHARDS], &env);
        let port = server.port;
        let consumers: Vec<_> = (0..CLIENTS)
            .map(|_| {
                thread::spawn(move || {
                    let mut conn = Resp::connect(port);
                    let mut got = Vec::new();
                    for _ in 0..ITEMS {
                        // Two keys on different shards, one per pop, alternating.
                        let key = if got.len() % 2 == 0 { "q{a}" } else { "q{b}" };
                        let reply = conn.call(&["BLPOP", key, "0"]);
                        let Reply::Array(Some(pair)) = reply else {
                            panic!("BLPOP answered {reply:?}");
                        };
                        got.push(pair[1].clone());
                    }
                    got
                })
            })
            .collect();
        let producers: Vec<_> = (0..CLIENTS)
            .map(|p| {
                thread::spawn(move || {
                    let mut conn = Resp::connect(port);
                    for i in 0..ITEMS {
                        let key = if i % 2 == 0 { "q{a}" } else { "q{b}" };
                        let item = format!("{p}:{i}");
                        let reply = conn.call(&["RPUSH", key, &item]);
                        assert!(matches!(reply, Reply::Int(_)), "RPUSH: {reply:?}");
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.join().expect("producer");
        }
        let mut all: Vec<Reply> = Vec::new();
        for consumer in consumers {
            all.extend(consumer.join().expect("consumer (a reply never came?)"));
        }
        assert_eq!(all.len(), CLIENTS * ITEMS, "{backend}");
        let mut texts: Vec<String> = (all.iter())
            .map(|r| match r {
                Reply::Bulk(Some(b)) => String::from_utf8(b.clone()).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        texts.sort();
        texts.dedup();
        assert_eq!(
            texts.len(),
            CLIENTS * ITEMS,
            "{backend}: an item popped twice"
        );
        let mut conn = Resp::connect(port);
        assert_eq!(
            conn.call(&["EXISTS", "q{a}", "q{b}"]),
            Reply::Int(0),
            "{backend}"
        );
    }
}
