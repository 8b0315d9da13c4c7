//! Reply encoders. Callers guarantee simple strings and errors contain no CR or LF
//! ([`crate::Reply::error`] sanitises for them).

use bytes::{BufMut, BytesMut};

pub fn write_simple(out: &mut BytesMut, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(b'+');
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

/// `message` is the full error text including its code, e.g. `ERR syntax error`.
pub fn write_error(out: &mut BytesMut, message: &[u8]) {
    out.reserve(message.len() + 3);
    out.put_u8(b'-');
    out.put_slice(message);
    out.put_slice(b"\r\n");
}

pub fn write_integer(out: &mut BytesMut, value: i64) {
    put_number_line(out, b':', value);
}

pub fn write_bulk(out: &mut BytesMut, data: &[u8]) {
    out.reserve(data.len() + 25);
    put_number_line(out, b'$', data.len() as i64);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

pub fn write_null_bulk(out: &mut BytesMut) {
    out.put_slice(b"$-1\r\n");
}

pub fn write_array_header(out: &mut BytesMut, len: usize) {
    put_number_line(out, b'*', len as i64);
}

/// `kind`, `value` in decimal and CRLF, put together on the stack and copied in once: one
/// capacity check rather than one per part, which were most of an integer reply's cost.
fn put_number_line(out: &mut BytesMut, kind: u8, value: i64) {
    // The kind, 20 digits (`i64::MIN` with its sign) and CRLF.
    let mut line = [0; 23];
    let end = line.len() - 2;
    line[end..].copy_from_slice(b"\r\n");
    let start = decimal_before(value, &mut line[..end]) - 1;
    line[start] = kind;
    out.extend_from_slice(&line[start..]);
}

pub fn write_null_array(out: &mut BytesMut) {
    out.put_slice(b"*-1\r\n");
}

/// Formats without going through `fmt`, which is noticeably slower on the reply hot path.
pub(crate) fn put_decimal(out: &mut BytesMut, value: i64) {
    out.put_slice(decimal(value, &mut [0; 20]));
}

/// `value` in decimal, written into `digits` (20 bytes hold `i64::MIN`); no allocation.
pub(crate) fn decimal(value: i64, digits: &mut [u8; 20]) -> &[u8] {
    let start = decimal_before(value, digits);
    &digits[start..]
}

/// `value` in decimal.
pub(crate) fn decimal_u64(value: u64, digits: &mut [u8; 20]) -> &[u8] {
    let start = digits_before(value, digits);
    &digits[start..]
}

/// Writes `value` in decimal at the end of `digits` (at least 20 bytes; 21 with a byte
/// before it free); returns where it starts.
fn decimal_before(value: i64, digits: &mut [u8]) -> usize {
    let mut pos = digits_before(value.unsigned_abs(), digits);
    if value < 0 {
        pos -= 1;
        digits[pos] = b'-';
    }
    pos
}

/// Every two-digit number's digits, `00` to `99`.
const PAIRS: [u8; 200] = {
    let mut pairs = [0; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// Writes `value`'s digits at the end of `digits` (at least 20 bytes); returns where they start.
/// Two digits per division: a stream ID's millisecond part has 13.
fn digits_before(value: u64, digits: &mut [u8]) -> usize {
    let mut pos = digits.len();
    let mut rest = value;
    while rest >= 100 {
        let pair = (rest % 100) as usize * 2;
        rest /= 100;
        pos -= 2;
        digits[pos..pos + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if rest >= 10 {
        let pair = rest as usize * 2;
        pos -= 2;
        digits[pos..pos + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        pos -= 1;
        digits[pos] = b'0' + rest as u8;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(f: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
        let mut out = BytesMut::new();
        f(&mut out);
        out.to_vec()
    }

    #[test]
    fn decimals_of_every_width() {
        for n in [0i64, 7, -7, 10, -10, i64::MAX, i64::MIN] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
        }
        for n in [0u64, 9, 10, u64::MAX] {
            assert_eq!(decimal_u64(n, &mut [0; 20]), n.to_string().as_bytes());
        }
        // Every width, odd and even, and the values around each power of ten.
        let mut power = 1u64;
        for _ in 0..20 {
            for n in [
                power - 1,
                power,
                power + 1,
                power.saturating_mul(7).saturating_add(3),
            ] {
                assert_eq!(decimal_u64(n, &mut [0; 20]), n.to_string().as_bytes());
                let signed = n as i64;
                assert_eq!(decimal(signed, &mut [0; 20]), signed.to_string().as_bytes());
            }
            power = power.saturating_mul(10);
        }
    }

    #[test]
    fn encodes_every_reply_kind() {
        assert_eq!(encoded(|o| write_simple(o, b"OK")), b"+OK\r\n");
        assert_eq!(
            encoded(|o| write_error(o, b"ERR syntax error")),
            b"-ERR syntax error\r\n"
        );
        assert_eq!(encoded(|o| write_integer(o, 0)), b":0\r\n");
        assert_eq!(encoded(|o| write_integer(o, -42)), b":-42\r\n");
        assert_eq!(
            encoded(|o| write_integer(o, i64::MIN)),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(
            encoded(|o| write_integer(o, i64::MAX)),
            b":9223372036854775807\r\n"
        );
        assert_eq!(encoded(|o| write_bulk(o, b"a\r\nb")), b"$4\r\na\r\nb\r\n");
        assert_eq!(encoded(|o| write_bulk(o, b"")), b"$0\r\n\r\n");
        assert_eq!(encoded(write_null_bulk), b"$-1\r\n");
        assert_eq!(encoded(|o| write_array_header(o, 3)), b"*3\r\n");
        assert_eq!(encoded(write_null_array), b"*-1\r\n");
    }
}
