use bytes::{Buf, Bytes, BytesMut};

use super::error::ProtocolError;
use super::inline::split_inline_args;
use crate::number::parse_length;

/// Bounds on what one request may claim, so a hostile header cannot make us wait for (or
/// allocate) gigabytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParserLimits {
    /// Largest bulk string accepted (Redis `proto-max-bulk-len`, 512 MiB by default).
    pub max_bulk_len: usize,
    /// Largest number of elements in one request array.
    pub max_array_len: usize,
    /// Longest inline command line, and longest `*`/`$` header line searched for its CRLF
    /// (Redis `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub max_inline_len: usize,
}

impl Default for ParserLimits {
    fn default() -> Self {
        ParserLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_array_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
        }
    }
}

/// Incremental RESP2 request parser.
///
/// Feed it the connection's input buffer repeatedly; it consumes complete requests from the
/// front and keeps the progress of a partially received array between calls, so a large
/// request trickling in is never rescanned. Bulk arguments are zero-copy slices of the input
/// buffer (`BytesMut::split_to(..).freeze()`); anything that keeps them for long (the store)
/// copies them so a small value does not pin a whole read buffer.
#[derive(Debug, Default)]
pub struct RequestParser {
    limits: ParserLimits,
    /// Boxed: every connection's session has a parser, and few requests arrive in pieces.
    partial: Option<Box<PartialArray>>,
    /// Redis's tighter limits before authentication (10 elements, 16 KiB bulks), so an
    /// unauthenticated client cannot make the server buffer much.
    unauthenticated: bool,
}

/// Redis's limits for a client that has not authenticated.
const UNAUTH_MAX_ARRAY: i64 = 10;
const UNAUTH_MAX_BULK: usize = 16384;

#[derive(Debug)]
struct PartialArray {
    remaining: usize,
    args: Vec<Bytes>,
    /// Length of the bulk whose `$` header was consumed but whose data has not arrived.
    pending_bulk: Option<usize>,
}

/// Elements preallocated for an array; a client claiming a million elements has to send them
/// before we spend memory on them.
const MAX_PREALLOCATED_ARGS: usize = 64;

/// A request's arguments, and its whole frame when it came in one piece.
pub type Framed = (Vec<Bytes>, Option<Bytes>);

impl RequestParser {
    pub fn new(limits: ParserLimits) -> Self {
        RequestParser {
            limits,
            partial: None,
            unauthenticated: false,
        }
    }

    /// Whether the connection has yet to authenticate (the tighter limits apply).
    pub fn set_unauthenticated(&mut self, unauthenticated: bool) {
        self.unauthenticated = unauthenticated;
    }

    pub fn limits(&self) -> &ParserLimits {
        &self.limits
    }

    /// Takes one complete request off the front of `buf`.
    ///
    /// `Ok(None)`: more input is needed (everything consumed so far is remembered).
    /// Empty requests (`*0`, `*-1`, blank inline lines) are skipped, as Redis does. After an
    /// error the parser's state is meaningless: the connection must be closed.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        Ok(self.parse_framed(buf)?.map(|(args, _)| args))
    }

    /// [`Self::parse`], also giving the request's whole frame when it came in one piece (the
    /// common case): the arguments are slices of it, and it can be read again later (what
    /// SLOWLOG and MONITOR show) for the cost of a reference count.
    pub fn parse_framed(&mut self, buf: &mut BytesMut) -> Result<Option<Framed>, ProtocolError> {
        let mut args = Vec::new();
        Ok(self.parse_into(buf, &mut args)?.map(|frame| (args, frame)))
    }

    /// [`Self::parse_framed`] into `args`, which must be empty: a connection passes the same
    /// vector for every request, so a request whose command keeps none of it in a vector
    /// (GET, SET, INCR, ...) allocates none. `Ok(Some(frame))`: a request is in `args`, and
    /// `frame` is its whole frame when it came in one piece.
    pub fn parse_into(
        &mut self,
        buf: &mut BytesMut,
        args: &mut Vec<Bytes>,
    ) -> Result<Option<Option<Bytes>>, ProtocolError> {
        debug_assert!(args.is_empty());
        loop {
            if let Some(partial) = &mut self.partial {
                let unauthenticated = self.unauthenticated;
                if !Self::continue_array(partial, buf, &self.limits, unauthenticated)? {
                    return Ok(None);
                }
                if let Some(partial) = self.partial.take() {
                    *args = partial.args;
                }
                return Ok(Some(None));
            }
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            if first == b'*' {
                if !self.unauthenticated {
                    if let Some(frame) = super::whole::take_whole_frame(buf, &self.limits, args) {
                        return Ok(Some(Some(frame)));
                    }
                }
                let Some(len) = take_header_line(buf, self.limits.max_inline_len)
                    .map_err(|()| ProtocolError::TooBigMultibulkCount)?
                else {
                    return Ok(None);
                };
                let count = len?
                    .filter(|&n| n <= self.limits.max_array_len as i64)
                    .ok_or(ProtocolError::InvalidMultibulkLength)?;
                if self.unauthenticated && count > UNAUTH_MAX_ARRAY {
                    return Err(ProtocolError::UnauthenticatedMultibulk);
                }
                if count > 0 {
                    let count = count as usize;
                    self.partial = Some(Box::new(PartialArray {
                        remaining: count,
                        args: Vec::with_capacity(count.min(MAX_PREALLOCATED_ARGS)),
                        pending_bulk: None,
                    }));
                }
            } else if let Some(inline) = self.parse_inline(buf)? {
                if !inline.is_empty() {
                    *args = inline;
                    return Ok(Some(None));
                }
            } else {
                return Ok(None);
            }
        }
    }

    /// Returns `Ok(true)` when the array is complete.
    fn continue_array(
        partial: &mut PartialArray,
        buf: &mut BytesMut,
        limits: &ParserLimits,
        unauthenticated: bool,
    ) -> Result<bool, ProtocolError> {
        while partial.remaining > 0 {
            let len = match partial.pending_bulk {
                Some(len) => len,
                None => {
                    let Some(&first) = buf.first() else {
                        return Ok(false);
                    };
                    if first != b'$' {
                        return Err(ProtocolError::ExpectedBulk { got: first });
                    }
                    let Some(len) = take_header_line(buf, limits.max_inline_len)
                        .map_err(|()| ProtocolError::TooBigBulkCount)?
                    else {
                        return Ok(false);
                    };
                    let len = len?
                        .filter(|&n| n >= 0 && n as u64 <= limits.max_bulk_len as u64)
                        .ok_or(ProtocolError::InvalidBulkLength)?
                        as usize;
                    if unauthenticated && len > UNAUTH_MAX_BULK {
                        return Err(ProtocolError::UnauthenticatedBulk);
                    }
                    partial.pending_bulk = Some(len);
                    len
                }
            };
            if buf.len() < len + 2 {
                return Ok(false);
            }
            if &buf[len..len + 2] != b"\r\n" {
                return Err(ProtocolError::MissingBulkTerminator);
            }
            let data = buf.split_to(len).freeze();
            buf.advance(2);
            partial.args.push(data);
            partial.pending_bulk = None;
            partial.remaining -= 1;
        }
        Ok(true)
    }

    fn parse_inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let search_len = buf.len().min(self.limits.max_inline_len + 1);
        let Some(newline) = buf[..search_len].iter().position(|&b| b == b'\n') else {
            if buf.len() > self.limits.max_inline_len {
                return Err(ProtocolError::TooBigInlineRequest);
            }
            return Ok(None);
        };
        let line = buf.split_to(newline + 1);
        let mut content = &line[..newline];
        if let Some(stripped) = content.strip_suffix(b"\r") {
            content = stripped;
        }
        split_inline_args(content)
            .map(Some)
            .ok_or(ProtocolError::UnbalancedQuotes)
    }
}

/// Takes a `*`/`$` header line (with its CRLF) off `buf` and returns the length it states
/// (`None` if it is not a number; the caller picks the error).
///
/// Outer `Err(())`: no CR within `max_len` bytes (the caller picks the error). `Ok(None)`: the
/// line is incomplete. Inner `Err`: CR not followed by LF.
///
/// The number is read in place and the line skipped with `advance`: splitting it off as its
/// own `BytesMut`, as before, cost a reference count increment and decrement per header,
/// several per request.
#[allow(clippy::type_complexity)]
fn take_header_line(
    buf: &mut BytesMut,
    max_len: usize,
) -> Result<Option<Result<Option<i64>, ProtocolError>>, ()> {
    let search_len = buf.len().min(max_len + 1);
    let Some(cr) = buf[..search_len].iter().position(|&b| b == b'\r') else {
        return if buf.len() > max_len {
            Err(())
        } else {
            Ok(None)
        };
    };
    match buf.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => {
            let len = parse_length(&buf[1..cr]);
            buf.advance(cr + 2);
            Ok(Some(Ok(len)))
        }
        Some(_) => Ok(Some(Err(ProtocolError::MissingLineFeed))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::default();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = parser.parse(&mut buf)? {
            out.push(args.into_iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    fn args(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn parses_pipelined_multibulk_requests() {
        let got =
            parse_all(b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n").unwrap();
        assert_eq!(got, vec![args(&["PING"]), args(&["SET", "k", ""])]);
    }

    #[test]
    fn parses_inline_requests_and_skips_blank_lines() {
        let got = parse_all(b"PING\r\n\r\n\nset k \"v v\"\nGET k\r\n").unwrap();
        assert_eq!(
            got,
            vec![
                args(&["PING"]),
                args(&["set", "k", "v v"]),
                args(&["GET", "k"])
            ]
        );
    }

    #[test]
    fn empty_and_null_arrays_are_skipped() {
        let got = parse_all(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(got, vec![args(&["PING"])]);
    }

    #[test]
    fn binary_data_is_preserved() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$5\r\na\r\n\0b\r\n").unwrap();
        assert_eq!(got, vec![vec![b"GET".to_vec(), b"a\r\n\0b".to_vec()]]);
    }

    #[test]
    fn incomplete_input_waits_and_resumes() {
        let mut parser = RequestParser::default();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$3\r\nke"[..]);
        assert_eq!(parser.parse(&mut buf), Ok(None));
        // Completed elements were consumed; only the partial bulk stays buffered.
        assert_eq!(&buf[..], b"ke");
        buf.extend_from_slice(b"y\r\n");
        let got = parser.parse(&mut buf).unwrap().unwrap();
        assert_eq!(got, vec![Bytes::from("GET"), Bytes::from("key")]);
        assert!(buf.is_empty());
    }

    #[test]
    fn one_vector_serves_every_request() {
        // Whole frames, an inline line and a request in pieces, into the same vector.
        let mut parser = RequestParser::default();
        let mut buf =
            BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING x\r\n*1\r\n$4\r\nEC"[..]);
        let mut vector = Vec::new();
        let mut got = Vec::new();
        let mut whole = Vec::new();
        for more in [&b""[..], b"HO\r\n"] {
            buf.extend_from_slice(more);
            while let Some(frame) = parser.parse_into(&mut buf, &mut vector).unwrap() {
                got.push(vector.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
                whole.push(frame.map(|f| f.to_vec()));
                vector.clear();
            }
        }
        assert_eq!(
            got,
            vec![args(&["GET", "k"]), args(&["PING", "x"]), args(&["ECHO"])]
        );
        assert_eq!(
            whole,
            vec![Some(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec()), None, None]
        );
    }

    #[test]
    fn malformed_headers_are_errors() {
        assert_eq!(
            parse_all(b"*x\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse_all(b"*1\r\n+OK\r\n"),
            Err(ProtocolError::ExpectedBulk { got: b'+' })
        );
        assert_eq!(
            parse_all(b"*1\r\n$-1\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            parse_all(b"*1\r\n$01\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            parse_all(b"*1\r\n$1\r\nab\r\n"),
            Err(ProtocolError::MissingBulkTerminator)
        );
        assert_eq!(parse_all(b"*1\rx"), Err(ProtocolError::MissingLineFeed));
        assert_eq!(
            parse_all(b"GET \"k\r\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
    }

    #[test]
    fn limits_are_enforced() {
        let limits = ParserLimits {
            max_bulk_len: 4,
            max_array_len: 2,
            max_inline_len: 8,
        };
        let run = |input: &[u8]| RequestParser::new(limits).parse(&mut BytesMut::from(input));
        assert_eq!(run(b"*3\r\n"), Err(ProtocolError::InvalidMultibulkLength));
        assert_eq!(run(b"*1\r\n$5\r\n"), Err(ProtocolError::InvalidBulkLength));
        assert!(run(b"*1\r\n$4\r\nabcd\r\n").unwrap().is_some());
        assert_eq!(
            run(b"GET abcdefgh"),
            Err(ProtocolError::TooBigInlineRequest)
        );
        assert_eq!(
            run(b"GET abcdefgh\r\n"),
            Err(ProtocolError::TooBigInlineRequest)
        );
        assert_eq!(run(b"*000000000"), Err(ProtocolError::TooBigMultibulkCount));
        assert_eq!(
            run(b"*1\r\n$000000000"),
            Err(ProtocolError::TooBigBulkCount)
        );
        assert_eq!(run(b"GET abc"), Ok(None));
    }

    #[test]
    fn unauthenticated_limits() {
        let mut parser = RequestParser::default();
        parser.set_unauthenticated(true);
        let run =
            |parser: &mut RequestParser, input: &[u8]| parser.parse(&mut BytesMut::from(input));
        assert_eq!(
            run(&mut parser, b"*11\r\n"),
            Err(ProtocolError::UnauthenticatedMultibulk)
        );
        assert_eq!(
            run(
                &mut RequestParser {
                    unauthenticated: true,
                    ..Default::default()
                },
                b"*1\r\n$100000\r\n"
            ),
            Err(ProtocolError::UnauthenticatedBulk)
        );
        let mut fine = RequestParser {
            unauthenticated: true,
            ..Default::default()
        };
        assert_eq!(
            run(&mut fine, b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n").map(|a| a.map(|a| a.len())),
            Ok(Some(2))
        );
    }

    #[test]
    fn error_messages_match_redis() {
        assert_eq!(
            ProtocolError::InvalidMultibulkLength.to_string(),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            ProtocolError::ExpectedBulk { got: b'x' }.to_string(),
            "Protocol error: expected '$', got 'x'"
        );
        assert_eq!(
            ProtocolError::UnbalancedQuotes.to_string(),
            "Protocol error: unbalanced quotes in request"
        );
    }
}
