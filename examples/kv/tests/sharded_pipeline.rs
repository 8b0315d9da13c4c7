//! A simulated glue: one connection's pipeline is routed over several shards whose work and
//! replies are interleaved at random (keeping per-shard FIFO, which the runtime's channels
//! provide). The bytes the client receives must equal a one-shard, in-order execution.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use corewire_kv::change::NoLog;
use corewire_kv::info::ServerInfo;
use corewire_kv::routing::{atomic, route, shard_of, FanOut, Merger, Route};
use corewire_kv::session::{Session, SessionConfig};
use corewire_kv::store::Store;
use corewire_kv::{Command, Reply};
use proptest::prelude::*;

const NOW_MS: u64 = 1_000_000;

/// Deterministic choices from a proptest-provided seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

struct Work {
    seq: u64,
    part: Option<usize>,
    command: Command,
}

struct Done {
    seq: u64,
    part: Option<usize>,
    reply: Reply,
}

/// Runs `input` through a session over `shards` shards; `seed` 0 means strict FIFO.
fn serve(input: &[u8], shards: usize, seed: u64, max_backlog: usize) -> Vec<u8> {
    let mut session = Session::new(Arc::new(SessionConfig {
        max_backlog,
        ..SessionConfig::default()
    }));
    let mut stores: Vec<Store> = (0..shards).map(|_| Store::default()).collect();
    let mut queues: Vec<VecDeque<Work>> = (0..shards).map(|_| VecDeque::new()).collect();
    let mut done: Vec<Done> = Vec::new();
    let mut mergers: HashMap<u64, Merger> = HashMap::new();
    let mut rng = Rng(seed | 1);
    let mut output = Vec::new();
    session.feed(input);
    loop {
        while let Some(request) = session.next_request() {
            match route(request.command, shards) {
                Route::Single { shard, command } => queues[shard].push_back(Work {
                    seq: request.seq,
                    part: None,
                    command,
                }),
                Route::FanOut(FanOut { parts, merger }) => {
                    for (i, part) in parts.into_iter().enumerate() {
                        queues[part.shard].push_back(Work {
                            seq: request.seq,
                            part: Some(i),
                            command: part.command,
                        });
                    }
                    mergers.insert(request.seq, merger);
                }
                Route::Refused(reply) => done.push(Done {
                    seq: request.seq,
                    part: None,
                    reply,
                }),
                // The glue holds every shard of the keys (after the work queued there before
                // it) and runs the command as one step; the connection reads nothing more
                // until it answers.
                Route::Atomic { command, .. } => {
                    for shard in 0..shards {
                        while let Some(work) = queues[shard].pop_front() {
                            let reply = stores[shard].execute(work.command, NOW_MS, &mut NoLog);
                            done.push(Done {
                                seq: work.seq,
                                part: work.part,
                                reply,
                            });
                        }
                    }
                    let keys = atomic::keys_of(&command);
                    let stored: Vec<Option<atomic::Stored>> = keys
                        .iter()
                        .map(|key| {
                            let store = &stores[shard_of(key, shards)];
                            store
                                .dump(key, NOW_MS)
                                .map(|(payload, expire_at)| atomic::Stored { payload, expire_at })
                        })
                        .collect();
                    let mut scratch = atomic::scratch(&keys, &stored, NOW_MS);
                    let atomic::Ran { reply, writes, .. } =
                        atomic::run(&mut scratch, command, &keys, &stored, NOW_MS);
                    for written in writes {
                        let owner = shard_of(&written.key, shards);
                        stores[owner].execute(written.into_command(), NOW_MS, &mut NoLog);
                    }
                    done.push(Done {
                        seq: request.seq,
                        part: None,
                        reply,
                    });
                }
            }
        }
        if let Some(bytes) = session.take_output() {
            output.extend_from_slice(&bytes);
        }
        let busy: Vec<usize> = (0..shards).filter(|&s| !queues[s].is_empty()).collect();
        if busy.is_empty() && done.is_empty() {
            break;
        }
        let execute = done.is_empty() || (!busy.is_empty() && (seed == 0 || rng.below(2) == 0));
        if execute {
            let shard = if seed == 0 {
                busy[0]
            } else {
                busy[rng.below(busy.len())]
            };
            let work = queues[shard].pop_front().unwrap();
            let reply = stores[shard].execute(work.command, NOW_MS, &mut NoLog);
            done.push(Done {
                seq: work.seq,
                part: work.part,
                reply,
            });
        } else {
            let index = if seed == 0 { 0 } else { rng.below(done.len()) };
            let Done { seq, part, reply } = done.swap_remove(index);
            match part {
                None => session.complete(seq, reply).unwrap(),
                Some(part) => {
                    let merger = mergers.get_mut(&seq).unwrap();
                    merger.accept(part, reply).unwrap();
                    if merger.is_complete() {
                        let merged = mergers.remove(&seq).unwrap().finish(&ServerInfo::default());
                        session.complete(seq, merged.unwrap()).unwrap();
                    }
                }
            }
        }
    }
    assert_eq!(session.backlog(), 0, "every request answered");
    output
}

fn line_strategy() -> impl Strategy<Value = String> {
    let key = || (0u8..6).prop_map(|k| format!("k{k}"));
    let value = || (0u8..4).prop_map(|v| format!("{v}"));
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| format!("SET {k} {v}")),
        (key(), value()).prop_map(|(k, v)| format!("SET {k} {v} NX GET")),
        key().prop_map(|k| format!("GET {k}")),
        (key(), key()).prop_map(|(a, b)| format!("DEL {a} {b}")),
        (key(), value(), key(), value()).prop_map(|(a, x, b, y)| format!("MSET {a} {x} {b} {y}")),
        (key(), key(), key()).prop_map(|(a, b, c)| format!("MGET {a} {b} {c}")),
        (key(), key()).prop_map(|(a, b)| format!("EXISTS {a} {b} {a}")),
        key().prop_map(|k| format!("INCR {k}")),
        (key(), value()).prop_map(|(k, v)| format!("APPEND {k} {v}")),
        (key(), value()).prop_map(|(k, v)| format!("GETSET {k} {v}")),
        key().prop_map(|k| format!("STRLEN {k}")),
        Just("DBSIZE".to_string()),
        Just("PING".to_string()),
        Just("bogus x".to_string()),
        Just("FLUSHALL".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sharded_out_of_order_execution_matches_sequential(
        lines in prop::collection::vec(line_strategy(), 1..40),
        seed in 1u64..u64::MAX,
        shards in 2usize..6,
        max_backlog in 1usize..8,
    ) {
        let input: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\r\n").into_bytes()).collect();
        let reference = serve(&input, 1, 0, 1024);
        let sharded = serve(&input, shards, seed, max_backlog);
        prop_assert_eq!(
            String::from_utf8_lossy(&sharded),
            String::from_utf8_lossy(&reference)
        );
    }
}

#[test]
fn quit_in_a_pipeline_answers_everything_before_it() {
    let output = serve(b"SET a 1\r\nMGET a b c d\r\nQUIT\r\nGET a\r\n", 4, 7, 16);
    assert_eq!(
        String::from_utf8(output).unwrap(),
        "+OK\r\n*4\r\n$1\r\n1\r\n$-1\r\n$-1\r\n$-1\r\n+OK\r\n"
    );
}
