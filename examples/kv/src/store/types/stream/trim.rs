//! XADD's and XTRIM's options (`streamParseAddOrTrimArgsOrReply`) and trimming
//! (`streamTrim`): MAXLEN or MINID, exact (`=`, the default) or approximate (`~`: whole nodes
//! only, at most LIMIT entries, by default 100 nodes' worth). Sans-I/O.

use bytes::Bytes;

use super::id::{parse_id, Parse, StreamId};
use super::model::Stream;
use crate::command::CommandError;
use crate::number::parse_i64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    None,
    MaxLen(u64),
    MinId(StreamId),
}

/// The parsed options, and where the trimming argument sits (the log rewrites `~ n` into
/// `= actual` so that replay trims exactly the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddTrimArgs {
    pub strategy: Strategy,
    pub approx: bool,
    /// Entries trimmed at most (0: no limit).
    pub limit: u64,
    /// Index in the arguments (key first) of the MAXLEN/MINID value.
    pub strategy_arg: usize,
    /// XADD: the index of the ID argument, the ID if one was given (not `*`), whether its
    /// sequence was (not `ms-*`), NOMKSTREAM.
    pub id_at: usize,
    pub id: Option<StreamId>,
    pub seq_given: bool,
    pub no_mkstream: bool,
}

fn text(message: &str) -> CommandError {
    CommandError::Text(format!("ERR {message}"))
}

fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

/// Parses the options after the key (`a[0]`). `node_max_entries` sets the approximate
/// default limit; `replaying` lifts LIMIT, as Redis does for its master and AOF.
pub fn parse(
    a: &[Bytes],
    xadd: bool,
    node_max_entries: usize,
    replaying: bool,
) -> Result<AddTrimArgs, CommandError> {
    let mut args = AddTrimArgs {
        strategy: Strategy::None,
        approx: false,
        limit: 0,
        strategy_arg: 0,
        id_at: a.len(),
        id: None,
        seq_given: true,
        no_mkstream: false,
    };
    let mut limit_given = false;
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i][..];
        if xadd && opt == b"*" {
            args.id_at = i;
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if args.strategy != Strategy::None {
                return Err(text(
                    "syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            args.approx = false;
            let next = &a[i + 1][..];
            if more >= 2 && next == b"~" {
                args.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let value = &a[i + 1];
            args.strategy = if is(opt, "maxlen") {
                let n = parse_i64(value).ok_or(CommandError::NotAnInteger)?;
                if n < 0 {
                    return Err(text("The MAXLEN argument must be >= 0."));
                }
                Strategy::MaxLen(n as u64)
            } else {
                Strategy::MinId(parse_id(value, Parse::STRICT)?.0)
            };
            i += 1;
            args.strategy_arg = i;
        } else if is(opt, "limit") && more > 0 {
            let n = parse_i64(&a[i + 1]).ok_or(CommandError::NotAnInteger)?;
            if n < 0 {
                return Err(text("The LIMIT argument must be >= 0."));
            }
            args.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            args.no_mkstream = true;
        } else if xadd {
            let (id, seq_given) = parse_id(opt, Parse::XADD)?;
            args.id = Some(id);
            args.seq_given = seq_given;
            args.id_at = i;
            break;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    if args.limit > 0 && args.strategy == Strategy::None {
        return Err(text(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && args.strategy == Strategy::None {
        return Err(text(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if replaying {
        args.limit = 0;
    } else if limit_given {
        if !args.approx {
            return Err(text(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if args.approx {
        let limit = 100 * node_max_entries as u64;
        args.limit = match limit {
            0 => 10_000,
            n => n.min(1_000_000),
        };
    } else {
        args.limit = 0;
    }
    Ok(args)
}

/// Trims the head of `stream`; returns how many entries went. `first_id` follows.
pub fn trim(stream: &mut Stream, strategy: Strategy, approx: bool, limit: u64) -> u64 {
    if strategy == Strategy::None {
        return 0;
    }
    let mut deleted = 0u64;
    while let Some((&master, node)) = stream.nodes().iter().next() {
        let (live, last) = (node.live, node.last);
        if let Strategy::MaxLen(max) = strategy {
            if stream.len() as u64 <= max {
                break;
            }
        }
        if limit > 0 && deleted + live > limit {
            break;
        }
        let remove_node = match strategy {
            Strategy::MaxLen(max) => stream.len() as u64 - live >= max,
            Strategy::MinId(min) => last < min,
            Strategy::None => false,
        };
        if remove_node {
            deleted += stream.remove_node(master);
            continue;
        }
        if approx {
            break;
        }
        deleted += stream.delete_in_node(master, |id, len| match strategy {
            Strategy::MaxLen(max) => len as u64 <= max,
            Strategy::MinId(min) => id >= min,
            Strategy::None => true,
        });
        break;
    }
    if stream.is_empty() {
        stream.first_id = StreamId::MIN;
    } else if deleted > 0 {
        stream.refresh_first_id();
    }
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::types::stream::model::NodeLimits;

    fn args(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::from(p.to_string())).collect()
    }

    fn error(result: Result<AddTrimArgs, CommandError>) -> String {
        match result {
            Err(CommandError::Text(text)) => text,
            Err(other) => format!("{other:?}"),
            Ok(args) => panic!("parsed {args:?}"),
        }
    }

    #[test]
    fn options_in_redis_order() {
        let a = parse(
            &args(&["k", "MAXLEN", "~", "10", "*", "f", "v"]),
            true,
            100,
            false,
        )
        .unwrap();
        assert_eq!(a.strategy, Strategy::MaxLen(10));
        assert!(a.approx);
        assert_eq!(
            (a.limit, a.strategy_arg, a.id_at, a.id),
            (10_000, 3, 4, None)
        );
        let a = parse(
            &args(&["k", "NOMKSTREAM", "MINID", "5", "7-*", "f", "v"]),
            true,
            100,
            false,
        )
        .unwrap();
        assert_eq!(a.strategy, Strategy::MinId(StreamId::new(5, 0)));
        assert_eq!(
            (a.id, a.seq_given, a.no_mkstream),
            (Some(StreamId::new(7, 0)), false, true)
        );
        assert_eq!(
            error(parse(
                &args(&["k", "MAXLEN", "1", "MINID", "1"]),
                false,
                100,
                false
            )),
            "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
        );
        assert_eq!(
            error(parse(&args(&["k", "MAXLEN", "-1"]), false, 100, false)),
            "ERR The MAXLEN argument must be >= 0."
        );
        assert_eq!(
            error(parse(
                &args(&["k", "MAXLEN", "1", "LIMIT", "1"]),
                false,
                100,
                false
            )),
            "ERR syntax error, LIMIT cannot be used without the special ~ option"
        );
        assert_eq!(
            error(parse(&args(&["k", "LIMIT", "1"]), false, 100, false)),
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
        );
        assert_eq!(
            error(parse(&args(&["k"]), false, 100, false)),
            "ERR syntax error, XTRIM must be called with a trimming strategy"
        );
        assert_eq!(
            error(parse(&args(&["k", "FOO"]), false, 100, false)),
            "Syntax"
        );
        // Replay trims without LIMIT, whatever the log says.
        let a = parse(
            &args(&["k", "MAXLEN", "~", "1", "LIMIT", "5"]),
            false,
            100,
            true,
        )
        .unwrap();
        assert_eq!(a.limit, 0);
    }

    fn stream(n: u64, per_node: usize) -> Stream {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_entries: per_node,
            max_bytes: 4096,
        };
        for ms in 1..=n {
            s.append(StreamId::new(ms, 0), &[(b"f", b"v")], limits);
        }
        s
    }

    #[test]
    fn exact_and_approximate_maxlen() {
        let mut s = stream(25, 10);
        assert_eq!(trim(&mut s, Strategy::MaxLen(12), true, 0), 10);
        assert_eq!(s.len(), 15);
        assert_eq!(trim(&mut s, Strategy::MaxLen(12), false, 0), 3);
        assert_eq!(s.len(), 12);
        assert_eq!(s.first_id, StreamId::new(14, 0));
        // The partly trimmed node still counts its deleted entries.
        assert_eq!(s.node_count(), 2);
    }

    #[test]
    fn minid_and_limit() {
        let mut s = stream(30, 10);
        // LIMIT 15 allows one node of ten only.
        assert_eq!(
            trim(&mut s, Strategy::MinId(StreamId::new(25, 0)), true, 15),
            10
        );
        assert_eq!(
            trim(&mut s, Strategy::MinId(StreamId::new(25, 0)), false, 0),
            14
        );
        assert_eq!(s.first_id, StreamId::new(25, 0));
        assert_eq!(trim(&mut s, Strategy::MaxLen(0), false, 0), 6);
        assert_eq!(s.first_id, StreamId::MIN);
        assert_eq!(s.node_count(), 0);
    }
}
