//! Each key as write records that recreate it: what an AOF rewrite writes. Every type of
//! value contributes its own emitter here; the records are ordinary [`WriteOp`]s, so replay
//! needs nothing special for them.
//!
//! A new value type adds its arm to [`emit_entry`] (a `match` on the type without a catch-all
//! arm, so the compiler asks for it) that writes the key as that type's commands (RPUSH,
//! HSET, SADD, ZADD, ... in chunks of a bounded number of elements, the TTL last as
//! PEXPIREAT), plus a case in `snapshot.rs`'s property test. The command's keys must also be
//! listed in [`crate::aof::for_each_image_key`] and [`crate::aof::payload_bound`].

use bytes::Bytes;

use super::entry::Entry;
use crate::change::{ChangeSink, LoggedTtl, WriteOp};

/// Largest piece of a value put in one record, so records stay far below the format's 4 GiB
/// and replay never needs one huge allocation per record.
pub(crate) const EMIT_CHUNK: usize = 64 << 20;

/// Writes the records that recreate `key` with `entry`'s value and expiry.
pub(crate) fn emit_entry<S: ChangeSink>(key: &Bytes, entry: &Entry, sink: &mut S) {
    let ttl = entry.expire_at().map_or(LoggedTtl::None, LoggedTtl::At);
    emit_string(key, &entry.value, ttl, sink);
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
