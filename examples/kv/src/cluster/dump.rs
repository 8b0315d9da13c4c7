//! DUMP/RESTORE payloads between corewire-kv nodes (what MIGRATE carries).
//!
//! Not Redis's RDB encoding: a value is stored as the commands that rebuild it (`SET v`,
//! `RPUSH e1 e2 ...` with the key left out), which every type the store has can produce
//! and which RESTORE replays through the normal command path, so the AOF logs a restored
//! key exactly as it logs any write. Layout:
//!
//! ```text
//! "CW" | version (1 byte) | commands: RESP arrays of bulk strings, back to back | CRC-32C (LE) of all before
//! ```
//!
//! A payload from Redis (or a damaged one) fails the version/checksum check, as Redis
//! reports a payload it cannot read.

use bytes::{Bytes, BytesMut};

use crate::resp::{self, ParserLimits, RequestParser};

const MAGIC: &[u8] = b"CW";
const VERSION: u8 = 1;
const TRAILER: usize = 4;

/// One rebuild command without its key: `[name, args...]`; the key goes after the name.
pub type KeylessCommand = Vec<Bytes>;

/// Why a payload was refused (Redis's two RESTORE errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadError {
    /// "ERR DUMP payload version or checksum are wrong"
    VersionOrChecksum,
    /// "ERR Bad data format"
    BadFormat,
}

impl PayloadError {
    pub fn message(self) -> &'static str {
        match self {
            PayloadError::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            PayloadError::BadFormat => "ERR Bad data format",
        }
    }
}

pub fn encode(commands: &[KeylessCommand]) -> Bytes {
    let mut out = BytesMut::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[VERSION]);
    for command in commands {
        resp::write_array_header(&mut out, command.len());
        for arg in command {
            resp::write_bulk(&mut out, arg);
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.freeze()
}

pub fn decode(payload: &[u8]) -> Result<Vec<KeylessCommand>, PayloadError> {
    let header = MAGIC.len() + 1;
    if payload.len() < header + TRAILER
        || &payload[..MAGIC.len()] != MAGIC
        || payload[MAGIC.len()] != VERSION
    {
        return Err(PayloadError::VersionOrChecksum);
    }
    let (body, trailer) = payload.split_at(payload.len() - TRAILER);
    let crc = u32::from_le_bytes(trailer.try_into().map_err(|_| PayloadError::BadFormat)?);
    if crc32c::crc32c(body) != crc {
        return Err(PayloadError::VersionOrChecksum);
    }
    let mut rest = BytesMut::from(&body[header..]);
    // Limits: the payload itself is already bounded by the request that carried it.
    let mut parser = RequestParser::new(ParserLimits {
        max_bulk_len: rest.len(),
        max_array_len: rest.len().max(1),
        ..ParserLimits::default()
    });
    let mut commands = Vec::new();
    while !rest.is_empty() {
        match parser.parse(&mut rest) {
            Ok(Some(command)) if !command.is_empty() => commands.push(command),
            _ => return Err(PayloadError::BadFormat),
        }
    }
    if commands.is_empty() {
        return Err(PayloadError::BadFormat);
    }
    Ok(commands)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> KeylessCommand {
        args.iter().map(|a| Bytes::from(a.to_string())).collect()
    }

    #[test]
    fn round_trips() {
        let commands = vec![cmd(&["SET", "v\r\n\0"]), cmd(&["PEXPIREAT", "1"])];
        assert_eq!(decode(&encode(&commands)), Ok(commands));
    }

    #[test]
    fn damage_and_foreign_payloads_are_refused() {
        let good = encode(&[cmd(&["SET", "v"])]);
        let mut flipped = good.to_vec();
        flipped[5] ^= 1;
        assert_eq!(decode(&flipped), Err(PayloadError::VersionOrChecksum));
        // redis-server 7.0.15's DUMP of the string "v": RDB type, value, RDB version, CRC64.
        let redis = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce";
        assert_eq!(decode(redis), Err(PayloadError::VersionOrChecksum));
        assert_eq!(decode(&encode(&[])), Err(PayloadError::BadFormat));
        let mut truncated = BytesMut::from(&b"CW\x01*2\r\n$3\r\nSET"[..]);
        let crc = crc32c::crc32c(&truncated);
        truncated.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&truncated), Err(PayloadError::BadFormat));
    }
}
