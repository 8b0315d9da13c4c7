//! Parsing replies (the client side of RESP2), for the server's own outgoing connections:
//! MIGRATE reads the target's answers with it.

use bytes::{Buf, Bytes, BytesMut};

use crate::reply::Reply;

/// The reply was not RESP2 (or exceeded `max_len`): the connection cannot be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedReply;

/// Takes one complete reply off the front of `buf`; `Ok(None)` (nothing consumed) until it
/// has fully arrived. Bulk strings and arrays longer than `max_len` are refused.
pub fn parse_reply(buf: &mut BytesMut, max_len: usize) -> Result<Option<Reply>, MalformedReply> {
    let mut at = 0;
    match parse_at(buf, &mut at, max_len)? {
        Some(reply) => {
            buf.advance(at);
            Ok(Some(reply))
        }
        None => Ok(None),
    }
}

fn line<'a>(buf: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let rest = &buf[*at..];
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    *at += end + 2;
    Some(&rest[..end])
}

fn length(text: &[u8], max_len: usize) -> Result<i64, MalformedReply> {
    let n = crate::number::parse_i64(text).ok_or(MalformedReply)?;
    if n < -1 || n > max_len as i64 {
        return Err(MalformedReply);
    }
    Ok(n)
}

fn parse_at(buf: &[u8], at: &mut usize, max_len: usize) -> Result<Option<Reply>, MalformedReply> {
    let Some(&kind) = buf.get(*at) else {
        return Ok(None);
    };
    *at += 1;
    let Some(text) = line(buf, at) else {
        return Ok(None);
    };
    let reply = match kind {
        b'+' => Reply::Simple(Bytes::copy_from_slice(text)),
        b'-' => Reply::Error(Bytes::copy_from_slice(text)),
        b':' => Reply::Integer(crate::number::parse_i64(text).ok_or(MalformedReply)?),
        b'$' => match length(text, max_len)? {
            -1 => Reply::NullBulk,
            n => {
                let n = n as usize;
                if buf.len() < *at + n + 2 {
                    return Ok(None);
                }
                if &buf[*at + n..*at + n + 2] != b"\r\n" {
                    return Err(MalformedReply);
                }
                let data = Bytes::copy_from_slice(&buf[*at..*at + n]);
                *at += n + 2;
                Reply::Bulk(data)
            }
        },
        b'*' => match length(text, max_len)? {
            -1 => Reply::NullArray,
            n => {
                let mut items = Vec::with_capacity((n as usize).min(64));
                for _ in 0..n {
                    match parse_at(buf, at, max_len)? {
                        Some(item) => items.push(item),
                        None => return Ok(None),
                    }
                }
                Reply::Array(items)
            }
        },
        _ => return Err(MalformedReply),
    };
    Ok(Some(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_round_trip_through_the_encoder() {
        let reply = Reply::Array(vec![
            Reply::ok(),
            Reply::error("ERR x"),
            Reply::Integer(-3),
            Reply::Bulk(Bytes::from("a\r\nb")),
            Reply::NullBulk,
            Reply::NullArray,
        ]);
        let mut wire = BytesMut::new();
        reply.encode(&mut wire);
        reply.encode(&mut wire);
        let whole = wire.clone();
        for cut in 0..whole.len() / 2 {
            let mut partial = BytesMut::from(&whole[..cut]);
            assert_eq!(parse_reply(&mut partial, 100), Ok(None), "cut at {cut}");
            assert_eq!(partial.len(), cut, "nothing consumed");
        }
        assert_eq!(parse_reply(&mut wire, 100), Ok(Some(reply.clone())));
        assert_eq!(parse_reply(&mut wire, 100), Ok(Some(reply)));
        assert!(wire.is_empty());
    }

    #[test]
    fn garbage_and_oversize_are_refused() {
        assert_eq!(
            parse_reply(&mut BytesMut::from("?x\r\n"), 10),
            Err(MalformedReply)
        );
        assert_eq!(
            parse_reply(&mut BytesMut::from("$11\r\n"), 10),
            Err(MalformedReply)
        );
        assert_eq!(
            parse_reply(&mut BytesMut::from("$1\r\nab\r\n"), 10),
            Err(MalformedReply)
        );
    }
}
