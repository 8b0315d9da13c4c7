//! DUMP/RESTORE payloads (and what MIGRATE carries): Redis's own format, so payloads move
//! between corewire-kv and redis-server both ways. A payload is the value as an RDB file
//! holds it, the RDB version (10, u16 LE) and the CRC-64 of both (see [`crate::rdb`]).
//!
//! RESTORE rebuilds the value with ordinary write commands (`SET v`, `RPUSH e1 e2 ...`, the
//! key left out here) replayed through the normal command path, so the AOF logs a restored
//! key exactly as it logs any write and the store picks its own encodings. A stream is
//! the exception: it is taken whole (its nodes, PELs and seen times as the payload has
//! them), and logged as the commands that rebuild it.

use bytes::Bytes;

use crate::rdb::{self, decode_dump, ObjectRef, RdbValue, StreamImage};

/// One rebuild command without its key: `[name, args...]`; the key goes after the name.
pub type KeylessCommand = Vec<Bytes>;

/// Elements per rebuild command (Redis's `AOF_REWRITE_ITEMS_PER_CMD`).
const ITEMS_PER_COMMAND: usize = 64;

pub use crate::rdb::decode::DumpError as PayloadError;

pub fn encode(object: &ObjectRef<'_>) -> Bytes {
    Bytes::from(rdb::dump_payload(object, &rdb::Limits::default()))
}

/// What a payload's value is rebuilt from.
#[derive(Debug, Clone, PartialEq)]
pub enum Restored {
    /// The commands that rebuild it.
    Commands(Vec<KeylessCommand>),
    /// A stream, taken whole.
    Stream(Box<StreamImage>),
}

pub fn decode(payload: &[u8]) -> Result<Restored, PayloadError> {
    Ok(match decode_dump(payload)? {
        RdbValue::Stream(image) => Restored::Stream(image),
        value => Restored::Commands(value.rebuild_commands(ITEMS_PER_COMMAND)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_redis_payloads() {
        let commands = decode(&encode(&ObjectRef::String(b"v\r\n\0"))).unwrap();
        assert_eq!(
            commands,
            Restored::Commands(vec![vec![Bytes::from("SET"), Bytes::from("v\r\n\0")]])
        );
        // redis-server 7.0.15's DUMP of the string "v".
        let redis = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce";
        assert_eq!(
            decode(redis).unwrap(),
            Restored::Commands(vec![vec![Bytes::from("SET"), Bytes::from("v")]])
        );
        assert_eq!(&encode(&ObjectRef::String(b"v"))[..], &redis[..]);
    }

    #[test]
    fn damage_is_refused() {
        let mut flipped = encode(&ObjectRef::List(vec![b"a", b"b"])).to_vec();
        flipped[3] ^= 1;
        assert_eq!(decode(&flipped), Err(PayloadError::VersionOrChecksum));
        assert_eq!(decode(b"short"), Err(PayloadError::VersionOrChecksum));
    }
}
