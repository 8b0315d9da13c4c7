use bytes::Bytes;

use super::*;
use crate::change::NoLog;
use crate::command::Command;
use crate::info::ServerInfo;
use crate::reply::Reply;
use crate::store::Store;

fn command(line: &str) -> Command {
    Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()).unwrap()
}

/// Executes a routed command the way the glue would, answering parts in reverse order to
/// show the merge does not depend on arrival order.
fn execute(stores: &mut [Store], line: &str) -> Reply {
    match route(command(line), stores.len()) {
        Route::Single { shard, command } => stores[shard].execute(command, 0, &mut NoLog),
        Route::Refused(reply) => reply,
        Route::Atomic { shards, command } => {
            // What `server/txn/multikey.rs` does with the shards held: gather, run, write back.
            let keys = atomic::keys_of(&command);
            let stored: Vec<Option<atomic::Stored>> = keys
                .iter()
                .map(|key| {
                    let owner = shard_of(key, stores.len());
                    assert!(shards.contains(&owner));
                    stores[owner]
                        .dump(key, 0)
                        .map(|(payload, expire_at)| atomic::Stored { payload, expire_at })
                })
                .collect();
            let mut scratch = atomic::scratch(&keys, &stored, 0);
            let atomic::Ran { reply, writes, .. } =
                atomic::run(&mut scratch, command, &keys, &stored, 0);
            for written in writes {
                let owner = shard_of(&written.key, stores.len());
                let applied = stores[owner].execute(written.into_command(), 0, &mut NoLog);
                assert!(!applied.is_error(), "{applied:?}");
            }
            reply
        }
        Route::FanOut(FanOut { parts, mut merger }) => {
            assert_eq!(merger.parts(), parts.len());
            let replies: Vec<(usize, Reply)> = parts
                .into_iter()
                .enumerate()
                .map(|(i, part)| (i, stores[part.shard].execute(part.command, 0, &mut NoLog)))
                .collect();
            for (i, reply) in replies.into_iter().rev() {
                assert!(!merger.is_complete());
                merger.accept(i, reply).unwrap();
            }
            assert!(merger.is_complete());
            merger.finish(&ServerInfo::default()).unwrap()
        }
    }
}

fn keys_on_distinct_shards(shards: usize) -> Vec<String> {
    let mut found: Vec<Option<String>> = vec![None; shards];
    for i in 0.. {
        let key = format!("key{i}");
        let slot = &mut found[shard_of(key.as_bytes(), shards)];
        if slot.is_none() {
            *slot = Some(key);
        }
        if found.iter().all(Option::is_some) {
            return found.into_iter().flatten().collect();
        }
    }
    unreachable!()
}

#[test]
fn sharded_execution_matches_a_single_store() {
    let script: Vec<String> = {
        let mut lines = vec!["MSET a 1 b 2 c 3 d 4 e 5 f 6 g 7 h 8 a 9".to_string()];
        lines.push("MGET h g f e d c b a nope a".into());
        lines.push("EXISTS a b nope a c".into());
        lines.push("DEL a b nope a".into());
        lines.push("MGET a b c".into());
        lines.push("DBSIZE".into());
        lines.push("INCR counter".into());
        lines.push("SET x y NX".into());
        lines.push("FLUSHALL".into());
        lines.push("DBSIZE".into());
        lines.push("MGET a x".into());
        lines
    };
    let mut single = vec![Store::default()];
    let mut sharded: Vec<Store> = (0..4).map(|_| Store::default()).collect();
    for line in &script {
        assert_eq!(
            execute(&mut sharded, line),
            execute(&mut single, line),
            "{line}"
        );
    }
}

#[test]
fn keys_on_one_shard_are_not_split() {
    match route(command("MGET {u}a {u}b {u}c"), 8) {
        Route::Single { shard, command } => {
            assert_eq!(shard, shard_of(b"u", 8));
            let keys = ["{u}a", "{u}b", "{u}c"].map(Bytes::from).to_vec();
            assert_eq!(command, Command::MGet(keys));
        }
        Route::FanOut(_) | Route::Refused(_) | Route::Atomic { .. } => {
            panic!("hash-tagged keys must stay on one shard")
        }
    }
    assert!(matches!(
        route(command("MSET {u}a 1 {u}b 2"), 8),
        Route::Single { .. }
    ));
    assert!(matches!(
        route(command("DBSIZE"), 1),
        Route::Single { shard: 0, .. }
    ));
}

#[test]
fn fan_out_parts_keep_request_order_per_shard() {
    let keys = keys_on_distinct_shards(2);
    let (k0, k1) = (&keys[0], &keys[1]);
    let line = format!("DEL {k1} {k0} {k1}x {k1}");
    let Route::FanOut(fan_out) = route(command(&line), 2) else {
        panic!("keys on two shards must fan out");
    };
    assert_eq!(fan_out.parts.len(), 2);
    let first = &fan_out.parts[0];
    assert_eq!(first.shard, shard_of(k1.as_bytes(), 2));
    let Command::Del(first_keys) = &first.command else {
        panic!("DEL parts are DELs");
    };
    assert_eq!(first_keys.first().map(|k| &k[..]), Some(k1.as_bytes()));
    assert_eq!(first_keys.last().map(|k| &k[..]), Some(k1.as_bytes()));
}

#[test]
fn single_key_commands_go_to_the_owning_shard() {
    for line in [
        "GET foo",
        "SET foo v",
        "INCR foo",
        "EXPIRE foo 1",
        "TTL foo",
        "APPEND foo x",
    ] {
        match route(command(line), 16) {
            Route::Single { shard, .. } => assert_eq!(shard, shard_of(b"foo", 16), "{line}"),
            Route::FanOut(_) | Route::Refused(_) | Route::Atomic { .. } => {
                panic!("{line} must not fan out")
            }
        }
    }
}

#[test]
fn info_merges_every_shard() {
    let mut stores: Vec<Store> = (0..3).map(|_| Store::default()).collect();
    execute(&mut stores, "MSET a 1 b 2 c 3 d 4 e 5");
    let Reply::Bulk(text) = execute(&mut stores, "INFO keyspace shards") else {
        panic!("INFO replies with a bulk string");
    };
    let text = String::from_utf8(text.to_vec()).unwrap();
    assert!(
        text.contains("db0:keys=5,expires=0,avg_ttl=0\r\n"),
        "{text}"
    );
    for shard in 0..3 {
        assert!(text.contains(&format!("shard{shard}:keys=")), "{text}");
    }
}

#[test]
fn part_errors_and_misuse() {
    let mut merger = match route(command("DBSIZE"), 2) {
        Route::FanOut(fan_out) => fan_out.merger,
        Route::Single { .. } | Route::Refused(_) | Route::Atomic { .. } => {
            panic!("two shards fan out")
        }
    };
    assert_eq!(
        merger.accept(2, Reply::Integer(1)),
        Err(MergeError::PartOutOfRange { part: 2, parts: 2 })
    );
    merger.accept(0, Reply::Integer(1)).unwrap();
    assert_eq!(
        merger.accept(0, Reply::Integer(1)),
        Err(MergeError::DuplicateReply { part: 0 })
    );
    merger.accept(1, Reply::error("ERR boom")).unwrap();
    assert_eq!(
        merger.finish(&ServerInfo::default()),
        Ok(Reply::error("ERR boom"))
    );

    let merger = match route(command("FLUSHALL"), 3) {
        Route::FanOut(fan_out) => fan_out.merger,
        Route::Single { .. } | Route::Refused(_) | Route::Atomic { .. } => {
            panic!("three shards fan out")
        }
    };
    assert_eq!(
        merger.finish(&ServerInfo::default()),
        Err(MergeError::Incomplete { missing: 3 })
    );
}

/// SINTER / SUNION / SDIFF / SINTERCARD and the STORE forms over keys of several shards
/// answer as one store holding every key would, and write the same (as sets: the order of
/// members is free).
#[test]
fn set_algebra_gathers_like_a_single_store() {
    let keys = keys_on_distinct_shards(4);
    let (a, b, c) = (&keys[0], &keys[1], &keys[2]);
    let setup = [
        format!("SADD {a} x y z only-a"),
        format!("SADD {b} x y only-b"),
        format!("SADD {c} y"),
        format!("SET {} string", keys[3]),
    ];
    let queries = [
        format!("SINTER {a} {b} {c}"),
        format!("SINTER {a} {b} missing"),
        format!("SUNION {a} {b} {c} missing"),
        format!("SDIFF {a} {b} {c}"),
        format!("SDIFF missing {a}"),
        format!("SINTERCARD 2 {a} {b}"),
        format!("SINTERCARD 2 {a} {b} LIMIT 1"),
        format!("SINTERCARD 0 {a} {b}"),
        format!("SINTER {a} {}", keys[3]),
        format!("SINTERSTORE {a} {a} {b}"),
    ];
    let mut single = vec![Store::default()];
    let mut sharded: Vec<Store> = (0..4).map(|_| Store::default()).collect();
    for line in &setup {
        execute(&mut single, line);
        execute(&mut sharded, line);
    }
    let as_set = |reply: Reply| match reply {
        Reply::Array(mut items) => {
            items.sort_by_key(|item| format!("{item:?}"));
            Reply::Array(items)
        }
        other => other,
    };
    let check = format!("SMEMBERS {a}");
    for line in queries.iter().chain([&check]) {
        assert_eq!(
            as_set(execute(&mut sharded, line)),
            as_set(execute(&mut single, line)),
            "{line}"
        );
    }
}

/// CLIENT LIST and KILL go to every shard; the merge sorts the shards' lines and the caller's
/// own by id (or keeps the order of the ids asked), and adds up the kills.
#[test]
fn client_list_and_kill_gather_every_shard() {
    use crate::clients::{KillFilter, ListQuery};
    use crate::command::{ClientRequest, ClientsBroadcast, ClientsOp};
    let list = |query: ListQuery| {
        Command::Client(ClientRequest::Broadcast(Box::new(ClientsBroadcast {
            caller: 4,
            op: ClientsOp::List {
                query,
                caller_line: Some((4, Bytes::from_static(b"id=4"))),
            },
        })))
    };
    let line = |id: i64| {
        [
            Reply::Integer(id),
            Reply::Bulk(Bytes::from(format!("id={id}"))),
        ]
    };
    // Shard i's connections, as each shard answers its part.
    let parts = [
        Reply::Array(line(9).into_iter().chain(line(2)).collect()),
        Reply::Array(Vec::new()),
        Reply::Array(line(7).to_vec()),
    ];
    let merged = |command: Command, parts: &[Reply]| {
        let Route::FanOut(FanOut {
            parts: routed,
            mut merger,
        }) = route(command, 3)
        else {
            panic!("CLIENT LIST/KILL fan out");
        };
        assert_eq!(
            routed.iter().map(|part| part.shard).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        for (i, reply) in parts.iter().enumerate() {
            merger.accept(i, reply.clone()).unwrap();
        }
        merger.finish(&ServerInfo::default()).unwrap()
    };
    assert_eq!(
        merged(list(ListQuery::All), &parts),
        Reply::Bulk(Bytes::from_static(b"id=2\nid=4\nid=7\nid=9\n"))
    );
    assert_eq!(
        merged(list(ListQuery::Ids(vec![7, 4, 5, 7])), &parts),
        Reply::Bulk(Bytes::from_static(b"id=7\nid=4\nid=7\n"))
    );
    let kill = |args: &[&str], caller_killed: bool| {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
        Command::Client(ClientRequest::Broadcast(Box::new(ClientsBroadcast {
            caller: 4,
            op: ClientsOp::Kill {
                filter: KillFilter::parse(&args).unwrap(),
                caller_killed,
            },
        })))
    };
    let counts = [Reply::Integer(0), Reply::Integer(2), Reply::Integer(0)];
    let none = [Reply::Integer(0), Reply::Integer(0), Reply::Integer(0)];
    assert_eq!(
        merged(kill(&["type", "normal"], false), &counts),
        Reply::Integer(2)
    );
    assert_eq!(
        merged(kill(&["type", "normal", "skipme", "no"], true), &counts),
        Reply::Integer(3)
    );
    assert_eq!(merged(kill(&["1.2.3.4:5"], false), &none), {
        Reply::error("ERR No such client")
    });
    assert_eq!(merged(kill(&["1.2.3.4:5"], true), &none), Reply::ok());
}

/// A command over keys of several shards reports its own keyspace events, each to the
/// shard that owns its key, in the command's order: RENAME's `rename_from` owner comes
/// first even when its shard is the higher one, SINTERSTORE's event reaches the
/// destination's owner with the write.
#[test]
fn write_backs_carry_the_commands_events_in_order() {
    let keys = keys_on_distinct_shards(4);
    // `from` on a higher shard than `to`.
    let (to, from) = (&keys[0], &keys[3]);
    let owner = |key: &[u8]| shard_of(key, 4);
    let run = |line: &str, present: &[(&str, &str)]| {
        let command = command(line);
        let keys = atomic::keys_of(&command);
        let mut source = Store::default();
        for (key, value) in present {
            source.execute(command_of(&["SADD", key, value]), 0, &mut NoLog);
        }
        let stored: Vec<Option<atomic::Stored>> = (keys.iter())
            .map(|key| {
                (source.dump(key, 0))
                    .map(|(payload, expire_at)| atomic::Stored { payload, expire_at })
            })
            .collect();
        let mut scratch = atomic::scratch(&keys, &stored, 0);
        let ran = atomic::run(&mut scratch, command, &keys, &stored, 0);
        atomic::write_backs(ran.writes, ran.events, owner)
    };
    let plan = run(&format!("RENAME {from} {to}"), &[(from, "m")]);
    let shape: Vec<(usize, usize, Vec<&str>)> = (plan.iter())
        .map(|back| {
            // `new` (a key created) comes as on one shard, next to the command's event.
            let events = (back.events.iter())
                .map(|e| e.event)
                .filter(|&e| e != "new")
                .collect();
            (back.shard, back.commands.len(), events)
        })
        .collect();
    assert_eq!(
        shape,
        vec![(3, 1, vec!["rename_from"]), (0, 1, vec!["rename_to"])]
    );
    assert!(plan
        .iter()
        .all(|back| back.events.iter().all(|e| owner(&e.key) == back.shard)));
    let plan = run(
        &format!("SINTERSTORE {to} {from} {}", keys[1]),
        &[(from, "m"), (&keys[1], "m")],
    );
    let dest = plan.iter().find(|back| back.shard == 0).unwrap();
    let events: Vec<&str> = dest.events.iter().map(|e| e.event).collect();
    assert_eq!(events, ["new", "sinterstore"]);
    assert_eq!(dest.commands.len(), 1);
    // Sources read only: nothing goes back to their owners.
    assert!(plan.iter().all(|back| back.shard == 0));
}

fn command_of(args: &[&str]) -> Command {
    Command::parse(args.iter().map(|s| Bytes::from(s.to_string())).collect()).unwrap()
}
