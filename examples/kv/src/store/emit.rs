//! Each key as write records that recreate it: what an AOF rewrite writes, and what DUMP
//! carries. Every type of value has its own emitter here; the records are ordinary
//! [`WriteOp`]s, so replay needs nothing special for them.
//!
//! A new value type adds its arm to [`emit_entry`] (a `match` on the type without a catch-all
//! arm, so the compiler asks for it), plus a case in `snapshot.rs`'s property test. The
//! command's keys must also be listed in [`crate::aof::for_each_image_key`] and
//! [`crate::aof::payload_bound`].

use bytes::Bytes;

use super::entry::Entry;
use super::value::Value;
use crate::change::{ChangeSink, LoggedTtl, WriteOp};

/// Largest piece of a value put in one record, so records stay far below the format's 4 GiB
/// and replay never needs one huge allocation per record.
pub(crate) const EMIT_CHUNK: usize = 64 << 20;

/// Elements per record for collections (Redis's `AOF_REWRITE_ITEMS_PER_CMD`).
const ITEMS_PER_RECORD: usize = 64;

/// Writes the records that recreate `key` with `entry`'s value and the expiry `expire_at`.
pub(crate) fn emit_entry<S: ChangeSink>(
    key: &[u8],
    entry: &Entry,
    expire_at: Option<u64>,
    sink: &mut S,
) {
    let ttl = expire_at.map_or(LoggedTtl::None, LoggedTtl::At);
    match &entry.value {
        Value::Str(value) => return emit_string(key, value, ttl, sink),
        Value::List(list) => {
            emit_items(key, "rpush", list.iter().map(Bytes::copy_from_slice), sink)
        }
        Value::Hash(hash) => emit_items(
            key,
            "hset",
            hash.map
                .iter()
                .flat_map(|(f, v)| [f.to_bytes(), v.to_bytes()]),
            sink,
        ),
        Value::Set(set) => emit_items(key, "sadd", set.iter().map(|m| m.to_bytes()), sink),
        Value::ZSet(zset) => emit_items(
            key,
            "zadd",
            zset.scores.iter().flat_map(|(member, score)| {
                // `{}` prints the shortest text that parses back to the same f64 ("inf" too).
                [Bytes::from(format!("{score}")), member.to_bytes()]
            }),
            sink,
        ),
        Value::Stream(stream) => super::types::stream::emit::emit_stream(key, stream, sink),
    }
    if let LoggedTtl::At(at_ms) = ttl {
        sink.record(WriteOp::PExpireAt { key, at_ms });
    }
}

/// A string: `SET key value [PXAT ms]`, or for a long value, `SET` of its first chunk and an
/// `APPEND` for each further one (APPEND keeps the TTL).
fn emit_string<S: ChangeSink>(key: &[u8], value: &[u8], ttl: LoggedTtl, sink: &mut S) {
    let mut chunks = value.chunks(EMIT_CHUNK);
    let first = chunks.next().unwrap_or_default();
    sink.record(WriteOp::Set {
        key,
        value: first,
        ttl,
    });
    for chunk in chunks {
        sink.record(WriteOp::Append { key, value: chunk });
    }
}

/// A collection as `name key items...` records of at most [`ITEMS_PER_RECORD`] elements
/// (pairs count as two items, and stay together since the limit is even).
fn emit_items<S: ChangeSink>(
    key: &[u8],
    name: &str,
    items: impl Iterator<Item = Bytes>,
    sink: &mut S,
) {
    let mut batch = Vec::with_capacity(ITEMS_PER_RECORD);
    for item in items {
        batch.push(item);
        if batch.len() == ITEMS_PER_RECORD {
            sink.record(WriteOp::Command {
                name,
                key,
                args: &batch,
            });
            batch.clear();
        }
    }
    if !batch.is_empty() {
        sink.record(WriteOp::Command {
            name,
            key,
            args: &batch,
        });
    }
}
