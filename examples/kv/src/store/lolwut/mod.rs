//! LOLWUT [VERSION version] [arguments]: Redis 7.0's computer art. VERSION 5 draws Georg
//! Nees's "Schotter" in braille characters, VERSION 6 a skyline in terminal colours; any
//! other version (this server's own, 7, by default) is the plain "Redis ver." line. The art is
//! random, as in Redis; the reply is a verbatim string (`txt`) in RESP3.

mod canvas;
mod schotter;
mod skyline;

use bytes::Bytes;

use crate::command::CommandError;
use crate::number::parse_i64;
use crate::reply::Reply;

/// The version the art signs with (what INFO's `redis_version` says).
const VERSION: &str = crate::info::COMPATIBLE_REDIS_VERSION;

pub(in crate::store) fn lolwut(a: &[Bytes]) -> Result<Reply, CommandError> {
    let (version, args) = if a.len() >= 2 && a[0].eq_ignore_ascii_case(b"version") {
        let version = parse_i64(&a[1]).ok_or(CommandError::NotAnInteger)?;
        (Some(version), &a[2..])
    } else {
        (None, a)
    };
    let text = match version {
        Some(5) => schotter::render(&numbers(args, [66, 8, 12])?),
        Some(6) => skyline::render(&numbers(args, [80, 20, 0])?),
        _ => format!("Redis ver. {VERSION}\n"),
    };
    Ok(verbatim(&text))
}

/// Up to three integer arguments over `defaults`, in Redis's order.
fn numbers(args: &[Bytes], defaults: [i64; 3]) -> Result<[i64; 3], CommandError> {
    let mut out = defaults;
    for (slot, arg) in out.iter_mut().zip(args) {
        *slot = parse_i64(arg).ok_or(CommandError::NotAnInteger)?;
    }
    Ok(out)
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

    fn text(args: &[&str]) -> String {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
        match lolwut(&args).unwrap() {
            Reply::Dual { resp2, .. } => match *resp2 {
                Reply::Bulk(text) => String::from_utf8(text.to_vec()).unwrap(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn versions() {
        assert_eq!(text(&[]), "Redis ver. 7.0.0\n");
        assert_eq!(text(&["VERSION", "7"]), "Redis ver. 7.0.0\n");
        let reply = lolwut(&[]).unwrap();
        let Reply::Dual { resp3, .. } = reply else {
            panic!("a verbatim string");
        };
        assert_eq!(&resp3[..], b"=21\r\ntxt:Redis ver. 7.0.0\n\r\n");
        let schotter = text(&["VERSION", "5", "10", "2", "2"]);
        assert!(schotter
            .ends_with("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.0\n"));
        // 10 columns of braille (3 bytes each) per line.
        assert_eq!(schotter.lines().next().unwrap().chars().count(), 10);
        let skyline = text(&["VERSION", "6", "4", "2"]);
        assert!(skyline.contains("Redis ver. 7.0.0\n") && skyline.contains("\x1b[0;"));
        let bad = |args: &[&str]| {
            let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
            lolwut(&args)
        };
        assert_eq!(bad(&["VERSION", "x"]), Err(CommandError::NotAnInteger));
        assert_eq!(bad(&["VERSION", "5", "x"]), Err(CommandError::NotAnInteger));
    }
}
