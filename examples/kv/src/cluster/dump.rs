//! DUMP/RESTORE payloads (and what MIGRATE carries): Redis's own format, so payloads move
//! between corewire-kv and redis-server both ways. A payload is the value as an RDB file
//! holds it, the RDB version (10, u16 LE) and the CRC-64 of both (see [`crate::rdb`]).
//!
//! RESTORE rebuilds the value with ordinary write commands (`SET v`, `RPUSH e1 e2 ...`, the
//! key left out here) replayed through the normal command path, so the AOF logs a restored
//! key exactly as it logs any write and the store picks its own encodings.

use bytes::Bytes;

use crate::rdb::{self, decode_dump, ObjectRef};

/// One rebuild command without its key: `[name, args...]`; the key goes after the name.
pub type KeylessCommand = Vec<Bytes>;

/// Elements per rebuild command (Redis's `AOF_REWRITE_ITEMS_PER_CMD`).
const ITEMS_PER_COMMAND: usize = 64;

pub use crate::rdb::decode::DumpError as PayloadError;

pub fn encode(object: &ObjectRef<'_>) -> Bytes {
    Bytes::from(rdb::dump_payload(object, &rdb::Limits::default()))
}

/// The commands that rebuild the payload's value.
pub fn decode(payload: &[u8]) -> Result<Vec<KeylessCommand>, PayloadError> {
    Ok(decode_dump(payload)?.rebuild_commands(ITEMS_PER_COMMAND))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_redis_payloads() {
        let commands = decode(&encode(&ObjectRef::String(b"v\r\n\0"))).unwrap();
        assert_eq!(
            commands,
            vec![vec![Bytes::from("SET"), Bytes::from("v\r\n\0")]]
        );
        // redis-server 7.0.15's DUMP of the string "v".
        let redis = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce";
        assert_eq!(
            decode(redis).unwrap(),
            vec![vec![Bytes::from("SET"), Bytes::from("v")]]
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
