//! The value a command produces, before it is encoded for the wire. Cross-shard messages carry
//! this type back to the connection's shard.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::resp;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reply {
    /// `+text`; never contains CR or LF.
    Simple(Bytes),
    /// `-CODE message`; never contains CR or LF.
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    NullBulk,
    Array(Vec<Reply>),
    NullArray,
}

impl Reply {
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
        matches!(self, Reply::Error(_))
    }

    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Reply::Simple(text) => resp::write_simple(out, text),
            Reply::Error(message) => resp::write_error(out, message),
            Reply::Integer(value) => resp::write_integer(out, *value),
            Reply::Bulk(data) => resp::write_bulk(out, data),
            Reply::NullBulk => resp::write_null_bulk(out),
            Reply::Array(items) => {
                resp::write_array_header(out, items.len());
                for item in items {
                    item.encode(out);
                }
            }
            Reply::NullArray => resp::write_null_array(out),
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
