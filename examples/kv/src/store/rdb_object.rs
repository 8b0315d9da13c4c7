//! A stored value as the RDB encoder sees it ([`ObjectRef`]): what SAVE, BGSAVE and DUMP
//! write. Borrowed, so writing a key copies nothing but the encoded bytes (a stream is
//! copied into its RDB image first).

use super::keyspace::TtlUpdate;
use super::types::stream::{image, Stream};
use super::value::Value;
use crate::rdb::{ObjectRef, StreamImage};

/// A stream read from a dump or a DUMP payload, checked: what `Store::insert_stream`
/// stores as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedStream(Box<Stream>);

impl CheckedStream {
    /// `image` as a stream, or why it cannot be one (IDs out of order, a length or PEL that
    /// disagrees with the rest).
    pub fn new(image: StreamImage) -> Result<CheckedStream, String> {
        image::from_image(image).map(|stream| CheckedStream(Box::new(stream)))
    }

    pub(super) fn into_value(self) -> Value {
        Value::Stream(self.0)
    }
}

/// `value` for the encoder; a sorted set in its score order (the listpack form needs it).
pub(crate) fn object_of(value: &Value) -> ObjectRef<'_> {
    match value {
        Value::Str(s) => ObjectRef::String(s.as_slice()),
        Value::List(list) => ObjectRef::List(list.iter().collect()),
        Value::Set(set) => ObjectRef::Set(set.iter().map(|m| m.as_slice()).collect()),
        Value::Hash(hash) => ObjectRef::Hash(
            hash.map
                .iter()
                .map(|(f, v)| (f.as_slice(), v.as_slice()))
                .collect(),
        ),
        Value::ZSet(zset) => ObjectRef::ZSet(
            zset.order
                .iter()
                .map(|(score, member)| (member.as_slice(), score.0))
                .collect(),
        ),
        Value::Stream(stream) => ObjectRef::Stream(Box::new(image::to_image(stream))),
    }
}

use super::snapshot::SnapshotProgress;
use super::Store;
use crate::rdb::{encode, Limits};

impl Store {
    /// One bounded step of an RDB save's walk: up to `max_keys` keys of the snapshot, each
    /// encoded as an RDB key record appended to `out` (see `snapshot.rs` for which keys).
    pub(crate) fn rdb_image_step(
        &mut self,
        now: u64,
        max_keys: usize,
        out: &mut Vec<u8>,
        limits: &Limits,
    ) -> SnapshotProgress {
        self.snapshot_step_with(now, max_keys, |key, entry, expire_at| {
            encode::write_key(out, key, &object_of(&entry.value), expire_at, limits)
        })
    }

    /// Before a write to `key`: if the save's walk has not reached it, its record now.
    pub(crate) fn rdb_image_touch(
        &mut self,
        key: &[u8],
        now: u64,
        out: &mut Vec<u8>,
        limits: &Limits,
    ) {
        self.snapshot_touch_with(key, now, |key, entry, expire_at| {
            encode::write_key(out, key, &object_of(&entry.value), expire_at, limits)
        })
    }

    /// Stores a stream of the dump under `key`, whole (its nodes, groups and seen times as
    /// the file has them), with its expiry (Unix ms).
    pub(crate) fn insert_stream(
        &mut self,
        key: &[u8],
        stream: CheckedStream,
        expire_at: Option<u64>,
    ) {
        let ttl = expire_at.map_or(TtlUpdate::Clear, TtlUpdate::At);
        self.upsert_value(key, stream.into_value(), ttl);
    }

    /// Keys in the keyspace now (expired ones not yet removed included): RESIZEDB's hint.
    pub(crate) fn key_count(&self) -> usize {
        self.map.len()
    }
}
