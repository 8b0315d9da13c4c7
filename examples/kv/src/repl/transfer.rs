//! The snapshot a master sends after `+FULLRESYNC`, in either of Redis's two framings:
//! `$<len>\r\n` and `len` bytes (a snapshot saved to disk first), or the diskless
//! `$EOF:<40 random characters>\r\n`, the payload, and the same 40 characters again.
//!
//! Sans-I/O: feed what the link received to [`RdbReceiver::feed`]; it takes the snapshot's
//! bytes off the front (leaving whatever follows, the start of the command stream), hands
//! them on, and says when the whole snapshot is there. The master's keep-alive newlines before the header are
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

/// A snapshot being received, handed on piece by piece (so the replica spools it to disk
/// and never holds it whole).
#[derive(Debug)]
pub struct RdbReceiver {
    state: State,
    /// Diskless framing: the last bytes, which may be the start of the end mark.
    held: Vec<u8>,
    /// Snapshot bytes handed on so far.
    received: u64,
    max: u64,
}

/// What [`RdbReceiver::feed`] took off the input.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Piece {
    /// The snapshot's next bytes (maybe none).
    pub bytes: Vec<u8>,
    /// Whether the snapshot is complete with these.
    pub done: bool,
}

impl RdbReceiver {
    /// A receiver for a snapshot of at most `max` bytes.
    pub fn new(max: u64) -> RdbReceiver {
        RdbReceiver {
            state: State::Header,
            held: Vec::new(),
            received: 0,
            max,
        }
    }

    /// Bytes of the snapshot handed on so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Whether the diskless framing is used (known once the header arrived).
    pub fn is_diskless(&self) -> bool {
        matches!(self.state, State::Eof { .. })
    }

    /// Takes snapshot bytes off the front of `input` (what follows the snapshot, the start
    /// of the command stream, stays there). With the diskless framing the last 39 bytes
    /// seen are held back until it is known whether they begin the end mark.
    pub fn feed(&mut self, input: &mut BytesMut) -> Result<Piece, TransferError> {
        if let State::Header = self.state {
            let Some(line) = header_line(input)? else {
                return Ok(Piece::default());
            };
            self.state = parse_header(&line)?;
            if let State::Sized { len } = self.state {
                if len as u64 > self.max {
                    return Err(TransferError::TooLarge {
                        len: len as u64,
                        max: self.max,
                    });
                }
            }
        }
        let piece = match &self.state {
            State::Header | State::Done => Piece::default(),
            State::Sized { len } => {
                let take = (*len as u64 - self.received).min(input.len() as u64) as usize;
                let bytes = input.split_to(take).to_vec();
                let done = self.received + take as u64 == *len as u64;
                Piece { bytes, done }
            }
            State::Eof { mark } => {
                let mark = *mark;
                // The mark may straddle what came before: look from the bytes held back.
                let mut data = std::mem::take(&mut self.held);
                let before = data.len();
                data.extend_from_slice(input);
                let found = data.windows(EOF_MARK_LEN).position(|w| w == mark);
                match found {
                    Some(end) => {
                        // Whatever came after the mark is the stream's.
                        input.advance(end + EOF_MARK_LEN - before);
                        data.truncate(end);
                        Piece {
                            bytes: data,
                            done: true,
                        }
                    }
                    None => {
                        input.clear();
                        let keep = data.len().min(EOF_MARK_LEN - 1);
                        self.held = data.split_off(data.len() - keep);
                        Piece {
                            bytes: data,
                            done: false,
                        }
                    }
                }
            }
        };
        self.received += piece.bytes.len() as u64;
        if piece.done {
            self.state = State::Done;
        } else if self.received > self.max {
            return Err(TransferError::TooLarge {
                len: self.received,
                max: self.max,
            });
        }
        Ok(piece)
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
        let mut rdb = Vec::new();
        for chunk in bytes.chunks(piece) {
            input.extend_from_slice(chunk);
            let got = rx.feed(&mut input).unwrap();
            // Never more held back than the end mark's length.
            assert!(rx.held.len() < EOF_MARK_LEN);
            rdb.extend_from_slice(&got.bytes);
            if got.done {
                assert_eq!(rx.received(), rdb.len() as u64);
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
