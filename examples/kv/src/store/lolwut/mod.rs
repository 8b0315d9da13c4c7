//! LOLWUT [VERSION version]: Redis 7.0 answers a version it has no art for (its own, 7, by
//! default) with the plain "Redis ver. " line, as a verbatim string (`txt`) in RESP3.

use bytes::Bytes;

use crate::command::CommandError;
use crate::number::parse_i64;
use crate::reply::Reply;

/// The version the line names (what INFO's `redis_version` says).
const VERSION: &str = crate::info::COMPATIBLE_REDIS_VERSION;

pub(in crate::store) fn lolwut(a: &[Bytes]) -> Result<Reply, CommandError> {
    if a.len() >= 2 && a[0].eq_ignore_ascii_case(b"version") {
        parse_i64(&a[1]).ok_or(CommandError::NotAnInteger)?;
    }
    let text = format!("Redis ver. {VERSION}\n");
    Ok(verbatim(&text))
}

/// A verbatim `txt` string: RESP3's `=`, a bulk string in RESP2.
fn verbatim(text: &str) -> Reply {
    let resp3 = format!("={}\r\ntxt:{text}\r\n", text.len() + 4);
    Reply::Dual {
        resp2: Box::new(Reply::Bulk(Bytes::copy_from_slice(text.as_bytes()))),
        resp3: Bytes::from(resp3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_its_version_line() {
        let reply = lolwut(&[]).unwrap();
        assert_eq!(reply, Reply::Bulk(Bytes::from("Redis ver. 7.0.0\n")));
        let Reply::Dual { resp3, .. } = reply else {
            panic!("a verbatim string");
        };
        assert_eq!(&resp3[..], b"=21\r\ntxt:Redis ver. 7.0.0\n\r\n");
        let version = |v: &str| lolwut(&[Bytes::from("VERSION"), Bytes::from(v.to_owned())]);
        assert!(version("5").is_ok());
        assert_eq!(version("x"), Err(CommandError::NotAnInteger));
    }
}
