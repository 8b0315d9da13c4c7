//! HELLO [protover [AUTH username password] [SETNAME clientname]] (Redis 7.0's parse order:
//! the version, then the options left to right; authentication and the name are checked by
//! the session when it runs).

use bytes::Bytes;

use super::CommandError;
use crate::number::parse_i64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// 2 or 3; `None` keeps the connection's protocol.
    pub protocol: Option<u8>,
    pub auth: Option<(Bytes, Bytes)>,
    pub setname: Option<Bytes>,
}

impl Hello {
    /// `args` are the arguments after HELLO.
    pub(crate) fn parse(args: Vec<Bytes>) -> Result<Hello, CommandError> {
        let mut args = args.into_iter();
        let protocol = match args.next() {
            None => None,
            Some(version) => match parse_i64(&version) {
                None => {
                    return Err(CommandError::Text(
                        "ERR Protocol version is not an integer or out of range".into(),
                    ))
                }
                Some(version @ 2..=3) => Some(version as u8),
                Some(_) => {
                    return Err(CommandError::Text(
                        "NOPROTO unsupported protocol version".into(),
                    ))
                }
            },
        };
        let mut hello = Hello {
            protocol,
            auth: None,
            setname: None,
        };
        let rest: Vec<Bytes> = args.collect();
        let mut i = 0;
        while i < rest.len() {
            let more = rest.len() - 1 - i;
            let option = &rest[i];
            if option.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
                hello.auth = Some((rest[i + 1].clone(), rest[i + 2].clone()));
                i += 3;
            } else if option.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
                hello.setname = Some(rest[i + 1].clone());
                i += 2;
            } else {
                return Err(CommandError::Text(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(option)
                )));
            }
        }
        Ok(hello)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(line: &str) -> Result<Hello, CommandError> {
        Hello::parse(
            line.split_whitespace()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect(),
        )
    }

    #[test]
    fn versions_and_options_parse_in_redis_order() {
        assert_eq!(hello("").unwrap().protocol, None);
        assert_eq!(hello("3").unwrap().protocol, Some(3));
        assert!(matches!(hello("x"), Err(CommandError::Text(t)) if t.contains("not an integer")));
        assert!(
            matches!(hello("4 SETNAME"), Err(CommandError::Text(t)) if t.starts_with("NOPROTO"))
        );
        let full = hello("2 AUTH default pw SETNAME me").unwrap();
        assert_eq!(full.auth, Some((Bytes::from("default"), Bytes::from("pw"))));
        assert_eq!(full.setname, Some(Bytes::from("me")));
        assert!(matches!(hello("3 AUTH u"), Err(CommandError::Text(t)) if t.contains("'AUTH'")));
    }
}
