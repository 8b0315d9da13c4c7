//! Writes a store performed, in a form that replays exactly: relative times are already
//! absolute, and expirations the store carried out are explicit deletions. The AOF consumes
//! this stream; so could replication.
//!
//! Replay runs with expiry disabled (see [`crate::store::Store::apply_replayed`]) and relies on
//! every removal by expiry having been recorded as a [`WriteOp::Del`].

use bytes::{Bytes, BytesMut};

use crate::resp;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggedTtl {
    /// The key has no TTL afterwards.
    None,
    /// The key expires at this Unix time in milliseconds.
    At(u64),
    /// Whatever TTL the key had is kept.
    Keep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp<'a> {
    /// `SET key value [PXAT ms | KEEPTTL]`; also the form INCR*, DECR* and GETSET take.
    Set {
        key: &'a [u8],
        value: &'a [u8],
        ttl: LoggedTtl,
    },
    /// `MSET k v ...` for one shard's share of a client MSET (atomic per shard on replay).
    MSet(&'a [(Bytes, Bytes)]),
    /// `DEL k ...`: explicit deletions and expirations.
    Del(&'a [Bytes]),
    /// `APPEND key value`; deterministic because replay reproduces the prior value exactly.
    Append { key: &'a [u8], value: &'a [u8] },
    /// `PEXPIREAT key ms`, the absolute form of every EXPIRE variant.
    PExpireAt { key: &'a [u8], at_ms: u64 },
    /// `PERSIST key`
    Persist { key: &'a [u8] },
    /// `FLUSHALL`
    FlushAll,
    /// A collection command replayed as written, `name key args...`: the commands of the
    /// collection types are deterministic given the prior state, or are logged in a form that
    /// is (SPOP as SREM, a blocking pop as the pop it did).
    Command {
        name: &'a str,
        key: &'a [u8],
        args: &'a [Bytes],
    },
}

impl WriteOp<'_> {
    /// Encodes the operation as a RESP request array, the same bytes a client would send.
    pub fn encode(&self, out: &mut BytesMut) {
        match *self {
            WriteOp::Set { key, value, ttl } => match ttl {
                LoggedTtl::None => encode_args(out, &[b"SET", key, value]),
                LoggedTtl::Keep => encode_args(out, &[b"SET", key, value, b"KEEPTTL"]),
                LoggedTtl::At(at_ms) => {
                    let at = at_ms.to_string();
                    encode_args(out, &[b"SET", key, value, b"PXAT", at.as_bytes()]);
                }
            },
            WriteOp::MSet(pairs) => {
                resp::write_array_header(out, 1 + 2 * pairs.len());
                resp::write_bulk(out, b"MSET");
                for (key, value) in pairs {
                    resp::write_bulk(out, key);
                    resp::write_bulk(out, value);
                }
            }
            WriteOp::Del(keys) => {
                resp::write_array_header(out, 1 + keys.len());
                resp::write_bulk(out, b"DEL");
                for key in keys {
                    resp::write_bulk(out, key);
                }
            }
            WriteOp::Append { key, value } => encode_args(out, &[b"APPEND", key, value]),
            WriteOp::PExpireAt { key, at_ms } => {
                let at = at_ms.to_string();
                encode_args(out, &[b"PEXPIREAT", key, at.as_bytes()]);
            }
            WriteOp::Persist { key } => encode_args(out, &[b"PERSIST", key]),
            WriteOp::FlushAll => encode_args(out, &[b"FLUSHALL"]),
            WriteOp::Command { name, key, args } => {
                resp::write_array_header(out, 2 + args.len());
                resp::write_bulk(out, name.as_bytes());
                resp::write_bulk(out, key);
                for arg in args {
                    resp::write_bulk(out, arg);
                }
            }
        }
    }
}

fn encode_args(out: &mut BytesMut, args: &[&[u8]]) {
    resp::write_array_header(out, args.len());
    for arg in args {
        resp::write_bulk(out, arg);
    }
}

/// Receives the writes a store performs, in execution order.
pub trait ChangeSink {
    /// `false` lets the store skip building records nobody reads (e.g. the list of keys a DEL
    /// removed). Checked at compile time, so [`NoLog`] costs nothing.
    const ENABLED: bool = true;

    fn record(&mut self, op: WriteOp<'_>);
}

/// Discards changes: for shards without persistence, and for replay itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoLog;

impl ChangeSink for NoLog {
    const ENABLED: bool = false;

    fn record(&mut self, _op: WriteOp<'_>) {}
}

/// Appends each change as a RESP request: a replication or debugging stream.
impl ChangeSink for BytesMut {
    fn record(&mut self, op: WriteOp<'_>) {
        op.encode(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_client_requests() {
        let mut out = BytesMut::new();
        out.record(WriteOp::Set {
            key: b"k",
            value: b"v",
            ttl: LoggedTtl::At(1700000000000),
        });
        out.record(WriteOp::Del(&[Bytes::from("a"), Bytes::from("b")]));
        out.record(WriteOp::FlushAll);
        assert_eq!(
            &out[..],
            &b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$4\r\nPXAT\r\n$13\r\n1700000000000\r\n\
               *3\r\n$3\r\nDEL\r\n$1\r\na\r\n$1\r\nb\r\n\
               *1\r\n$8\r\nFLUSHALL\r\n"[..]
        );
    }
}
