use bytes::Bytes;

use super::merge::Merger;
use super::slot::shard_of;
use crate::command::{ClientRequest, Command, PubSubQuery};
use crate::reply::Reply;

/// Where a command executes.
#[derive(Debug)]
pub enum Route {
    /// The whole command runs on `shard`; its reply is the client's reply as is.
    Single { shard: usize, command: Command },
    /// Send each part to its shard (`parts[i]` answers as part `i`), feed the replies to the
    /// merger in any order, and reply with [`Merger::finish`].
    FanOut(FanOut),
    /// Not executed: the reply says why.
    Refused(Reply),
    /// A command over keys of several shards (`shards`, ascending): it runs with all of them
    /// held, so no other command sees it half done (see `server/txn/multikey.rs`).
    Atomic {
        shards: Vec<usize>,
        command: Command,
    },
}

#[derive(Debug)]
pub struct FanOut {
    pub parts: Vec<ShardPart>,
    pub merger: Merger,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPart {
    pub shard: usize,
    pub command: Command,
}

/// The shard that runs `command` whole when the command alone says which: a command of one
/// key (the string commands), or a collection command when one shard owns every key (its
/// keys are not even listed: a vector per request). `None`: [`route`] decides. The glue
/// asks this first, which spares these commands a [`Route`] built and taken apart.
#[inline]
pub fn single_shard(command: &Command, shards: usize) -> Option<usize> {
    match command.single_key() {
        Some(key) => Some(shard_of(key, shards)),
        None if shards <= 1 && matches!(command, Command::Typed(_)) => Some(0),
        None => None,
    }
}

/// Plans `command` over `shards` shards.
///
/// Multi-key commands whose keys all live on one shard stay whole (one message, no merge),
/// which is what hash tags buy. A fanned-out MSET or DEL is atomic per shard, not across
/// shards. Connection-scoped commands (PING, AUTH, ...) are answered by the session and should
/// not be routed; if they are, they go to shard 0, whose store answers PING/ECHO and refuses
/// the rest.
pub fn route(command: Command, shards: usize) -> Route {
    let shards = shards.max(1);
    if let Some(shard) = single_shard(&command, shards) {
        return Route::Single { shard, command };
    }
    match command {
        Command::MGet(keys) => split_keys(keys, shards, Command::MGet, Merger::gather),
        Command::Del(keys) => split_keys(keys, shards, Command::Del, |_, parts| Merger::sum(parts)),
        Command::Exists(keys) => {
            split_keys(keys, shards, Command::Exists, |_, parts| Merger::sum(parts))
        }
        Command::MSet(pairs) => split_pairs(pairs, shards),
        Command::Watch(keys) => split_keys(keys, shards, Command::Watch, |_, parts| {
            Merger::all_ok(parts)
        }),
        Command::Info(sections) => broadcast(Command::Info(sections.clone()), shards, |n| {
            Merger::info(sections, n)
        }),
        command @ (Command::DbSize | Command::FlushAll | Command::BgRewriteAof) if shards == 1 => {
            Route::Single { shard: 0, command }
        }
        Command::DbSize => broadcast(Command::DbSize, shards, Merger::sum),
        command @ (Command::ConfigApply(_) | Command::ConfigResetStat) => {
            broadcast(command, shards, Merger::all_ok)
        }
        // Every shard delivers to its own subscribers; the reply counts them all.
        command @ Command::Publish { .. } => broadcast(command, shards, Merger::sum),
        Command::PubSub(query) => {
            let merger = match &query {
                PubSubQuery::Channels(_) | PubSubQuery::ShardChannels(_) => Merger::distinct,
                PubSubQuery::NumSub(_) | PubSubQuery::ShardNumSub(_) => Merger::sum_pairs,
                PubSubQuery::NumPat => Merger::count_distinct,
            };
            broadcast(Command::PubSub(query), shards, merger)
        }
        Command::FlushAll => broadcast(Command::FlushAll, shards, Merger::all_ok),
        Command::Client(request @ (ClientRequest::Broadcast(_) | ClientRequest::Track(_))) => {
            crate::clients::command::route(request, shards)
        }
        // Each shard rewrites its own log; an error (one already rewriting) wins.
        Command::BgRewriteAof => broadcast(Command::BgRewriteAof, shards, Merger::same),
        Command::ShardPubSub(request) => crate::command::pubsub::route(request, shards),
        Command::Cluster(request) => Route::Single {
            shard: request.shard(shards),
            command: Command::Cluster(request),
        },
        Command::Typed(typed) => {
            let mut owners = typed.keys().into_iter().map(|key| shard_of(key, shards));
            let shard = owners.next().unwrap_or(0);
            if owners.all(|owner| owner == shard) {
                Route::Single {
                    shard,
                    command: Command::Typed(typed),
                }
            } else {
                atomic(Command::Typed(typed), shards)
            }
        }
        Command::Key(key) => super::keyops::route(key, shards),
        Command::Introspect(request) => crate::introspect::route(request, shards),
        command => {
            let shard = command.single_key().map_or(0, |key| shard_of(key, shards));
            Route::Single { shard, command }
        }
    }
}

/// `command` to each of `targets` (distinct shards), answered OK once every one has: UNWATCH,
/// to the shards where the glue knows the connection watches keys.
pub fn to_shards(command: Command, targets: &[usize]) -> Route {
    Route::FanOut(FanOut {
        parts: targets
            .iter()
            .map(|&shard| ShardPart {
                shard,
                command: command.clone(),
            })
            .collect(),
        merger: Merger::all_ok(targets.len()),
    })
}

/// `command`, whose keys live on several shards, as one step holding them all.
pub(super) fn atomic(command: Command, shards: usize) -> Route {
    let mut owners: Vec<usize> = command
        .keys()
        .into_iter()
        .map(|key| shard_of(key, shards))
        .collect();
    owners.sort_unstable();
    owners.dedup();
    Route::Atomic {
        shards: owners,
        command,
    }
}

/// Groups keys by shard, keeping each shard's keys in request order. `merger` receives, for
/// each requested key, the index of the part that holds it.
pub(super) fn split_keys(
    keys: Vec<Bytes>,
    shards: usize,
    rebuild: fn(Vec<Bytes>) -> Command,
    merger: impl FnOnce(Vec<u32>, usize) -> Merger,
) -> Route {
    let key_shards: Vec<usize> = keys.iter().map(|key| shard_of(key, shards)).collect();
    if let Some(&first) = key_shards.first() {
        if key_shards.iter().all(|&shard| shard == first) {
            return Route::Single {
                shard: first,
                command: rebuild(keys),
            };
        }
    }
    let mut part_of_shard: Vec<Option<u32>> = vec![None; shards];
    let mut parts: Vec<(usize, Vec<Bytes>)> = Vec::new();
    let mut owners = Vec::with_capacity(keys.len());
    for (key, shard) in keys.into_iter().zip(key_shards) {
        let part = *part_of_shard[shard].get_or_insert_with(|| {
            parts.push((shard, Vec::new()));
            (parts.len() - 1) as u32
        });
        parts[part as usize].1.push(key);
        owners.push(part);
    }
    let count = parts.len();
    Route::FanOut(FanOut {
        parts: parts
            .into_iter()
            .map(|(shard, keys)| ShardPart {
                shard,
                command: rebuild(keys),
            })
            .collect(),
        merger: merger(owners, count),
    })
}

fn split_pairs(pairs: Vec<(Bytes, Bytes)>, shards: usize) -> Route {
    let mut part_of_shard: Vec<Option<usize>> = vec![None; shards];
    let mut parts: Vec<ShardPart> = Vec::new();
    for (key, value) in pairs {
        let shard = shard_of(&key, shards);
        let part = *part_of_shard[shard].get_or_insert_with(|| {
            parts.push(ShardPart {
                shard,
                command: Command::MSet(Vec::new()),
            });
            parts.len() - 1
        });
        if let Command::MSet(part_pairs) = &mut parts[part].command {
            part_pairs.push((key, value));
        }
    }
    if parts.len() == 1 {
        if let Some(part) = parts.pop() {
            return Route::Single {
                shard: part.shard,
                command: part.command,
            };
        }
    }
    let count = parts.len();
    Route::FanOut(FanOut {
        parts,
        merger: Merger::all_ok(count),
    })
}

/// One part per shard, part `i` on shard `i`.
pub(super) fn broadcast(
    command: Command,
    shards: usize,
    merger: impl FnOnce(usize) -> Merger,
) -> Route {
    Route::FanOut(FanOut {
        parts: (0..shards)
            .map(|shard| ShardPart {
                shard,
                command: command.clone(),
            })
            .collect(),
        merger: merger(shards),
    })
}

/// `command` to every shard, the parts merged by `merge` with `context`: for the command
/// families that answer with what every shard holds (SLOWLOG, LATENCY, ...).
pub fn broadcast_merged(
    command: Command,
    shards: usize,
    merge: super::MergeFn,
    context: Vec<Bytes>,
) -> Route {
    broadcast(command, shards.max(1), |n| {
        Merger::custom(n, merge, context)
    })
}

/// CLIENT LIST and KILL: every shard lists or kills its own connections.
pub fn route_clients(request: crate::command::ClientsBroadcast, shards: usize) -> Route {
    let op = request.op.clone();
    broadcast(
        Command::Client(ClientRequest::Broadcast(Box::new(request))),
        shards.max(1),
        |n| Merger::clients(op, n),
    )
}

/// `keys` grouped by shard into `rebuild`'s commands, the parts merged by `merger` (given,
/// for each key, the part that holds it): WATCH's routing, for other families.
pub fn split_keys_merged(
    keys: Vec<Bytes>,
    shards: usize,
    rebuild: fn(Vec<Bytes>) -> Command,
    merger: impl FnOnce(Vec<u32>, usize) -> Merger,
) -> Route {
    split_keys(keys, shards.max(1), rebuild, merger)
}
