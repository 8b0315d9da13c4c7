//! The value a command produces, before it is encoded for the wire. Cross-shard messages carry
//! this type back to the connection's shard.

use std::fmt;
use std::hash::{Hash, Hasher};

use bytes::{Bytes, BytesMut};

use crate::resp;

mod bulks;
pub use bulks::{Bulks, BulksBuilder};

/// Equality is by content: a [`Reply::Bulks`] equals the [`Reply::Array`] of the same bulk
/// strings (they are one reply on the wire).
#[derive(Debug, Clone)]
pub enum Reply {
    /// `+text`; never contains CR or LF.
    Simple(Bytes),
    /// `-CODE message`; never contains CR or LF.
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    NullBulk,
    Array(Vec<Reply>),
    /// An array of bulk strings already in wire form (see `bulks.rs`).
    Bulks(Bulks),
    NullArray,
    /// `[key, value, key, value, ...]`: a map in RESP3, that flat array in RESP2.
    Map(Vec<Reply>),
    /// A set in RESP3, an array in RESP2.
    Set(Vec<Reply>),
    /// A double (its text, as Redis prints it): RESP3's `,`, a bulk string in RESP2.
    Double(Bytes),
    /// A reply whose RESP3 form has types RESP2 lacks (a script's return value: booleans,
    /// doubles, maps, ...): the RESP2 reply, and the RESP3 bytes as they go on the wire.
    /// An error as both (see [`Reply::counted_error`]) is one INFO errorstats counted already.
    Dual {
        resp2: Box<Reply>,
        resp3: Bytes,
    },
}

impl PartialEq for Reply {
    fn eq(&self, other: &Self) -> bool {
        use Reply::*;
        match (self, other) {
            (Simple(a), Simple(b))
            | (Error(a), Error(b))
            | (Bulk(a), Bulk(b))
            | (Double(a), Double(b)) => a == b,
            (Integer(a), Integer(b)) => a == b,
            (NullBulk, NullBulk) | (NullArray, NullArray) => true,
            (Array(a), Array(b)) | (Map(a), Map(b)) | (Set(a), Set(b)) => a == b,
            (Bulks(a), Bulks(b)) => a == b,
            (Dual { resp2: a, .. }, b) | (b, Dual { resp2: a, .. }) => **a == *b,
            (Bulks(bulks), Array(items)) | (Array(items), Bulks(bulks)) => {
                bulks.len() == items.len()
                    && (bulks.iter().zip(items))
                        .all(|(x, item)| matches!(item, Bulk(y) if x == &y[..]))
            }
            _ => false,
        }
    }
}

impl Eq for Reply {}

/// Consistent with `eq`: a [`Reply::Bulks`] hashes as the array of bulks it equals.
impl Hash for Reply {
    fn hash<H: Hasher>(&self, state: &mut H) {
        fn bulk<H: Hasher>(data: &[u8], state: &mut H) {
            state.write_u8(3);
            data.hash(state);
        }
        match self {
            Reply::Simple(text) => (0u8, &text[..]).hash(state),
            Reply::Error(text) => (1u8, &text[..]).hash(state),
            Reply::Integer(value) => (2u8, value).hash(state),
            Reply::Bulk(data) => bulk(data, state),
            Reply::NullBulk => state.write_u8(4),
            Reply::Array(items) => {
                (5u8, items.len()).hash(state);
                items.iter().for_each(|item| item.hash(state));
            }
            Reply::Bulks(bulks) => {
                (5u8, bulks.len()).hash(state);
                bulks.iter().for_each(|item| bulk(item, state));
            }
            Reply::NullArray => state.write_u8(6),
            Reply::Map(items) => {
                (7u8, items.len()).hash(state);
                items.iter().for_each(|item| item.hash(state));
            }
            Reply::Set(items) => {
                (8u8, items.len()).hash(state);
                items.iter().for_each(|item| item.hash(state));
            }
            Reply::Double(text) => (9u8, &text[..]).hash(state),
            Reply::Dual { resp2, .. } => resp2.hash(state),
        }
    }
}

impl Reply {
    /// The error reply `-text` of a script that returned a `redis.pcall` error: the same
    /// bytes on the wire as [`Reply::Error`], but counted in INFO errorstats already (when
    /// `redis.pcall` got it), so the command is failed without counting it again (Redis's
    /// `ERR_REPLY_FLAG_NO_STATS_UPDATE`).
    pub fn counted_error(text: Bytes) -> Reply {
        let mut resp3 = bytes::BytesMut::with_capacity(text.len() + 3);
        resp3.extend_from_slice(b"-");
        resp3.extend_from_slice(&text);
        resp3.extend_from_slice(b"\r\n");
        Reply::Dual {
            resp2: Box::new(Reply::Error(text)),
            resp3: resp3.freeze(),
        }
    }

    /// The text of a [`Reply::counted_error`].
    pub fn as_counted_error(&self) -> Option<&Bytes> {
        match self {
            Reply::Dual { resp2, .. } => match &**resp2 {
                Reply::Error(text) => Some(text),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn ok() -> Reply {
        Reply::Simple(Bytes::from_static(b"OK"))
    }

    pub fn simple(text: &'static str) -> Reply {
        debug_assert!(!text.contains(['\r', '\n']));
        Reply::Simple(Bytes::from_static(text.as_bytes()))
    }

    /// An error reply from its full text (`ERR ...`, `NOAUTH ...`). CR and LF become spaces,
    /// as in Redis, so the message cannot break the framing.
    pub fn error(message: impl fmt::Display) -> Reply {
        Reply::error_bytes(message.to_string().into_bytes())
    }

    pub(crate) fn error_bytes(mut message: Vec<u8>) -> Reply {
        for byte in &mut message {
            if *byte == b'\r' || *byte == b'\n' {
                *byte = b' ';
            }
        }
        Reply::Error(Bytes::from(message))
    }

    pub fn bulk_or_null(value: Option<Bytes>) -> Reply {
        value.map_or(Reply::NullBulk, Reply::Bulk)
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_)) || self.as_counted_error().is_some()
    }

    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Reply::Simple(text) => resp::write_simple(out, text),
            Reply::Error(message) => resp::write_error(out, message),
            Reply::Integer(value) => resp::write_integer(out, *value),
            Reply::Bulk(data) | Reply::Double(data) => resp::write_bulk(out, data),
            Reply::NullBulk => resp::write_null_bulk(out),
            Reply::Array(items) | Reply::Map(items) | Reply::Set(items) => {
                resp::write_array_header(out, items.len());
                for item in items {
                    item.encode(out);
                }
            }
            Reply::Bulks(bulks) => out.extend_from_slice(bulks.wire()),
            Reply::NullArray => resp::write_null_array(out),
            Reply::Dual { resp2, .. } => resp2.encode(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_arrays_encode_recursively() {
        let reply = Reply::Array(vec![
            Reply::Bulk(Bytes::from("a")),
            Reply::NullBulk,
            Reply::Array(vec![Reply::Integer(1), Reply::NullArray]),
            Reply::ok(),
        ]);
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        assert_eq!(
            &out[..],
            b"*4\r\n$1\r\na\r\n$-1\r\n*2\r\n:1\r\n*-1\r\n+OK\r\n"
        );
    }

    #[test]
    fn error_text_cannot_break_framing() {
        assert_eq!(
            Reply::error("ERR bad\r\nthing"),
            Reply::Error(Bytes::from("ERR bad  thing"))
        );
    }
}
