//! The parser's fast path: a request array that is already complete in the buffer
//! is scanned in place and taken off with one `split_to`, its arguments being `slice`s of that
//! one frame, rather than header by header with an `advance` or `split_to` per line and per
//! argument. Anything unusual (incomplete, malformed, empty, many arguments) is left to the
//! incremental parser, which then produces exactly what it always did: this path only ever
//! takes requests that path would have returned unchanged.

use bytes::{Bytes, BytesMut};

use super::parser::ParserLimits;

/// Most arguments the fast path handles (the rest go the incremental way): enough for an
/// MSET of 15 pairs.
const MAX_ARGS: usize = 32;

/// Takes one complete, well-formed `*` request off the front of `buf`, or returns `None` and
/// leaves `buf` untouched.
#[cfg(test)]
pub(super) fn take_whole(buf: &mut BytesMut, limits: &ParserLimits) -> Option<Vec<Bytes>> {
    let mut args = Vec::new();
    take_whole_frame(buf, limits, &mut args).map(|_| args)
}

/// [`take_whole`] into `args` (empty on entry; the connection's vector, reused so that a
/// request does not allocate one), giving the request's whole frame (the arguments are
/// slices of it): a handle that keeps the request for later without copying its arguments.
pub(super) fn take_whole_frame(
    buf: &mut BytesMut,
    limits: &ParserLimits,
    args: &mut Vec<Bytes>,
) -> Option<Bytes> {
    let (count, mut at) = header(buf, 0, b'*', limits)?;
    if !(1..=MAX_ARGS).contains(&count) || count > limits.max_array_len {
        return None;
    }
    let mut ranges = [(0, 0); MAX_ARGS];
    for range in &mut ranges[..count] {
        let (len, start) = header(buf, at, b'$', limits)?;
        if len > limits.max_bulk_len {
            return None;
        }
        let end = start + len;
        if buf.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        // `u32`s halve the array to initialise; a request past 4 GiB goes the other way.
        *range = (start as u32, u32::try_from(end).ok()?);
        at = end + 2;
    }
    let frame = buf.split_to(at).freeze();
    args.extend(
        ranges[..count]
            .iter()
            .map(|&(start, end)| frame.slice(start as usize..end as usize)),
    );
    Some(frame)
}

/// A length taken here has fewer digits than this: it fits a `usize` without overflow
/// checks, and is far past any limit.
const MAX_DIGITS: usize = 18;

/// The length in the header line starting with `kind` at `at`, and where the line after it
/// starts. The digits are read as they are scanned for the CR (one pass, no separate
/// `parse_length`), and only plain lengths are taken: digits without a leading zero, then
/// CRLF. A negative length, a malformed or incomplete line is `None`, for the incremental
/// parser to answer as it always did; what is taken here it reads the same way.
fn header(buf: &[u8], at: usize, kind: u8, limits: &ParserLimits) -> Option<(usize, usize)> {
    let line = buf.get(at..)?;
    // Most lengths have one or two digits: matched whole, without the loop (the CR is at 2
    // or 3, within the incremental parser's search unless its limit is absurdly small).
    let short = limits.max_inline_len >= 3;
    match *line {
        [k, d @ b'0'..=b'9', b'\r', b'\n', ..] if k == kind && short => {
            return Some((usize::from(d - b'0'), at + 4));
        }
        [k, tens @ b'1'..=b'9', ones @ b'0'..=b'9', b'\r', b'\n', ..] if k == kind && short => {
            return Some((
                usize::from(tens - b'0') * 10 + usize::from(ones - b'0'),
                at + 5,
            ));
        }
        _ => {}
    }
    if line.first() != Some(&kind) {
        return None;
    }
    let (mut len, mut i) = (0usize, 1);
    while let Some(&byte) = line.get(i) {
        if !byte.is_ascii_digit() {
            break;
        }
        len = len * 10 + usize::from(byte - b'0');
        i += 1;
        if i > MAX_DIGITS {
            return None;
        }
    }
    // `i` is where the CR is, which the incremental parser looks for within
    // `max_inline_len + 1` bytes of the line's start.
    let plain = i > 1 && (i == 2 || line[1] != b'0') && i <= limits.max_inline_len;
    (plain && line.get(i..i + 2) == Some(b"\r\n")).then_some((len, at + i + 2))
}

#[cfg(test)]
mod tests {
    use super::super::parser::RequestParser;
    use super::*;

    /// Every request as the parser returns it when all input is there at once (fast path) and
    /// when it arrives a byte at a time (incremental path only), up to the first error.
    fn both_ways(input: &[u8]) -> [(Vec<Vec<u8>>, bool); 2] {
        let run = |chunk: usize| {
            let mut parser = RequestParser::default();
            let mut buf = BytesMut::new();
            let mut out = Vec::new();
            for piece in input.chunks(chunk) {
                buf.extend_from_slice(piece);
                loop {
                    match parser.parse(&mut buf) {
                        Ok(Some(args)) => out.push(args.concat()),
                        Ok(None) => break,
                        Err(_) => return (out, true),
                    }
                }
            }
            (out, false)
        };
        [run(input.len().max(1)), run(1)]
    }

    #[test]
    fn agrees_with_the_incremental_parser() {
        let inputs: [&[u8]; 17] = [
            b"*2\r\n$3\r\nGET\r\n$00\r\n\r\n",
            b"*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n*1\r\n$4\r\nPING\r\n",
            b"*2\r\n$3\r\nGET\r\n$01\r\nk\r\n",
            b"*02\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            b"*2\r\n$3\r\nGET\r\n$+1\r\nk\r\n",
            b"*2\r\n$3\r\nGET\r\n$\r\nk\r\n",
            b"*2\r\n$3\r\nGET\r\n$99999999999999999999\r\nk\r\n",
            b"*1\r\n$1000000000000000000\r\nk\r\n",
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n",
            b"*-1\r\n*0\r\n*2\r\n$3\r\nGET\r\n$5\r\na\r\n\0b\r\n",
            b"*2\r\n$3\r\nGET\r\n$1\r\nkx\r\n",
            b"*2\r\n$3\r\nGET\r\n$-1\r\n",
            b"*2\r\n$3\r\nGET\r\n:1\r\n",
            b"*1\r\n$3\r\nGET\n\r\n",
            b"*x\r\n",
            b"*33\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n",
            b"*2\r\n$3\r\nGET\r\n$1\r",
        ];
        for input in inputs {
            let [whole, bytewise] = both_ways(input);
            assert_eq!(whole, bytewise, "{}", String::from_utf8_lossy(input));
        }
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nrest"[..]);
        let args = take_whole(&mut buf, &ParserLimits::default()).unwrap();
        assert_eq!(
            (&args[0][..], &args[1][..], &buf[..]),
            (&b"GET"[..], &b"k"[..], &b"rest"[..])
        );
    }
}
