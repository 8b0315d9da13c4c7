//! A multi-key command over keys of several shards, run as one step: with every shard that
//! owns one of its keys held, the keys' stored forms (DUMP payloads with their expiry) are
//! gathered into a scratch [`Store`], the command runs there exactly as it runs on one
//! shard, and each key it wrote goes back to its owner as a RESTORE (or a DEL when it is
//! gone). Each owner logs what it applied, so the AOF replays the effects shard by shard.
//!
//! One implementation per command, the one-shard one: LMOVE, SMOVE, the STORE forms, RENAME,
//! COPY, MSETNX, LMPOP, ... and any multi-key command added later behave over several shards
//! exactly as they do on one. The cost is copying the keys' values twice: a command over
//! large collections on several shards costs their size (one shard, or keys with a common
//! hash tag, costs nothing extra).
//!
//! Sans-I/O: the glue (`server/txn/multikey.rs`) holds the shards and moves the bytes.

use bytes::Bytes;

use crate::cluster::command::{ClusterRequest, Restore};
use crate::command::{Command, TypedCommand};
use crate::notify::KeyEvent;
use crate::reply::Reply;
use crate::store::Store;

/// A key as it is stored: its DUMP payload and expiry (Unix ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub payload: Bytes,
    pub expire_at: Option<u64>,
}

/// What a key becomes on its shard after the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub key: Bytes,
    /// `None`: the key is gone.
    pub value: Option<Stored>,
}

impl Written {
    /// The command that makes the key's owner hold it: RESTORE ... REPLACE ABSTTL, or DEL.
    pub fn into_command(self) -> Command {
        match self.value {
            None => Command::Del(vec![self.key]),
            Some(stored) => Command::Cluster(ClusterRequest::Restore(Box::new(Restore {
                key: self.key,
                ttl_ms: stored.expire_at.unwrap_or(0),
                absolute: true,
                payload: stored.payload,
                replace: true,
            }))),
        }
    }
}

/// The keys a command touches, each once, in request order.
pub fn keys_of(command: &Command) -> Vec<Bytes> {
    let mut keys: Vec<Bytes> = Vec::new();
    for key in command.keys() {
        if !keys.iter().any(|k| k[..] == *key) {
            keys.push(Bytes::copy_from_slice(key));
        }
    }
    keys
}

/// A scratch store holding `keys` as gathered (`None`: not stored, or expired), at `now`.
pub fn scratch(keys: &[Bytes], stored: &[Option<Stored>], now: u64) -> Store {
    let mut store = Store::default();
    restore_into(&mut store, keys, stored, now);
    store
}

/// Adds `keys` as gathered to a scratch store: what [`scratch`] starts with, and the keys a
/// SORT's patterns read, gathered once its sorted key is there
/// ([`Store::sort_pattern_keys`]).
pub fn restore_into(store: &mut Store, keys: &[Bytes], stored: &[Option<Stored>], now: u64) {
    for (key, stored) in keys.iter().zip(stored) {
        let Some(stored) = stored else { continue };
        let restore = Command::Cluster(ClusterRequest::Restore(Box::new(Restore {
            key: key.clone(),
            ttl_ms: stored.expire_at.unwrap_or(0),
            absolute: true,
            payload: stored.payload.clone(),
            replace: true,
        })));
        let reply = store.execute(restore, now, &mut crate::change::NoLog);
        if reply.is_error() {
            tracing::error!(?reply, "a gathered key did not restore");
        }
    }
}

/// Whether a blocking command would answer at once on `store` (an item to pop, or a key of
/// another type) rather than wait.
pub fn would_answer(store: &Store, command: &Command, now: u64) -> bool {
    let Command::Typed(typed) = command else {
        return true;
    };
    let mut keys = typed.keys();
    if matches!(
        typed.op,
        crate::command::TypedOp::BLMove | crate::command::TypedOp::BRPopLPush
    ) {
        keys.truncate(1);
    }
    store.pop_would_answer(&keys, now)
}

/// The keys a blocking command waits on (a move, its source only).
pub fn waits_on(typed: &TypedCommand) -> Vec<Bytes> {
    let mut keys = typed.keys();
    if matches!(
        typed.op,
        crate::command::TypedOp::BLMove | crate::command::TypedOp::BRPopLPush
    ) {
        keys.truncate(1);
    }
    keys.into_iter().map(Bytes::copy_from_slice).collect()
}

/// What [`run`] did: the reply, what each key it changed became, and the keyspace events
/// the command emitted, in order (what its owners publish).
#[derive(Debug)]
pub struct Ran {
    pub reply: Reply,
    pub writes: Vec<Written>,
    pub events: Vec<KeyEvent>,
}

/// Runs `command` on the scratch store that holds `keys` as `before` (what [`scratch`] got).
/// A key counts as changed when its stored form differs (the emitters write a value in its
/// own order, so an untouched key dumps as it was gathered).
pub fn run(
    store: &mut Store,
    command: Command,
    keys: &[Bytes],
    before: &[Option<Stored>],
    now: u64,
) -> Ran {
    // Only the command's own events: the gathering's `restore`s were not recorded.
    store.set_event_log(true);
    let reply = store.execute(command, now, &mut crate::change::NoLog);
    let events = store.take_events().events;
    store.set_event_log(false);
    let writes = keys
        .iter()
        .zip(before)
        .filter_map(|(key, before)| {
            let after = store
                .dump(key, now)
                .map(|(payload, expire_at)| Stored { payload, expire_at });
            (after != *before).then(|| Written {
                key: key.clone(),
                value: after,
            })
        })
        .collect();
    Ran {
        reply,
        writes,
        events,
    }
}

/// One owner's share of a command's effects: its keys' write-backs, and the events it
/// publishes for them instead of the write-backs' own (`restore`, `del`).
#[derive(Debug)]
pub struct WriteBack {
    pub shard: usize,
    pub commands: Vec<Command>,
    pub events: Vec<KeyEvent>,
}

/// Splits what [`run`] did by owner (`shard_of` over `shards`), in the order the command
/// emitted its events (a RENAME's `rename_from` owner before its `rename_to` owner), then
/// the owners of changed keys without events. An owner with events and no write still gets
/// its events (SINTERSTORE over a destination that ends as it was, a key miss).
pub fn write_backs(
    writes: Vec<Written>,
    events: Vec<KeyEvent>,
    owner: impl Fn(&[u8]) -> usize,
) -> Vec<WriteBack> {
    let mut plan: Vec<WriteBack> = Vec::new();
    let entry = |plan: &mut Vec<WriteBack>, shard: usize| -> usize {
        match plan.iter().position(|back| back.shard == shard) {
            Some(i) => i,
            None => {
                plan.push(WriteBack {
                    shard,
                    commands: Vec::new(),
                    events: Vec::new(),
                });
                plan.len() - 1
            }
        }
    };
    // Ordered by each owner's first change event: a `new` (RENAME's destination, created
    // before the source's `rename_from` is sent) does not put its owner first.
    let mut first_change: Vec<usize> = Vec::new();
    for (n, event) in events.into_iter().enumerate() {
        let i = entry(&mut plan, owner(&event.key));
        first_change.resize(plan.len(), usize::MAX);
        if event.modifies() {
            first_change[i] = first_change[i].min(n);
        }
        plan[i].events.push(event);
    }
    for written in writes {
        let i = entry(&mut plan, owner(&written.key));
        plan[i].commands.push(written.into_command());
    }
    first_change.resize(plan.len(), usize::MAX);
    let mut order: Vec<(usize, WriteBack)> = first_change.into_iter().zip(plan).collect();
    order.sort_by_key(|(first, _)| *first);
    order.into_iter().map(|(_, back)| back).collect()
}
