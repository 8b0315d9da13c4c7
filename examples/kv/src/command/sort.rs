//! SORT and SORT_RO's options, parsed in Redis 7.0's order (`sortCommandGeneric`), and the
//! keys their BY and GET patterns name for an element. Shared by the store (which runs the
//! command), the key extraction (STORE's destination) and the router (patterns make a SORT
//! read keys known only while it runs).

use bytes::Bytes;

use super::CommandError;
use crate::number::parse_i64;

/// A parsed SORT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortArgs {
    pub desc: bool,
    pub alpha: bool,
    /// LIMIT offset count (count -1: to the end).
    pub limit: (i64, i64),
    pub by: Option<Bytes>,
    /// BY without `*`: no sorting at all.
    pub dont_sort: bool,
    pub gets: Vec<Bytes>,
    pub store: Option<Bytes>,
}

/// Parses `args` (after the command name: `key option...`). `read_only`: SORT_RO, which has
/// no STORE. `cluster`: BY patterns and GET are refused, as Redis refuses them in cluster mode.
pub fn parse_sort(
    args: &[Bytes],
    read_only: bool,
    cluster: bool,
) -> Result<SortArgs, CommandError> {
    let mut sort = SortArgs {
        desc: false,
        alpha: false,
        limit: (0, -1),
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let is = |arg: &[u8], name: &str| arg.eq_ignore_ascii_case(name.as_bytes());
    let mut j = 1;
    while j < args.len() {
        let left = args.len() - j - 1;
        let arg = &args[j];
        if is(arg, "asc") {
            sort.desc = false;
        } else if is(arg, "desc") {
            sort.desc = true;
        } else if is(arg, "alpha") {
            sort.alpha = true;
        } else if is(arg, "limit") && left >= 2 {
            let start = parse_i64(&args[j + 1]).ok_or(CommandError::NotAnInteger)?;
            let count = parse_i64(&args[j + 2]).ok_or(CommandError::NotAnInteger)?;
            sort.limit = (start, count);
            j += 2;
        } else if !read_only && is(arg, "store") && left >= 1 {
            sort.store = Some(args[j + 1].clone());
            j += 1;
        } else if is(arg, "by") && left >= 1 {
            let pattern = &args[j + 1];
            if !pattern.contains(&b'*') {
                sort.dont_sort = true;
            } else if cluster {
                return Err(CommandError::Text(
                    "ERR BY option of SORT denied in Cluster mode.".into(),
                ));
            }
            sort.by = Some(pattern.clone());
            j += 1;
        } else if is(arg, "get") && left >= 1 {
            if cluster {
                return Err(CommandError::Text(
                    "ERR GET option of SORT denied in Cluster mode.".into(),
                ));
            }
            sort.gets.push(args[j + 1].clone());
            j += 1;
        } else {
            return Err(CommandError::Syntax);
        }
        j += 1;
    }
    Ok(sort)
}

impl SortArgs {
    /// Whether running needs keys besides the sorted key and the destination: a BY pattern
    /// that sorts, or a GET other than `#`.
    pub fn reads_patterns(&self) -> bool {
        (self.by.is_some() && !self.dont_sort) || self.gets.iter().any(|get| &get[..] != b"#")
    }
}

impl super::KeyCommand {
    /// A SORT or SORT_RO whose BY or GET patterns read keys on any shard.
    pub fn sort_reads_patterns(&self) -> bool {
        use super::KeyOp;
        matches!(self.op, KeyOp::Sort | KeyOp::SortRo)
            && parse_sort(&self.args, self.op == KeyOp::SortRo, false)
                .is_ok_and(|sort| sort.reads_patterns())
    }
}

/// STORE's destination as Redis's `sortGetKeys` finds it (options skipped by their
/// argument counts, the last STORE wins), without validating anything else.
pub fn sort_store_key(args: &[Bytes]) -> Option<&Bytes> {
    let is = |arg: &[u8], name: &str| arg.eq_ignore_ascii_case(name.as_bytes());
    let mut found = None;
    let mut j = 1;
    while j < args.len() {
        let arg = &args[j];
        let skip = if is(arg, "limit") {
            2
        } else if is(arg, "get") || is(arg, "by") {
            1
        } else if is(arg, "store") {
            if j + 1 < args.len() {
                found = Some(&args[j + 1]);
            }
            1
        } else {
            0
        };
        j += skip + 1;
    }
    found
}

/// Where a pattern points for element `element`: `(key, hash field)`, Redis's
/// `lookupKeyByPattern` without the lookup. `None` for `#` (the element itself) and for a
/// pattern without `*` (nothing).
pub fn pattern_target(pattern: &[u8], element: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&at| at + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(at) => (&after[..at], Some(after[at + 2..].to_vec())),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(postfix);
    Some((key, field))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()
    }

    #[test]
    fn options_in_redis_order() {
        let sort = parse_sort(
            &args("k BY w_* GET # GET o_*->f LIMIT 1 2 DESC ALPHA STORE d"),
            false,
            false,
        )
        .unwrap();
        assert!(sort.desc && sort.alpha && !sort.dont_sort && sort.reads_patterns());
        assert_eq!(sort.limit, (1, 2));
        assert_eq!(sort.gets, args("# o_*->f"));
        assert_eq!(sort.store.as_deref(), Some(&b"d"[..]));
        assert_eq!(
            parse_sort(&args("k STORE d"), true, false),
            Err(CommandError::Syntax)
        );
        assert_eq!(
            parse_sort(&args("k LIMIT 1"), false, false),
            Err(CommandError::Syntax)
        );
        assert_eq!(
            parse_sort(&args("k LIMIT x 1"), false, false),
            Err(CommandError::NotAnInteger)
        );
        let nosort = parse_sort(&args("k BY nosort GET #"), false, false).unwrap();
        assert!(nosort.dont_sort && !nosort.reads_patterns());
        assert!(parse_sort(&args("k BY nosort"), false, true).is_ok());
        assert!(
            matches!(parse_sort(&args("k BY w_*"), false, true), Err(CommandError::Text(t)) if t.starts_with("ERR BY option"))
        );
        assert!(
            matches!(parse_sort(&args("k GET #"), false, true), Err(CommandError::Text(t)) if t.starts_with("ERR GET option"))
        );
    }

    #[test]
    fn store_key_and_pattern_targets() {
        assert_eq!(
            sort_store_key(&args("k GET store STORE d")).map(|k| &k[..]),
            Some(&b"d"[..])
        );
        assert_eq!(sort_store_key(&args("k LIMIT 0 1")), None);
        assert_eq!(pattern_target(b"w_*", b"3"), Some((b"w_3".to_vec(), None)));
        assert_eq!(
            pattern_target(b"h_*_x->fld", b"a"),
            Some((b"h_a_x".to_vec(), Some(b"fld".to_vec())))
        );
        assert_eq!(
            pattern_target(b"h_*->", b"a"),
            Some((b"h_a->".to_vec(), None))
        );
        assert_eq!(pattern_target(b"#", b"a"), None);
        assert_eq!(pattern_target(b"const", b"a"), None);
    }
}
