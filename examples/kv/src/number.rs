//! Integers as Redis reads them (`string2ll`): strict, so that `INCR` on "01", " 1" or "+1"
//! fails exactly where Redis fails.

/// Parses a signed 64-bit decimal with no sign other than a leading `-`, no leading zeros
/// (except the number `0` itself), no whitespace, and no `-0`.
pub(crate) fn parse_i64(text: &[u8]) -> Option<i64> {
    // Redis rejects anything that cannot fit the 21-byte buffer it formats longs into.
    if text.is_empty() || text.len() >= 21 {
        return None;
    }
    if text == b"0" {
        return Some(0);
    }
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if magnitude > i64::MIN.unsigned_abs() {
            return None;
        }
        Some((magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Parses a length field (`*<n>` / `$<n>`), which may be negative (`-1` means null).
pub(crate) fn parse_length(text: &[u8]) -> Option<i64> {
    parse_i64(text)
}

pub(crate) fn format_i64(value: i64) -> bytes::Bytes {
    let mut out = bytes::BytesMut::with_capacity(20);
    crate::resp::put_decimal(&mut out, value);
    out.freeze()
}

/// Redis's memory notation (`memtoull`): bytes, or a number with b, k/kb, m/mb, g/gb (1000s /
/// 1024s), any case. For `--maxmemory` and CONFIG SET.
pub(crate) fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let units: [(&str, u64); 7] = [
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1_000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("b", 1),
    ];
    let (digits, unit) = units
        .iter()
        .find_map(|&(suffix, unit)| lower.strip_suffix(suffix).map(|d| (d, unit)))
        .unwrap_or((&lower, 1));
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_canonical_integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"7"), Some(7));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn rejects_what_redis_rejects() {
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"1.5",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"abc",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn formats_round_trip() {
        for v in [0, 1, -1, i64::MAX, i64::MIN, 1234567890] {
            assert_eq!(parse_i64(&format_i64(v)), Some(v));
        }
    }

    #[test]
    fn memory_notation() {
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("1kb"), Some(1024));
        assert_eq!(parse_memory("2M"), Some(2_000_000));
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("1tb"), None);
        assert_eq!(parse_memory("5b"), Some(5));
        assert_eq!(parse_memory("-1"), None);
    }
}
