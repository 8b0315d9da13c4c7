use std::fmt;

use bytes::{Buf, BytesMut};

use super::record::RECORD_HEADER_LEN;
use crate::command::Command;
use crate::resp::{ParserLimits, RequestParser};

/// The result of reading an AOF: every command up to the first bad record.
#[derive(Debug)]
pub struct Replay {
    pub commands: Vec<Command>,
    /// Length of the good prefix; truncate the file here before appending to it.
    pub valid_len: usize,
    pub corrupt_tail: Option<CorruptTail>,
}

/// Where the good prefix ends, why, and how far the damage reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptTail {
    /// Offset of the first bad record (equal to [`Replay::valid_len`]).
    pub offset: usize,
    /// Length of the whole image: `file_len - offset` bytes would be cut.
    pub file_len: usize,
    pub reason: CorruptReason,
    pub damage: Damage,
}

/// Whether cutting the log at a bad record can lose anything that was ever complete.
///
/// A process killed mid-write leaves a prefix of its last write ([`Damage::TornTail`]). A
/// machine that loses power may also leave blocks the file system allocated but never wrote,
/// which read as zeros: a written prefix followed only by zeros is torn too. Anything else (a
/// checksum mismatch in a record that is all there, a complete but malformed record, a length
/// field pointing past records that are there) is [`Damage::Corrupt`]: the bytes after it may
/// hold acknowledged writes, so the server refuses to cut it unless told to (`--aof-fix`), as
/// Redis refuses to load an AOF that is bad before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The last record is incomplete, or everything from the bad record on is zero bytes.
    TornTail,
    /// A bad record that is not just an incomplete last one.
    Corrupt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorruptReason {
    /// Fewer than 8 bytes where a header should be: a write torn by a crash.
    TruncatedHeader {
        available: usize,
    },
    /// The payload is shorter than its header says: a torn write, or a corrupt length.
    TruncatedPayload {
        expected: usize,
        available: usize,
    },
    ChecksumMismatch {
        stored: u32,
        computed: u32,
    },
    /// The checksum matched but the payload is not one RESP request array.
    MalformedPayload,
    /// The payload is a request, but not a valid write command.
    InvalidCommand {
        detail: String,
    },
    /// The log ends inside a transaction's block (a MULTI record without its EXEC): the
    /// process stopped while writing it. The whole block is cut, so a transaction is
    /// replayed all or nothing.
    UnterminatedTransaction,
    /// A MULTI inside a transaction's block, or an EXEC outside one.
    MisplacedTransactionMarker,
}

impl fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptReason::TruncatedHeader { available } => {
                write!(
                    f,
                    "truncated record header ({available} of {RECORD_HEADER_LEN} bytes)"
                )
            }
            CorruptReason::TruncatedPayload {
                expected,
                available,
            } => write!(f, "truncated payload ({available} of {expected} bytes)"),
            CorruptReason::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            CorruptReason::MalformedPayload => f.write_str("payload is not a RESP request"),
            CorruptReason::InvalidCommand { detail } => write!(f, "invalid command: {detail}"),
            CorruptReason::UnterminatedTransaction => {
                f.write_str("transaction block without its EXEC record")
            }
            CorruptReason::MisplacedTransactionMarker => {
                f.write_str("MULTI or EXEC record out of place")
            }
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Damage::TornTail => "torn last record",
            Damage::Corrupt => "corrupt record",
        })
    }
}

impl fmt::Display for CorruptTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at offset {} of {} ({})",
            self.damage, self.offset, self.file_len, self.reason
        )
    }
}

impl std::error::Error for CorruptTail {}

/// Reads a whole AOF image. Bad data never panics: it ends the good prefix.
pub fn replay(data: impl Into<BytesMut>) -> Replay {
    let mut reader = RecordReader::new(data);
    let mut commands = Vec::new();
    let mut corrupt_tail = None;
    for record in &mut reader {
        match record {
            Ok(command) => commands.push(command),
            Err(tail) => corrupt_tail = Some(tail),
        }
    }
    Replay {
        commands,
        valid_len: reader.valid_len(),
        corrupt_tail,
    }
}

/// Streams commands out of an AOF image, for logs too large to collect first. Yields at most
/// one `Err`, after which it ends.
///
/// Records are split off the image without copying (a `Bytes` image is copied once unless
/// the reader holds its only reference), and each payload is parsed with limits taken from
/// the record itself: replay accepts every record the format can hold, whatever the
/// server's `--proto-max-bulk-len` is now or was when it was written.
#[derive(Debug)]
pub struct RecordReader {
    rest: BytesMut,
    offset: usize,
    file_len: usize,
    done: bool,
    /// The commands of a transaction block read to its EXEC, not yet yielded.
    block: std::collections::VecDeque<Command>,
}

impl RecordReader {
    pub fn new(data: impl Into<BytesMut>) -> RecordReader {
        let rest = data.into();
        RecordReader {
            file_len: rest.len(),
            rest,
            offset: 0,
            done: false,
            block: std::collections::VecDeque::new(),
        }
    }

    /// Length of the prefix read successfully so far (whole transaction blocks only).
    pub fn valid_len(&self) -> usize {
        self.offset
    }

    /// The payload length of the record at the front, once its frame and checksum are good.
    fn check_frame(&self) -> Result<usize, CorruptReason> {
        let Some((header, body)) = self.rest.split_first_chunk::<RECORD_HEADER_LEN>() else {
            return Err(CorruptReason::TruncatedHeader {
                available: self.rest.len(),
            });
        };
        let [l0, l1, l2, l3, c0, c1, c2, c3] = *header;
        let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
        let stored = u32::from_le_bytes([c0, c1, c2, c3]);
        let Some(payload) = body.get(..len) else {
            return Err(CorruptReason::TruncatedPayload {
                expected: len,
                available: body.len(),
            });
        };
        let computed = crc32c::crc32c(payload);
        if computed != stored {
            return Err(CorruptReason::ChecksumMismatch { stored, computed });
        }
        if len == 0 {
            // A zero header checks out (the CRC of nothing is 0), but no write is empty.
            return Err(CorruptReason::MalformedPayload);
        }
        Ok(len)
    }

    fn fail(&mut self, reason: CorruptReason, damage: Damage) -> CorruptTail {
        self.done = true;
        CorruptTail {
            offset: self.offset,
            file_len: self.file_len,
            reason,
            damage,
        }
    }
}

impl Iterator for RecordReader {
    type Item = Result<Command, CorruptTail>;

    /// Commands in log order. A transaction's block (MULTI, its writes, EXEC: how a shard
    /// logs the part of a MULTI/EXEC it ran) is read whole before its first command is
    /// yielded; a block the log ends in is reported at its MULTI, so the cut removes all of it
    /// (Redis's AOF loading does the same with a MULTI without EXEC).
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(command) = self.block.pop_front() {
            return Some(Ok(command));
        }
        if self.done || self.rest.is_empty() {
            return None;
        }
        match self.read_record()? {
            Ok(Logged::Write(command)) => Some(Ok(command)),
            Ok(Logged::Multi) => self.read_block(),
            Ok(Logged::Exec) => {
                // Reported at the stray EXEC itself.
                self.offset -= RECORD_HEADER_LEN + EXEC_PAYLOAD.len();
                Some(Err(self.fail(
                    CorruptReason::MisplacedTransactionMarker,
                    Damage::Corrupt,
                )))
            }
            Err(tail) => Some(Err(tail)),
        }
    }
}

/// What one record holds.
enum Logged {
    Write(Command),
    Multi,
    Exec,
}

impl RecordReader {
    /// The record at the front, consumed (`offset` moves past it). `None` at the end.
    fn read_record(&mut self) -> Option<Result<Logged, CorruptTail>> {
        if self.rest.is_empty() {
            return None;
        }
        let len = match self.check_frame() {
            Ok(len) => len,
            Err(reason) => {
                let damage = classify(&self.rest);
                return Some(Err(self.fail(reason, damage)));
            }
        };
        let mut payload = self.rest.split_to(RECORD_HEADER_LEN + len);
        payload.advance(RECORD_HEADER_LEN);
        match decode_payload(payload) {
            Ok(logged) => {
                self.offset += RECORD_HEADER_LEN + len;
                Some(Ok(logged))
            }
            // A checksummed, non-empty payload is never zeros: something wrote a bad record.
            Err(reason) => Some(Err(self.fail(reason, Damage::Corrupt))),
        }
    }

    /// After a MULTI record: read up to its EXEC, then yield the block's first command.
    /// Anything wrong inside the block is reported at the MULTI's offset.
    fn read_block(&mut self) -> Option<Result<Command, CorruptTail>> {
        let start = self.offset - MULTI_RECORD_LEN;
        let failure = loop {
            match self.read_record() {
                Some(Ok(Logged::Write(command))) => self.block.push_back(command),
                Some(Ok(Logged::Exec)) => return self.next(),
                Some(Ok(Logged::Multi)) => {
                    break (CorruptReason::MisplacedTransactionMarker, Damage::Corrupt)
                }
                Some(Err(tail)) => break (tail.reason, tail.damage),
                None => break (CorruptReason::UnterminatedTransaction, Damage::TornTail),
            }
        };
        self.block.clear();
        self.offset = start;
        let (reason, damage) = failure;
        Some(Err(self.fail(reason, damage)))
    }
}

/// How far the damage at the front of `rest` (everything from the bad record to the end of
/// the image) reaches; see [`Damage`].
///
/// Trailing zeros count as never written. The damage is a torn tail when what was written
/// of it ends inside the bad record, and what was written of that record could be the start
/// of a request. A record that lies whole in the written part is corrupt (a whole record
/// always ends in `\r\n`, so it is never mistaken for zeros), and so is a "prefix" that
/// already holds a complete request: its length field is wrong and records may follow it.
fn classify(rest: &[u8]) -> Damage {
    let written = rest.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let Some(&[l0, l1, l2, l3, ..]) = rest[..written].first_chunk::<RECORD_HEADER_LEN>() else {
        // Nothing, or part of a header, before the zeros or the end.
        return Damage::TornTail;
    };
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
    if RECORD_HEADER_LEN + len <= written {
        return Damage::Corrupt;
    }
    if could_start_request(&rest[RECORD_HEADER_LEN..written], len) {
        Damage::TornTail
    } else {
        Damage::Corrupt
    }
}

/// Whether `bytes` could be the first bytes of a `len`-byte request payload.
fn could_start_request(bytes: &[u8], len: usize) -> bool {
    if bytes.is_empty() {
        return true;
    }
    if bytes[0] != b'*' {
        return false;
    }
    let mut buffer = BytesMut::from(bytes);
    matches!(
        RequestParser::new(limits_for(len)).parse(&mut buffer),
        Ok(None)
    )
}

/// Parser limits that admit anything a payload of `len` bytes can hold.
fn limits_for(len: usize) -> ParserLimits {
    ParserLimits {
        max_bulk_len: len,
        max_array_len: len,
        ..ParserLimits::default()
    }
}

/// The MULTI record's length: payload `*1\r\n$5\r\nMULTI\r\n` and its header.
const MULTI_RECORD_LEN: usize = RECORD_HEADER_LEN + MULTI_PAYLOAD.len();
/// The payloads that open and close a transaction's block in the log.
pub(crate) const MULTI_PAYLOAD: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
pub(crate) const EXEC_PAYLOAD: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

fn decode_payload(mut payload: BytesMut) -> Result<Logged, CorruptReason> {
    if payload == MULTI_PAYLOAD {
        return Ok(Logged::Multi);
    }
    if payload == EXEC_PAYLOAD {
        return Ok(Logged::Exec);
    }
    // Only the multibulk form is ever logged; an inline line here means garbage.
    if payload.first() != Some(&b'*') {
        return Err(CorruptReason::MalformedPayload);
    }
    let args = match RequestParser::new(limits_for(payload.len())).parse(&mut payload) {
        Ok(Some(args)) if payload.is_empty() => args,
        _ => return Err(CorruptReason::MalformedPayload),
    };
    let command = Command::parse(args).map_err(|error| CorruptReason::InvalidCommand {
        detail: error.to_string(),
    })?;
    if !command.is_write() {
        return Err(CorruptReason::InvalidCommand {
            detail: format!("'{}' is not a write", command.name()),
        });
    }
    Ok(Logged::Write(command))
}
