//! The `grpc-message` trailer: UTF-8 text percent-encoded (every byte outside printable ASCII,
//! and `%` itself), as gRPC's HTTP/2 protocol document says.

/// `text` as a `grpc-message` value.
pub fn encode_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A `grpc-message` value as text. Lenient, as the protocol asks of receivers: a `%` not
/// followed by two hex digits is kept as is, and invalid UTF-8 is replaced.
pub fn decode_message(value: &[u8]) -> String {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'%' {
            if let (Some(hi), Some(lo)) = (
                value.get(i + 1).and_then(|&c| hex(c)),
                value.get(i + 2).and_then(|&c| hex(c)),
            ) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(value[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_stay_printable_ascii() {
        for text in [
            "plain text",
            "50% off",
            "naïve ünïcødé ✓",
            "line\nbreak",
            "",
        ] {
            let encoded = encode_message(text);
            assert!(encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)));
            assert_eq!(decode_message(encoded.as_bytes()), text);
        }
        assert_eq!(encode_message("a%b"), "a%25b");
    }

    #[test]
    fn malformed_escapes_are_kept() {
        assert_eq!(decode_message(b"100%"), "100%");
        assert_eq!(decode_message(b"%zz"), "%zz");
        assert_eq!(decode_message(b"%4"), "%4");
        assert_eq!(decode_message(b"%41"), "A");
    }
}
