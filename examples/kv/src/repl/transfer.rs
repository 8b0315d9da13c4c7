//! The snapshot a master sends after `+FULLRESYNC`, in either of Redis's two framings:
//! `$<len>\r\n` and `len` bytes (a snapshot saved to disk first), or the diskless
//! `$EOF:<40 random characters>\r\n`, the payload, and the same 40 characters again.
//!
//! Sans-I/O: feed what the link received to [`RdbReceiver::feed`]; it takes the snapshot's
//! bytes off the front (leaving whatever follows, the start of the command stream) and says
//! when the whole snapshot is there. The master's keep-alive newlines before the header are
//! skipped.

use std::fmt;

use bytes::{Buf, BytesMut};

/// The length of the diskless framing's end mark.
const EOF_MARK_LEN: usize = 40;
/// Longest header line accepted (`$EOF:` and 40 characters, or a length).
const MAX_HEADER: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferError {
    /// The header is not `$<len>` or `$EOF:<mark>`.
    BadHeader(String),
    /// The snapshot is larger than this node accepts.
    TooLarge { len: u64, max: u64 },
}

impl fmt::Display for TransferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransferError::BadHeader(line) => {
                write!(f, "bad snapshot header from the master: {line:?}")
            }
            TransferError::TooLarge { len, max } => write!(
                f,
                "the master's snapshot ({len} bytes) is larger than this node accepts ({max})"
            ),
        }
    }
}

impl std::error::Error for TransferError {}

#[derive(Debug)]
enum State {
    Header,
    Sized { len: usize },
    Eof { mark: [u8; EOF_MARK_LEN] },
    Done,
}

/// A snapshot being received.
#[derive(Debug)]
pub struct RdbReceiver {
    state: State,
    data: Vec<u8>,
    max: u64,
}

impl RdbReceiver {
    /// A receiver for a snapshot of at most `max` bytes (the whole snapshot is held in
    /// memory until it is loaded).
    pub fn new(max: u64) -> RdbReceiver {
        RdbReceiver {
            state: State::Header,
            data: Vec::new(),
            max,
        }
    }

    /// Bytes of the snapshot received so far.
    pub fn received(&self) -> usize {
        self.data.len()
    }

    /// Whether the diskless framing is used (known once the header arrived).
    pub fn is_diskless(&self) -> bool {
        matches!(self.state, State::Eof { .. })
    }

    /// Takes snapshot bytes off the front of `input`. `Ok(Some(snapshot))` once it is all
    /// there; what follows it stays in `input`.
    pub fn feed(&mut self, input: &mut BytesMut) -> Result<Option<Vec<u8>>, TransferError> {
        if let State::Header = self.state {
            let Some(line) = header_line(input)? else {
                return Ok(None);
            };
            self.state = parse_header(&line)?;
            if let State::Sized { len } = self.state {
                if len as u64 > self.max {
                    return Err(TransferError::TooLarge {
                        len: len as u64,
                        max: self.max,
                    });
                }
                self.data.reserve_exact(len);
            }
        }
        match &self.state {
            State::Header | State::Done => Ok(None),
            State::Sized { len } => {
                let take = (len - self.data.len()).min(input.len());
                self.data.extend_from_slice(&input[..take]);
                input.advance(take);
                Ok((self.data.len() == *len).then(|| self.finish()))
            }
            State::Eof { mark } => {
                let mark = *mark;
                // The mark may straddle what came before: look from just before the new bytes.
                let from = self.data.len().saturating_sub(EOF_MARK_LEN - 1);
                self.data.extend_from_slice(input);
                let found = self.data[from..]
                    .windows(EOF_MARK_LEN)
                    .position(|window| window == mark);
                match found {
                    Some(at) => {
                        let end = from + at;
                        // Whatever came after the mark is the stream's.
                        let after = self.data.len() - (end + EOF_MARK_LEN);
                        let keep = input.len() - after;
                        input.advance(keep);
                        self.data.truncate(end);
                        Ok(Some(self.finish()))
                    }
                    None => {
                        input.clear();
                        let len = self.data.len() as u64;
                        if len > self.max + EOF_MARK_LEN as u64 {
                            return Err(TransferError::TooLarge { len, max: self.max });
                        }
                        Ok(None)
                    }
                }
            }
        }
    }

    fn finish(&mut self) -> Vec<u8> {
        self.state = State::Done;
        std::mem::take(&mut self.data)
    }
}

/// The header line, keep-alive newlines skipped.
fn header_line(input: &mut BytesMut) -> Result<Option<Vec<u8>>, TransferError> {
    while input.first() == Some(&b'\n') {
        input.advance(1);
    }
    let Some(end) = input.iter().position(|&b| b == b'\n') else {
        if input.len() > MAX_HEADER {
            return Err(TransferError::BadHeader(
                String::from_utf8_lossy(&input[..MAX_HEADER]).into_owned(),
            ));
        }
        return Ok(None);
    };
    let mut line = input.split_to(end + 1).to_vec();
    line.truncate(end);
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(line))
}

fn parse_header(line: &[u8]) -> Result<State, TransferError> {
    let bad = || TransferError::BadHeader(String::from_utf8_lossy(line).into_owned());
    let rest = line.strip_prefix(b"$").ok_or_else(bad)?;
    if let Some(mark) = rest.strip_prefix(b"EOF:") {
        let mark: [u8; EOF_MARK_LEN] = mark.try_into().map_err(|_| bad())?;
        return Ok(State::Eof { mark });
    }
    let len = std::str::from_utf8(rest)
        .ok()
        .and_then(|text| text.parse::<usize>().ok())
        .ok_or_else(bad)?;
    Ok(State::Sized { len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_in_pieces(rx: &mut RdbReceiver, bytes: &[u8], piece: usize) -> (Vec<u8>, BytesMut) {
        let mut input = BytesMut::new();
        for chunk in bytes.chunks(piece) {
            input.extend_from_slice(chunk);
            if let Some(rdb) = rx.feed(&mut input).unwrap() {
                return (rdb, input);
            }
        }
        panic!("snapshot never completed");
    }

    #[test]
    fn sized_snapshot_leaves_the_stream() {
        for piece in [1, 3, 7, 100] {
            let mut rx = RdbReceiver::new(1 << 20);
            let (rdb, rest) = feed_in_pieces(&mut rx, b"\n\n$5\r\nREDIS*1\r\n", piece);
            assert_eq!(rdb, b"REDIS");
            // With small pieces the rest arrives after the snapshot completed.
            assert!(b"*1\r\n".starts_with(&rest), "{rest:?}");
        }
    }

    #[test]
    fn diskless_snapshot_ends_at_its_mark() {
        let mark = "0123456789".repeat(4);
        let payload = format!("$EOF:{mark}\r\nREDIS0011 payload 0123456789012{mark}*1\r\n");
        for piece in [1, 5, 39, 41, 1000] {
            let mut rx = RdbReceiver::new(1 << 20);
            let (rdb, rest) = feed_in_pieces(&mut rx, payload.as_bytes(), piece);
            assert!(rx.is_diskless() || matches!(rx.state, State::Done));
            assert_eq!(rdb, b"REDIS0011 payload 0123456789012");
            assert!(b"*1\r\n".starts_with(&rest), "{piece}: {rest:?}");
        }
    }

    #[test]
    fn bad_headers_and_limits() {
        let mut rx = RdbReceiver::new(10);
        let mut input = BytesMut::from(&b"+OK\r\n"[..]);
        assert!(matches!(
            rx.feed(&mut input),
            Err(TransferError::BadHeader(_))
        ));
        let mut rx = RdbReceiver::new(10);
        let mut input = BytesMut::from(&b"$11\r\n"[..]);
        assert!(matches!(
            rx.feed(&mut input),
            Err(TransferError::TooLarge { .. })
        ));
        let mut rx = RdbReceiver::new(10);
        let mut input = BytesMut::from(&b"$EOF:short\r\n"[..]);
        assert!(rx.feed(&mut input).is_err());
        let mut rx = RdbReceiver::new(10);
        let mut input =
            BytesMut::from(format!("$EOF:{}\r\n{}", "x".repeat(40), "y".repeat(60)).as_bytes());
        assert!(matches!(
            rx.feed(&mut input),
            Err(TransferError::TooLarge { .. })
        ));
    }
}
