//! RESP3 at the connection's edge. The store and the shards produce RESP2-shaped [`Reply`]
//! values; a connection that said `HELLO 3` gets them re-typed the way Redis 7.0 types them:
//! nulls as `_`, HGETALL / CONFIG GET / HELLO as maps, SMEMBERS and the set algebra as sets,
//! scores as doubles (and WITHSCORES replies as `[member, score]` pairs), INFO and CLIENT
//! INFO/LIST as verbatim text, Pub/Sub messages as push messages. The shape is decided from
//! the request when it is parsed ([`shape_of`]), so the shards never know the protocol.

use bytes::{BufMut, BytesMut};

use crate::command::{Command, TypedCommand, TypedOp};
use crate::reply::Reply;
use crate::resp;

/// How a reply goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    Resp2,
    Resp3(Shape),
}

/// What a RESP2-shaped reply becomes in RESP3.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Shape {
    /// Same structure; nulls become `_`.
    #[default]
    Plain,
    /// A flat `[key, value, ...]` array becomes a map.
    Map,
    /// An array becomes a set.
    Set,
    /// A score (bulk string) becomes a double.
    Double,
    /// An array of scores (or nulls) becomes an array of doubles.
    Doubles,
    /// A flat `[member, score, ...]` array becomes `[[member, double], ...]`.
    ScorePairs,
    /// `[member, score]` becomes `[member, double]`.
    MemberScore,
    /// A flat `[field, value, ...]` array becomes `[[field, value], ...]`.
    Pairs,
    /// A bulk string becomes verbatim text (`txt`).
    Verbatim,
    /// An array becomes a push message (Pub/Sub).
    Push,
    /// EXEC: each element with the shape of its queued command.
    Exec(Vec<Shape>),
}

/// The RESP3 shape of `command`'s reply.
pub fn shape_of(command: &Command) -> Shape {
    match command {
        Command::ConfigGet(_) => Shape::Map,
        Command::Info(_) => Shape::Verbatim,
        Command::Client(request) if matches!(request.name(), "client|info" | "client|list") => {
            Shape::Verbatim
        }
        Command::Introspect(
            crate::introspect::Request::LatencyDoctor
            | crate::introspect::Request::LatencyGraph(_)
            | crate::introspect::Request::MemoryDoctor,
        ) => Shape::Verbatim,
        Command::Typed(typed) => typed_shape(typed),
        _ => Shape::Plain,
    }
}

fn has_flag(args: &[bytes::Bytes], flag: &[u8]) -> bool {
    args.iter().any(|arg| arg.eq_ignore_ascii_case(flag))
}

fn typed_shape(typed: &TypedCommand) -> Shape {
    use TypedOp as Op;
    let args = &typed.args;
    match typed.op {
        Op::HGetAll => Shape::Map,
        Op::SMembers | Op::SInter | Op::SUnion | Op::SDiff => Shape::Set,
        Op::SPop if args.len() > 1 => Shape::Set,
        Op::ZScore | Op::ZIncrBy => Shape::Double,
        Op::ZAdd if has_flag(&args[1..], b"INCR") => Shape::Double,
        Op::ZMScore => Shape::Doubles,
        Op::ZPopMin | Op::ZPopMax if args.len() > 1 => Shape::ScorePairs,
        Op::ZPopMin | Op::ZPopMax => Shape::MemberScore,
        Op::ZRange | Op::ZRangeByScore | Op::ZRevRange | Op::ZRevRangeByScore
            if has_flag(&args[1..], b"WITHSCORES") =>
        {
            Shape::ScorePairs
        }
        Op::ZRandMember | Op::ZUnion | Op::ZInter | Op::ZDiff
            if has_flag(&args[1..], b"WITHSCORES") =>
        {
            Shape::ScorePairs
        }
        Op::HRandField if has_flag(&args[1..], b"WITHVALUES") => Shape::Pairs,
        _ => Shape::Plain,
    }
}

fn write_null(out: &mut BytesMut) {
    out.put_slice(b"_\r\n");
}

fn write_header(out: &mut BytesMut, kind: u8, len: usize) {
    out.put_u8(kind);
    out.put_slice(len.to_string().as_bytes());
    out.put_slice(b"\r\n");
}

fn write_double(out: &mut BytesMut, text: &[u8]) {
    out.put_u8(b',');
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

/// Writes `reply` as RESP3 with `shape`. A reply that does not have the structure the shape
/// expects (an error, a null, an empty result) is written plainly.
pub fn encode(reply: &Reply, shape: &Shape, out: &mut BytesMut) {
    if let Reply::Bulks(bulks) = reply {
        // Already RESP, which is RESP3's too for a plain array of bulk strings; another
        // shape re-types the elements one by one.
        if *shape != Shape::Plain {
            return encode(&Reply::Array(bulks.to_replies()), shape, out);
        }
    }
    match (shape, reply) {
        (_, Reply::Dual { resp3, .. }) => out.put_slice(resp3),
        (_, Reply::NullBulk | Reply::NullArray) => write_null(out),
        (Shape::Map, Reply::Array(items)) if items.len() % 2 == 0 => {
            write_header(out, b'%', items.len() / 2);
            items
                .iter()
                .for_each(|item| encode(item, &Shape::Plain, out));
        }
        (Shape::Set, Reply::Array(items)) => {
            write_header(out, b'~', items.len());
            items
                .iter()
                .for_each(|item| encode(item, &Shape::Plain, out));
        }
        (Shape::Double, Reply::Bulk(text)) | (_, Reply::Double(text)) => write_double(out, text),
        (Shape::Doubles, Reply::Array(items)) => {
            write_header(out, b'*', items.len());
            items
                .iter()
                .for_each(|item| encode(item, &Shape::Double, out));
        }
        (Shape::ScorePairs | Shape::Pairs, Reply::Array(items)) if items.len() % 2 == 0 => {
            let second = match shape {
                Shape::ScorePairs => Shape::Double,
                _ => Shape::Plain,
            };
            write_header(out, b'*', items.len() / 2);
            for pair in items.chunks(2) {
                write_header(out, b'*', 2);
                encode(&pair[0], &Shape::Plain, out);
                encode(&pair[1], &second, out);
            }
        }
        (Shape::MemberScore, Reply::Array(items)) if items.len() == 2 => {
            write_header(out, b'*', 2);
            encode(&items[0], &Shape::Plain, out);
            encode(&items[1], &Shape::Double, out);
        }
        (Shape::Verbatim, Reply::Bulk(text)) => {
            write_header(out, b'=', text.len() + 4);
            out.put_slice(b"txt:");
            out.put_slice(text);
            out.put_slice(b"\r\n");
        }
        (Shape::Push, Reply::Array(items)) => {
            write_header(out, b'>', items.len());
            items
                .iter()
                .for_each(|item| encode(item, &Shape::Plain, out));
        }
        (_, Reply::Map(items)) => {
            write_header(out, b'%', items.len() / 2);
            items
                .iter()
                .for_each(|item| encode(item, &Shape::Plain, out));
        }
        (_, Reply::Set(items)) => {
            write_header(out, b'~', items.len());
            items
                .iter()
                .for_each(|item| encode(item, &Shape::Plain, out));
        }
        (Shape::Exec(shapes), Reply::Array(items)) => {
            write_header(out, b'*', items.len());
            for (i, item) in items.iter().enumerate() {
                encode(item, shapes.get(i).unwrap_or(&Shape::Plain), out);
            }
        }
        (_, Reply::Array(items)) => {
            resp::write_array_header(out, items.len());
            items
                .iter()
                .for_each(|item| encode(item, &Shape::Plain, out));
        }
        (_, other) => other.encode(out),
    }
}

/// Writes `reply` for a connection speaking `encoding`.
pub fn write(reply: &Reply, encoding: &Encoding, out: &mut BytesMut) {
    match encoding {
        Encoding::Resp2 => reply.encode(out),
        Encoding::Resp3(shape) => encode(reply, shape, out),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn enc(reply: Reply, shape: Shape) -> String {
        let mut out = BytesMut::new();
        encode(&reply, &shape, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn shapes_retype_replies() {
        assert_eq!(enc(Reply::NullBulk, Shape::Double), "_\r\n");
        assert_eq!(
            enc(Reply::Array(vec![bulk("f"), bulk("v")]), Shape::Map),
            "%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
        );
        assert_eq!(
            enc(
                Reply::Array(vec![bulk("m"), bulk("1.5")]),
                Shape::ScorePairs
            ),
            "*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n"
        );
        assert_eq!(
            enc(
                Reply::Array(vec![bulk("m"), bulk("inf")]),
                Shape::MemberScore
            ),
            "*2\r\n$1\r\nm\r\n,inf\r\n"
        );
        assert_eq!(enc(bulk("a:1"), Shape::Verbatim), "=7\r\ntxt:a:1\r\n");
        assert_eq!(
            enc(
                Reply::Array(vec![Reply::NullBulk, Reply::Array(vec![bulk("x")])]),
                Shape::Exec(vec![Shape::Plain, Shape::Set])
            ),
            "*2\r\n_\r\n~1\r\n$1\r\nx\r\n"
        );
        assert_eq!(
            enc(Reply::Array(vec![Reply::NullBulk]), Shape::Plain),
            "*1\r\n_\r\n"
        );
        assert_eq!(enc(Reply::error("ERR x"), Shape::Map), "-ERR x\r\n");
    }
}
