//! Inline commands (`PING\r\n`, what telnet and `redis-cli` in some modes send), split the way
//! Redis's `sdssplitargs` does so quoting behaves identically.

use bytes::Bytes;

/// Splits one inline line (without its line ending). `None` means unbalanced quotes.
///
/// Like the C original, which works on NUL-terminated strings, a NUL byte outside quotes ends
/// the line and one inside quotes is an unterminated quote.
pub(crate) fn split_inline_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while at(i) != 0 && is_c_space(at(i)) {
            i += 1;
        }
        if at(i) == 0 {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        let mut done = false;
        while !done {
            let c = at(i);
            if in_double {
                if c == b'\\' && at(i + 1) == b'x' && is_hex(at(i + 2)) && is_hex(at(i + 3)) {
                    current.push(hex_value(at(i + 2)) * 16 + hex_value(at(i + 3)));
                    i += 3;
                } else if c == b'\\' && at(i + 1) != 0 {
                    i += 1;
                    current.push(match at(i) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(i + 1) != 0 && !is_c_space(at(i + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(i + 1) == b'\'' {
                    i += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if at(i + 1) != 0 && !is_c_space(at(i + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => current.push(c),
                }
            }
            if at(i) != 0 {
                i += 1;
            }
        }
        args.push(Bytes::from(current));
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &[u8]) -> Option<Vec<Vec<u8>>> {
        split_inline_args(line).map(|args| args.into_iter().map(|a| a.to_vec()).collect())
    }

    #[test]
    fn splits_on_whitespace() {
        assert_eq!(
            split(b"  SET  key\tvalue "),
            Some(vec![b"SET".to_vec(), b"key".to_vec(), b"value".to_vec()])
        );
        assert_eq!(split(b""), Some(vec![]));
        assert_eq!(split(b"   "), Some(vec![]));
    }

    #[test]
    fn double_quotes_understand_escapes() {
        assert_eq!(
            split(br#"set k "a b\n\x41\"""#),
            Some(vec![b"set".to_vec(), b"k".to_vec(), b"a b\nA\"".to_vec()])
        );
        assert_eq!(split(br#""""#), Some(vec![b"".to_vec()]));
    }

    #[test]
    fn single_quotes_only_escape_the_quote() {
        assert_eq!(split(br"'it\'s \n'"), Some(vec![b"it's \\n".to_vec()]));
    }

    #[test]
    fn quotes_may_start_mid_token() {
        assert_eq!(split(br#"ab"c d""#), Some(vec![b"abc d".to_vec()]));
    }

    #[test]
    fn unbalanced_quotes_are_rejected() {
        assert_eq!(split(br#"get "key"#), None);
        assert_eq!(split(br"get 'key"), None);
        assert_eq!(split(br#"get "key"x"#), None);
    }

    #[test]
    fn nul_ends_the_line_like_in_c() {
        assert_eq!(
            split(b"get k\0ey"),
            Some(vec![b"get".to_vec(), b"k".to_vec()])
        );
        assert_eq!(split(b"get \"k\0\""), None);
    }
}
