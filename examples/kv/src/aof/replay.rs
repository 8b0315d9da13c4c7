use std::fmt;

use bytes::{Bytes, BytesMut};

use super::record::RECORD_HEADER_LEN;
use crate::command::Command;
use crate::resp::RequestParser;

/// The result of reading an AOF: every command up to the first bad record.
#[derive(Debug)]
pub struct Replay {
    pub commands: Vec<Command>,
    /// Length of the good prefix; truncate the file here before appending to it.
    pub valid_len: usize,
    pub corrupt_tail: Option<CorruptTail>,
}

/// Where the good prefix ends and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptTail {
    /// Offset of the first bad record (equal to [`Replay::valid_len`]).
    pub offset: usize,
    pub reason: CorruptReason,
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
        }
    }
}

impl fmt::Display for CorruptTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "corrupt AOF tail at offset {}: {}",
            self.offset, self.reason
        )
    }
}

impl std::error::Error for CorruptTail {}

/// Reads a whole AOF image. Bad data never panics: it ends the good prefix.
pub fn replay(data: Bytes) -> Replay {
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
#[derive(Debug)]
pub struct RecordReader {
    data: Bytes,
    offset: usize,
    done: bool,
}

impl RecordReader {
    pub fn new(data: Bytes) -> RecordReader {
        RecordReader {
            data,
            offset: 0,
            done: false,
        }
    }

    /// Length of the prefix read successfully so far.
    pub fn valid_len(&self) -> usize {
        self.offset
    }

    fn read_record(&self) -> Result<(Command, usize), CorruptReason> {
        let rest = &self.data[self.offset..];
        let Some((header, body)) = rest.split_first_chunk::<RECORD_HEADER_LEN>() else {
            return Err(CorruptReason::TruncatedHeader {
                available: rest.len(),
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
        let command = decode_payload(payload)?;
        Ok((command, RECORD_HEADER_LEN + len))
    }
}

impl Iterator for RecordReader {
    type Item = Result<Command, CorruptTail>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.offset == self.data.len() {
            return None;
        }
        match self.read_record() {
            Ok((command, record_len)) => {
                self.offset += record_len;
                Some(Ok(command))
            }
            Err(reason) => {
                self.done = true;
                Some(Err(CorruptTail {
                    offset: self.offset,
                    reason,
                }))
            }
        }
    }
}

fn decode_payload(payload: &[u8]) -> Result<Command, CorruptReason> {
    // Only the multibulk form is ever logged; an inline line here means garbage.
    if payload.first() != Some(&b'*') {
        return Err(CorruptReason::MalformedPayload);
    }
    let mut buffer = BytesMut::from(payload);
    let args = match RequestParser::default().parse(&mut buffer) {
        Ok(Some(args)) if buffer.is_empty() => args,
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
    Ok(command)
}
