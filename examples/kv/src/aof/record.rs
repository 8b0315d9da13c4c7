use bytes::{BufMut, BytesMut};

/// Length and checksum, both `u32` little-endian.
pub const RECORD_HEADER_LEN: usize = 8;

/// The largest payload the format can hold: the one limit on what may be logged. The writer
/// never frames more ([`crate::aof::payload_bound`] lets the server refuse such a write before
/// running it), and replay reads any record up to this size whatever the server's protocol
/// limits are now or were then.
pub const MAX_PAYLOAD_LEN: u64 = u32::MAX as u64;

/// Appends one framed record. Returns `false` (appending nothing) if the payload is larger
/// than [`MAX_PAYLOAD_LEN`].
pub fn encode_record(out: &mut BytesMut, payload: &[u8]) -> bool {
    let Ok(len) = u32::try_from(payload.len()) else {
        return false;
    };
    out.reserve(RECORD_HEADER_LEN + payload.len());
    out.put_u32_le(len);
    out.put_u32_le(crc32c::crc32c(payload));
    out.put_slice(payload);
    true
}

/// Frames a payload that `write_payload` appends directly to `out`, avoiding a copy.
/// Returns the record's length, or `Err(payload length)` (with `out` unchanged) if the
/// payload is too large.
pub(crate) fn encode_record_with(
    out: &mut BytesMut,
    write_payload: impl FnOnce(&mut BytesMut),
) -> Result<usize, usize> {
    let start = out.len();
    out.put_bytes(0, RECORD_HEADER_LEN);
    write_payload(out);
    let payload = &out[start + RECORD_HEADER_LEN..];
    let Ok(len) = u32::try_from(payload.len()) else {
        let payload_len = payload.len();
        out.truncate(start);
        return Err(payload_len);
    };
    let crc = crc32c::crc32c(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(out.len() - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_encoders_agree() {
        let payload = b"*1\r\n$8\r\nFLUSHALL\r\n";
        let mut direct = BytesMut::new();
        assert!(encode_record(&mut direct, payload));
        let mut framed = BytesMut::new();
        let len = encode_record_with(&mut framed, |out| out.extend_from_slice(payload));
        assert_eq!(len, Ok(RECORD_HEADER_LEN + payload.len()));
        assert_eq!(direct, framed);
        assert_eq!(&direct[..4], &(payload.len() as u32).to_le_bytes());
        assert_eq!(&direct[4..8], &crc32c::crc32c(payload).to_le_bytes());
    }
}
