//! Stream entry IDs (`ms-seq`, two unsigned 64-bit numbers) and the ways Redis 7.0 reads
//! them from arguments (`streamGenericParseIDOrReply`): `-` and `+`, a missing sequence
//! filled per command, `ms-*` for XADD, `(` for exclusive range ends. Sans-I/O.

use std::fmt;

use bytes::Bytes;

use crate::command::CommandError;

/// An entry ID; ordered as Redis compares them (ms, then seq).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID (`streamIncrID`); `None` past the last one.
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The previous ID (`streamDecrID`); `None` before 0-0.
    pub fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// `ms-seq` as a reply's bulk, formatted without `fmt` (an ID per entry of every read).
    pub fn to_bytes(self) -> Bytes {
        let mut out = bytes::BytesMut::with_capacity(41);
        put_u64(&mut out, self.ms);
        out.extend_from_slice(b"-");
        put_u64(&mut out, self.seq);
        out.freeze()
    }
}

/// `n` in decimal.
fn put_u64(out: &mut bytes::BytesMut, n: u64) {
    out.extend_from_slice(crate::resp::decimal_u64(n, &mut [0u8; 20]));
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

pub fn invalid_id() -> CommandError {
    CommandError::Text("ERR Invalid stream ID specified as stream command argument".into())
}

/// Redis's `string2ull`: decimal digits only, no sign, no spaces, no overflow.
fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 20 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// How an argument reads as an ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parse {
    /// The sequence when the argument has none (`0` for a range start, `u64::MAX` for an end).
    pub missing_seq: u64,
    /// Strict: `-` and `+` are refused (IDs that name an entry, not a range end).
    pub strict: bool,
    /// XADD: `ms-*` is accepted, and reported as "sequence not given".
    pub seq_star: bool,
}

impl Parse {
    pub const RANGE_START: Parse = Parse {
        missing_seq: 0,
        strict: false,
        seq_star: false,
    };
    pub const RANGE_END: Parse = Parse {
        missing_seq: u64::MAX,
        strict: false,
        seq_star: false,
    };
    pub const STRICT: Parse = Parse {
        missing_seq: 0,
        strict: true,
        seq_star: false,
    };
    pub const XADD: Parse = Parse {
        missing_seq: 0,
        strict: true,
        seq_star: true,
    };
}

/// An ID as `how` reads `arg`, and whether its sequence was given (false only for `ms-*`).
pub fn parse_id(arg: &[u8], how: Parse) -> Result<(StreamId, bool), CommandError> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    match arg {
        b"-" | b"+" if how.strict => Err(invalid_id()),
        b"-" => Ok((StreamId::MIN, true)),
        b"+" => Ok((StreamId::MAX, true)),
        _ => {
            let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
                Some(at) => (&arg[..at], Some(&arg[at + 1..])),
                None => (arg, None),
            };
            let ms = parse_u64(ms).ok_or_else(invalid_id)?;
            match seq {
                None => Ok((StreamId::new(ms, how.missing_seq), true)),
                Some(b"*") if how.seq_star => Ok((StreamId::new(ms, 0), false)),
                Some(seq) => Ok((
                    StreamId::new(ms, parse_u64(seq).ok_or_else(invalid_id)?),
                    true,
                )),
            }
        }
    }
}

/// A strict ID (XDEL, XACK, XCLAIM, ...).
pub fn strict(arg: &[u8]) -> Result<StreamId, CommandError> {
    parse_id(arg, Parse::STRICT).map(|(id, _)| id)
}

/// A range end (`streamParseIntervalIDOrReply`): `(id` excludes `id`, and is then strict.
/// Returns the inclusive bound, or the error Redis gives when excluding overflows.
pub fn interval(arg: &[u8], start: bool) -> Result<StreamId, CommandError> {
    let how = if start {
        Parse::RANGE_START
    } else {
        Parse::RANGE_END
    };
    if arg.len() > 1 && arg[0] == b'(' {
        let (id, _) = parse_id(
            &arg[1..],
            Parse {
                strict: true,
                ..how
            },
        )?;
        let moved = if start { id.next() } else { id.prev() };
        return moved.ok_or_else(|| {
            CommandError::Text(if start {
                "ERR invalid start ID for the interval".into()
            } else {
                "ERR invalid end ID for the interval".into()
            })
        });
    }
    parse_id(arg, how).map(|(id, _)| id)
}

/// The ID XADD generates after `last` at `now_ms` (`streamNextID`).
pub fn next_auto(last: StreamId, now_ms: u64) -> Option<StreamId> {
    if last.ms < now_ms {
        Some(StreamId::new(now_ms, 0))
    } else {
        last.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(result: Result<StreamId, CommandError>) -> String {
        match result {
            Err(CommandError::Text(text)) => text,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn parses_as_redis() {
        assert_eq!(strict(b"1-2").unwrap(), StreamId::new(1, 2));
        assert_eq!(strict(b"5").unwrap(), StreamId::new(5, 0));
        assert_eq!(
            parse_id(b"5", Parse::RANGE_END).unwrap().0,
            StreamId::new(5, u64::MAX)
        );
        assert_eq!(parse_id(b"-", Parse::RANGE_START).unwrap().0, StreamId::MIN);
        assert_eq!(parse_id(b"+", Parse::RANGE_END).unwrap().0, StreamId::MAX);
        assert!(strict(b"-").is_err() && strict(b"+").is_err());
        assert_eq!(
            parse_id(b"7-*", Parse::XADD).unwrap(),
            (StreamId::new(7, 0), false)
        );
        assert!(strict(b"7-*").is_err());
        for bad in [
            &b""[..],
            b"a",
            b"1-",
            b"-1",
            b"1-2-3",
            b" 1",
            b"1.5",
            b"18446744073709551616",
        ] {
            assert_eq!(
                text(strict(bad)),
                "ERR Invalid stream ID specified as stream command argument",
                "{bad:?}"
            );
        }
        assert_eq!(
            strict(b"18446744073709551615-18446744073709551615").unwrap(),
            StreamId::MAX
        );
    }

    #[test]
    fn exclusive_ends_move_by_one() {
        assert_eq!(interval(b"(1-1", true).unwrap(), StreamId::new(1, 2));
        assert_eq!(
            interval(b"(1-0", false).unwrap(),
            StreamId::new(0, u64::MAX)
        );
        assert_eq!(
            interval(b"(5", false).unwrap(),
            StreamId::new(5, u64::MAX - 1)
        );
        assert_eq!(
            text(interval(
                b"(18446744073709551615-18446744073709551615",
                true
            )),
            "ERR invalid start ID for the interval"
        );
        assert_eq!(
            text(interval(b"(0-0", false)),
            "ERR invalid end ID for the interval"
        );
        // `(` alone is read as an ID (and fails); `(-` is strict.
        assert!(interval(b"(", true).is_err() && interval(b"(-", true).is_err());
        assert_eq!(interval(b"-", true).unwrap(), StreamId::MIN);
    }

    #[test]
    fn next_and_auto_ids() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(
            next_auto(StreamId::new(5, 3), 10),
            Some(StreamId::new(10, 0))
        );
        assert_eq!(
            next_auto(StreamId::new(10, 3), 10),
            Some(StreamId::new(10, 4))
        );
        assert_eq!(
            next_auto(StreamId::new(20, 3), 10),
            Some(StreamId::new(20, 4))
        );
        assert_eq!(StreamId::new(3, 4).to_string(), "3-4");
    }
}
