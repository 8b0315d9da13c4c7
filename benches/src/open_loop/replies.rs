//! What an open-loop connection sends and how it counts replies, without I/O: the raw echo
//! protocol (length-prefixed frames, echoed whole), RESP (alternating SET and GET on a fixed
//! keyspace, as a Redis client sends them) and corewire's RPC framing (unary calls of the
//! bench's Echo service, see [`super::rpc_frames`]).

use std::fmt::Write as _;

use super::rpc_frames;
use crate::frame::{header, HEADER_LEN};

/// A protocol the open-loop driver speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Raw echo frames of `size` payload bytes.
    Echo { size: usize },
    /// RESP: request `i` is `SET key:K value` for even `i`, `GET key:K` for odd `i`, K
    /// spread over `keyspace` keys; values of `size` bytes.
    Resp { size: usize, keyspace: u64 },
    /// corewire RPC: request `i` is a Request frame to the bench's Echo service with
    /// correlation id `i` and a `size`-byte payload; its reply must be the Response with the
    /// same id and payload length.
    Rpc { size: usize },
}

/// Which request the next reply of a connection answers: replies come back in the order the
/// requests were sent (the latency accounting relies on it), so a protocol that carries ids
/// checks them against this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyOrder {
    /// The request number the next reply answers.
    pub next: u64,
    /// How far apart the connection's request numbers are (the connection count).
    pub step: u64,
}

/// A reply the protocol does not allow (the connection is dropped and counted as an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadReply(pub String);

impl Wire {
    /// Appends request `i`.
    pub fn write_request(&self, i: u64, out: &mut Vec<u8>) {
        match *self {
            Wire::Echo { size } => {
                out.extend_from_slice(&header(size));
                out.extend((0..size).map(|b| (b % 251) as u8));
            }
            Wire::Resp { size, keyspace } => {
                // A multiplicative hash spreads consecutive requests over the keys; the GET of
                // request 2k+1 reads the key request 2k set.
                let k = (i / 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) % keyspace.max(1);
                let key = format!("key:{k:012}");
                let mut head = String::new();
                if i.is_multiple_of(2) {
                    let _ = write!(
                        head,
                        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${size}\r\n",
                        key.len()
                    );
                    out.extend_from_slice(head.as_bytes());
                    out.extend(std::iter::repeat_n(b'x', size));
                    out.extend_from_slice(b"\r\n");
                } else {
                    let _ = write!(head, "*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len());
                    out.extend_from_slice(head.as_bytes());
                }
            }
            Wire::Rpc { size } => rpc_frames::write_request(i, size, out),
        }
    }

    /// The protocol's name in the report.
    pub fn name(&self) -> &'static str {
        match self {
            Wire::Echo { .. } => "echo",
            Wire::Resp { .. } => "resp",
            Wire::Rpc { .. } => "rpc",
        }
    }

    /// The complete replies at the start of `buf`: (bytes they take, how many); `order`
    /// advances past them.
    pub fn complete(&self, buf: &[u8], order: &mut ReplyOrder) -> Result<(usize, u64), BadReply> {
        let (used, n) = self.count(buf, order)?;
        order.next += n * order.step;
        Ok((used, n))
    }

    fn count(&self, buf: &[u8], order: &ReplyOrder) -> Result<(usize, u64), BadReply> {
        match *self {
            Wire::Echo { size } => {
                let frame = HEADER_LEN + size;
                let n = buf.len() / frame;
                Ok((n * frame, n as u64))
            }
            Wire::Resp { .. } => {
                let (mut at, mut n) = (0, 0);
                while let Some(len) = resp_reply(&buf[at..])? {
                    at += len;
                    n += 1;
                }
                Ok((at, n))
            }
            Wire::Rpc { size } => {
                let (mut at, mut n) = (0, 0);
                let mut id = order.next;
                while let Some(len) = rpc_frames::reply(&buf[at..], id, size)? {
                    at += len;
                    n += 1;
                    id += order.step;
                }
                Ok((at, n))
            }
        }
    }
}

/// The length of the RESP reply at the start of `buf` (`None`: not complete yet). Only the
/// replies SET and GET produce are allowed; an error reply is a failure of the run.
fn resp_reply(buf: &[u8]) -> Result<Option<usize>, BadReply> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = &buf[1..eol];
    match kind {
        b'+' | b':' => Ok(Some(eol + 2)),
        b'-' => Err(BadReply(String::from_utf8_lossy(line).into_owned())),
        b'$' => {
            let len: i64 = std::str::from_utf8(line)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| BadReply(format!("bad bulk length {line:?}")))?;
            if len < 0 {
                return Ok(Some(eol + 2));
            }
            let end = eol + 2 + len as usize + 2;
            Ok((buf.len() >= end).then_some(end))
        }
        other => Err(BadReply(format!(
            "unexpected reply type {:?}",
            other as char
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> ReplyOrder {
        ReplyOrder { next: 0, step: 1 }
    }

    #[test]
    fn echo_counts_whole_frames() {
        let w = Wire::Echo { size: 3 };
        let mut out = Vec::new();
        w.write_request(0, &mut out);
        w.write_request(1, &mut out);
        assert_eq!(out.len(), 2 * (HEADER_LEN + 3));
        assert_eq!(
            w.complete(&out[..out.len() - 1], &mut order()),
            Ok((HEADER_LEN + 3, 1))
        );
        let mut o = ReplyOrder { next: 3, step: 4 };
        assert_eq!(w.complete(&out, &mut o), Ok((out.len(), 2)));
        assert_eq!(o.next, 11, "advanced by two replies");
    }

    #[test]
    fn resp_alternates_set_and_get_of_the_same_key() {
        let w = Wire::Resp {
            size: 2,
            keyspace: 1000,
        };
        let mut set = Vec::new();
        w.write_request(6, &mut set);
        let mut get = Vec::new();
        w.write_request(7, &mut get);
        let set = String::from_utf8(set).unwrap();
        let get = String::from_utf8(get).unwrap();
        assert!(set.starts_with("*3\r\n$3\r\nSET\r\n$16\r\nkey:"), "{set:?}");
        assert!(set.ends_with("\r\n$2\r\nxx\r\n"), "{set:?}");
        let key = &set[18..34];
        assert_eq!(get, format!("*2\r\n$3\r\nGET\r\n$16\r\n{key}\r\n"));
    }

    #[test]
    fn resp_counts_complete_replies_only() {
        let w = Wire::Resp {
            size: 2,
            keyspace: 10,
        };
        let buf = b"+OK\r\n$2\r\nxx\r\n$-1\r\n:1\r\n$5\r\nhel";
        assert_eq!(w.complete(buf, &mut order()), Ok((buf.len() - 7, 4)));
        assert_eq!(w.complete(b"$2\r\nxx\r", &mut order()), Ok((0, 0)));
        assert_eq!(w.complete(b"", &mut order()), Ok((0, 0)));
        assert!(w.complete(b"-ERR no\r\n", &mut order()).is_err());
        assert!(w.complete(b"*1\r\n", &mut order()).is_err());
    }

    #[test]
    fn rpc_replies_must_answer_the_connections_calls_in_order() {
        use bytes::BytesMut;
        use corewire_wire::frame::{FrameDecoder, FrameEncoder, FrameLimits};
        use corewire_wire::rpc::response_header;

        let w = Wire::Rpc { size: 3 };
        // What an echo server sends back for requests 2 and 6 (a connection whose requests
        // are 4 apart).
        let mut replies = BytesMut::new();
        for i in [2, 6] {
            let mut req = Vec::new();
            w.write_request(i, &mut req);
            let mut req = BytesMut::from(&req[..]);
            let frame = FrameDecoder::new(FrameLimits::default())
                .decode(&mut req)
                .unwrap()
                .unwrap();
            FrameEncoder::new(FrameLimits::default())
                .encode_frame(
                    &response_header(&frame.header),
                    &frame.payload,
                    &[],
                    &mut replies,
                )
                .unwrap();
        }
        let mut o = ReplyOrder { next: 2, step: 4 };
        assert_eq!(w.complete(&replies, &mut o), Ok((replies.len(), 2)));
        assert_eq!(o.next, 10);
        let mut swapped = ReplyOrder { next: 6, step: 4 };
        assert!(w.complete(&replies, &mut swapped).is_err());
        assert_eq!(swapped.next, 6, "no reply counted");
    }
}
