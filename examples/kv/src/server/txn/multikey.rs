//! Multi-key commands over keys of several shards, and transactions that contain one: a
//! program ([`Held`]) takes the keys' shards in ascending order, runs the command as one
//! step over all of them ([`crate::routing::atomic`]: gather, run as on one shard, write
//! back), and lets them go. A blocking command that would wait (BLMOVE, BLPOP, BLMPOP with
//! keys on several shards) lets go instead and waits on every shard of its keys for a wake-up
//! (see `server/blocking.rs`), then tries again under the locks.
//!
//! While a program runs for a connection, the connection reads no further request (its
//! later commands must see the program's writes: they could otherwise reach a shard before
//! the program's lock request does).

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use corewire::runtime::spawn_local;

use super::held::{Grant, Held};
use super::TxnMsg;
use crate::blocking::{parse_timeout, Deadline};
use crate::command::{Command, Transaction, TxnItem, TypedOp};
use crate::reply::Reply;
use crate::routing::atomic::{self, Stored};
use crate::routing::{route, shard_of, FanOut, Route};
use crate::server::shard::{now_ms, Shard};
use crate::server::sink::Origin;

/// How often a blocked program looks at its deadline and whether its client is still there.
const BLOCKED_TICK: Duration = Duration::from_millis(100);

/// Starts `command` (keys on `shards`) for request `origin` of a connection of `shard`;
/// the reply reaches the connection when done.
pub(crate) fn start(shard: Rc<Shard>, origin: Origin, shards: Vec<usize>, command: Command) {
    shard.txn.hold_back(origin.sink, origin.seq);
    spawn_local(async move {
        let reply = run_command(&shard, origin, shards, command).await;
        shard.deliver(origin, reply);
    });
}

/// Starts EXEC of a transaction with a multi-key command over several shards inside: every
/// command in queue order, one step at a time, with all the shards held.
pub(crate) fn start_transaction(
    shard: Rc<Shard>,
    origin: Origin,
    transaction: Transaction,
    watching: Vec<usize>,
) {
    shard.txn.hold_back(origin.sink, origin.seq);
    spawn_local(async move {
        let reply = run_transaction(&shard, origin, transaction, watching).await;
        shard.deliver(origin, reply);
    });
}

async fn run_command(
    shard: &Rc<Shard>,
    origin: Origin,
    shards: Vec<usize>,
    command: Command,
) -> Reply {
    let held = Held::new(shard.clone());
    let deadline = blocking_deadline(&command, now_ms());
    let mut command = command;
    let mut woken = false;
    loop {
        held.lock(&shards, None).await;
        let outcome = apply(&held, command.clone(), deadline.is_some(), woken).await;
        held.release();
        let Err(WouldBlock(waiting)) = outcome else {
            return outcome.unwrap_or_else(|_| Reply::NullArray);
        };
        // A stream read waits for entries after the IDs it had when it first found none.
        if let Some(waiting) = waiting {
            command = waiting;
        }
        let Some(deadline) = deadline else {
            return Reply::NullArray;
        };
        let Command::Typed(typed) = &command else {
            return Reply::NullArray;
        };
        let zset = matches!(
            typed.op,
            TypedOp::BZPopMin | TypedOp::BZPopMax | TypedOp::BZMPop
        );
        if !wait_for_items(&held, origin, atomic::waits_on(typed), zset, deadline).await {
            return crate::server::blocking::timed_out();
        }
        woken = true;
    }
}

/// The command would wait for items (a blocking pop that found none); a stream read, as
/// the read that waits (its `$` fixed).
#[derive(Debug)]
struct WouldBlock(Option<Command>);

/// A blocking command's deadline, if it is one with a valid timeout (an invalid one is
/// reported by the store when the command runs).
fn blocking_deadline(command: &Command, now: u64) -> Option<Deadline> {
    let Command::Typed(typed) = command else {
        return None;
    };
    if !typed.blocks() {
        return None;
    }
    if typed.op.is_stream_read() {
        let block = crate::store::stream_read_args(&typed.args, typed.op)?.block?;
        return crate::blocking::parse_timeout_ms(&block, now).ok();
    }
    let timeout = match typed.op {
        TypedOp::BLMPop | TypedOp::BZMPop => typed.args.first(),
        _ => typed.args.last(),
    }?;
    parse_timeout(timeout, now).ok()
}

/// Runs `command` as one step over the held shards of its keys. With `may_block`, a
/// blocking pop that finds nothing returns [`WouldBlock`]; without, it answers as inside
/// MULTI (nil at once). `woken`: a blocked pop woken by items, which pops only from keys of
/// its type (Redis serves a blocked client from the key that got items, past keys that became
/// another type meanwhile).
async fn apply(
    held: &Held,
    command: Command,
    may_block: bool,
    woken: bool,
) -> Result<Reply, WouldBlock> {
    let shards = held.shard().count;
    let keys = atomic::keys_of(&command);
    let mut stored: Vec<Option<Stored>> = vec![None; keys.len()];
    let mut over_limit = false;
    for target in held.held() {
        let (indices, mine): (Vec<usize>, Vec<Bytes>) = keys
            .iter()
            .enumerate()
            .filter(|(_, key)| shard_of(key, shards) == target)
            .map(|(i, key)| (i, key.clone()))
            .unzip();
        if mine.is_empty() {
            continue;
        }
        let (dumped, over) = held.dump(target, mine).await;
        over_limit |= over;
        for (i, dumped) in indices.into_iter().zip(dumped) {
            stored[i] = dumped.map(|d| Stored {
                payload: d.payload,
                expire_at: d.expire_at,
            });
        }
    }
    let now = now_ms();
    if over_limit && may_grow(&command) {
        return Ok(crate::command::CommandError::OutOfMemory.into());
    }
    let mut scratch = atomic::scratch(&keys, &stored, now);
    if woken {
        let mut dropped = false;
        if let Command::Typed(typed) = &command {
            let zset = matches!(
                typed.op,
                TypedOp::BZPopMin | TypedOp::BZPopMax | TypedOp::BZMPop
            );
            let list = matches!(
                typed.op,
                TypedOp::BLPop
                    | TypedOp::BRPop
                    | TypedOp::BLMove
                    | TypedOp::BRPopLPush
                    | TypedOp::BLMPop
            );
            // Pops only: a stream read woken by an entry reads its streams as they are.
            let sources = if zset || list {
                atomic::waits_on(typed)
            } else {
                Vec::new()
            };
            for source in sources {
                let poppable = if zset {
                    scratch.has_zset_items(&source, now)
                } else {
                    scratch.has_list_items(&source, now)
                };
                let Some(i) = keys.iter().position(|key| *key == source) else {
                    continue;
                };
                if !poppable && stored[i].is_some() {
                    // Left as it is: out of the scratch store and out of the write-back.
                    stored[i] = None;
                    dropped = true;
                }
            }
        }
        if dropped {
            scratch = atomic::scratch(&keys, &stored, now);
        }
    }
    // The thresholds (hll-sparse-max-bytes, ...) the command would meet on one shard.
    scratch.set_encoding_limits(held.shard().store().encoding_limits());
    // SORT's BY and GET patterns read keys known only now (the router held every shard).
    let read = scratch.sort_pattern_keys(&command, &keys, now);
    if !read.is_empty() {
        let gathered = gather(held, &read).await;
        atomic::restore_into(&mut scratch, &read, &gathered, now);
    }
    let stream_read = matches!(&command, Command::Typed(t) if t.op.is_stream_read());
    if command.is_blocking() && !stream_read && !atomic::would_answer(&scratch, &command, now) {
        if may_block {
            return Err(WouldBlock(None));
        }
        let moves = matches!(&command, Command::Typed(t) if matches!(t.op, TypedOp::BLMove | TypedOp::BRPopLPush));
        return Ok(if moves {
            Reply::NullBulk
        } else {
            Reply::NullArray
        });
    }
    let waiting = match &command {
        Command::Typed(typed) if stream_read && may_block => {
            Some(Command::Typed(scratch.stream_read_to_wait(typed)))
        }
        _ => None,
    };
    let atomic::Ran {
        reply,
        writes,
        events,
    } = atomic::run(&mut scratch, command, &keys, &stored, now);
    let mut events = events;
    if !held.shard().notifies() {
        // Only client tracking reads them: the keys' changes, not their misses.
        events.retain(|event| event.modifies());
    }
    if waiting.is_some() && reply == Reply::NullArray && writes.is_empty() {
        return Err(WouldBlock(waiting));
    }
    // Owner by owner in the order of the command's events: each publishes its keys' events.
    for back in atomic::write_backs(writes, events, |key| shard_of(key, shards)) {
        for reply in held
            .write_back(back.shard, back.commands, back.events)
            .await
        {
            if reply.is_error() {
                tracing::error!(
                    target = back.shard,
                    ?reply,
                    "a multi-key command's write-back failed"
                );
            }
        }
    }
    Ok(reply)
}

/// The stored forms of `keys` from the held shards that own them (`None`: missing, or on a
/// shard not held).
async fn gather(held: &Held, keys: &[Bytes]) -> Vec<Option<Stored>> {
    let shards = held.shard().count;
    let mut stored: Vec<Option<Stored>> = vec![None; keys.len()];
    for target in held.held() {
        let (indices, mine): (Vec<usize>, Vec<Bytes>) = (keys.iter().enumerate())
            .filter(|(_, key)| shard_of(key, shards) == target)
            .map(|(i, key)| (i, key.clone()))
            .unzip();
        if mine.is_empty() {
            continue;
        }
        let (dumped, _) = held.dump(target, mine).await;
        for (i, dumped) in indices.into_iter().zip(dumped) {
            stored[i] = dumped.map(|d| Stored {
                payload: d.payload,
                expire_at: d.expire_at,
            });
        }
    }
    stored
}

/// A multi-key command run by a program that already holds its shards (a script's call).
pub(crate) async fn apply_held(held: &Held, command: Command) -> Reply {
    apply(held, command, false, false)
        .await
        .unwrap_or(Reply::NullArray)
}

fn may_grow(command: &Command) -> bool {
    crate::command::table::find(command.name().as_bytes())
        .is_some_and(|spec| spec.flags.contains(&"denyoom"))
}

/// Waits until one of `keys` may have items (`true`), or the deadline passes or the client
/// goes away (`false`).
async fn wait_for_items(
    held: &Held,
    client: Origin,
    keys: Vec<Bytes>,
    zset: bool,
    deadline: Deadline,
) -> bool {
    let shard = held.shard();
    let seq = held.reserve_seq();
    let wake = held.origin(seq);
    let mut targets: Vec<usize> = Vec::new();
    for target in 0..shard.count {
        let mine: Vec<Bytes> = (keys.iter())
            .filter(|key| shard_of(key, shard.count) == target)
            .cloned()
            .collect();
        if !mine.is_empty() {
            targets.push(target);
            held.send(
                target,
                TxnMsg::Block {
                    origin: wake,
                    keys: mine,
                    zset,
                },
            );
        }
    }
    shard.program_blocked(true);
    let woken = loop {
        if held.try_reply(seq).is_some() {
            break true;
        }
        let past = matches!(deadline, Deadline::At(at) if now_ms() >= at);
        if past || shard.sink(client.sink).is_none() {
            break false;
        }
        held.wait_any(BLOCKED_TICK).await;
    };
    shard.program_blocked(false);
    for target in targets {
        held.send(target, TxnMsg::Unblock(wake));
    }
    held.forget(seq);
    woken
}

async fn run_transaction(
    shard: &Rc<Shard>,
    exec: Origin,
    transaction: Transaction,
    watching: Vec<usize>,
) -> Reply {
    enum Item {
        Done(Reply),
        Single(usize, Command),
        FanOut(FanOut),
        Atomic(Command),
        Script(crate::scripting::ScriptCommand),
    }
    let mut items = Vec::new();
    let mut shards = watching;
    for item in transaction.items {
        let command = match item {
            TxnItem::Answered(reply) => {
                items.push(Item::Done(reply));
                continue;
            }
            TxnItem::Run(Command::Script(script)) if script.op.runs_script() => {
                // A script in a transaction runs here, with the shards it declares held too.
                shards.push(shard.id);
                shards.extend(crate::server::script::transaction_shards(shard, &script));
                items.push(Item::Script(script));
                continue;
            }
            TxnItem::Run(command) => command,
        };
        if let Some(refusal) = shard.aof.as_ref().and_then(|aof| aof.admit(&command).err()) {
            items.push(Item::Done(refusal));
            continue;
        }
        items.push(match route(command, shard.count) {
            Route::Refused(reply) => Item::Done(reply),
            Route::Single { shard, command } => {
                shards.push(shard);
                Item::Single(shard, command)
            }
            Route::FanOut(fan_out) => {
                shards.extend(fan_out.parts.iter().map(|part| part.shard));
                Item::FanOut(fan_out)
            }
            Route::Atomic {
                shards: owners,
                command,
            } => {
                shards.extend(owners);
                Item::Atomic(command)
            }
        });
    }
    shards.sort_unstable();
    shards.dedup();
    let held = Rc::new(Held::new(shard.clone()));
    if held.lock(&shards, Some((exec.shard, exec.sink))).await == Grant::Dirty {
        return Reply::NullArray;
    }
    let mut replies = Vec::with_capacity(items.len());
    for item in items {
        replies.push(match item {
            Item::Done(reply) => reply,
            Item::Single(target, command) => held.call(target, command).await,
            Item::FanOut(FanOut { parts, mut merger }) => {
                for (i, part) in parts.into_iter().enumerate() {
                    let reply = held.call(part.shard, part.command).await;
                    if let Err(error) = merger.accept(i, reply) {
                        tracing::error!(%error, "bad part reply in a transaction");
                    }
                }
                (merger.finish(&shard.shared.info()))
                    .unwrap_or_else(|error| Reply::error(format!("ERR internal error: {error}")))
            }
            Item::Atomic(command) => apply(&held, command, false, false)
                .await
                .unwrap_or(Reply::NullArray),
            Item::Script(script) => {
                crate::server::script::run_in_transaction(shard, &held, script).await
            }
        });
    }
    held.release();
    Reply::Array(replies)
}
