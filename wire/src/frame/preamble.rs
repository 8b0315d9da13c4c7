//! The fixed 8-byte preamble in front of every frame header.

use super::error::FrameError;

/// The two bytes every frame starts with.
pub const MAGIC: [u8; 2] = *b"CW";
/// Wire format version carried in the preamble and in the header.
pub const VERSION: u8 = 1;
/// No flags are defined yet; nonzero flags are rejected so that defining one
/// later cannot be silently misread by an old peer.
pub const FLAGS: u8 = 0;
/// Bytes in the preamble: magic, version, flags, header length (`u32` little endian).
pub const PREAMBLE_LEN: usize = 8;

/// Fails fast on a wrong magic even before the whole preamble has arrived, so a
/// peer speaking another protocol is noticed at its first bytes.
pub(crate) fn check_magic_prefix(buf: &[u8]) -> Result<(), FrameError> {
    let n = buf.len().min(MAGIC.len());
    if buf[..n] == MAGIC[..n] {
        Ok(())
    } else {
        let mut found = [0u8; 2];
        found[..n].copy_from_slice(&buf[..n]);
        Err(FrameError::BadMagic(found))
    }
}

/// Validates a complete preamble and returns the declared header length.
pub(crate) fn parse(preamble: &[u8; PREAMBLE_LEN]) -> Result<u32, FrameError> {
    check_magic_prefix(preamble)?;
    if preamble[2] != VERSION {
        return Err(FrameError::UnsupportedVersion(preamble[2]));
    }
    if preamble[3] != FLAGS {
        return Err(FrameError::UnsupportedFlags(preamble[3]));
    }
    Ok(u32::from_le_bytes([
        preamble[4],
        preamble[5],
        preamble[6],
        preamble[7],
    ]))
}

pub(crate) fn write(header_len: u32) -> [u8; PREAMBLE_LEN] {
    let len = header_len.to_le_bytes();
    [
        MAGIC[0], MAGIC[1], VERSION, FLAGS, len[0], len[1], len[2], len[3],
    ]
}
