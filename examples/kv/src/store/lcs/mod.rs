//! LCS (Redis 7.0): `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`, the longest
//! common subsequence of two strings by Redis's dynamic programming table, walked back the
//! way Redis walks it so the same matches come out in the same order.

use bytes::Bytes;

use super::Store;
use crate::change::ChangeSink;
use crate::command::CommandError;
use crate::number::parse_i64;
use crate::reply::Reply;

/// One matched range: positions in the first and second string (inclusive), and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub a: (u32, u32),
    pub b: (u32, u32),
    pub len: u32,
}

/// The LCS of `a` and `b` and, with `ranges`, its matched ranges from the end backwards
/// (those shorter than `min_len` left out).
pub fn lcs(a: &[u8], b: &[u8], ranges: bool, min_len: u64) -> (Vec<u8>, Vec<Match>) {
    let (alen, blen) = (a.len(), b.len());
    let width = blen + 1;
    let mut table = vec![0u32; (alen + 1) * width];
    for i in 1..=alen {
        for j in 1..=blen {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let total = table[alen * width + blen] as usize;
    let mut result = vec![0u8; total];
    let mut matches = Vec::new();
    let mut idx = total;
    let (mut i, mut j) = (alen, blen);
    // `None`: no range open. Otherwise (a_start, a_end, b_start, b_end).
    let mut range: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            match &mut range {
                None => range = Some((i - 1, i - 1, j - 1, j - 1)),
                Some((a_start, _, b_start, _)) if *a_start == i && *b_start == j => {
                    *a_start -= 1;
                    *b_start -= 1;
                }
                Some(_) => emit = true,
            }
            if let Some((a_start, _, b_start, _)) = range {
                if a_start == 0 || b_start == 0 {
                    emit = true;
                }
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * width + j] > table[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if emit {
            if let Some((a_start, a_end, b_start, b_end)) = range.take() {
                let len = (a_end - a_start + 1) as u32;
                if ranges && (min_len == 0 || u64::from(len) >= min_len) {
                    matches.push(Match {
                        a: (a_start as u32, a_end as u32),
                        b: (b_start as u32, b_end as u32),
                        len,
                    });
                }
            }
        }
    }
    (result, matches)
}

impl Store {
    pub(in crate::store) fn lcs_command<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let first = self.read_counted(&a[0], now, sink);
        let second = self.read_counted(&a[1], now, sink);
        let (Ok(first), Ok(second)) = (first, second) else {
            return Err(CommandError::Text(
                "ERR The specified keys must contain string values".into(),
            ));
        };
        let (first, second) = (first.unwrap_or_default(), second.unwrap_or_default());
        let (mut len, mut idx, mut with_len) = (false, false, false);
        let mut min_len = 0u64;
        let mut j = 2;
        while j < a.len() {
            let is = |name: &str| a[j].eq_ignore_ascii_case(name.as_bytes());
            if is("idx") {
                idx = true;
            } else if is("len") {
                len = true;
            } else if is("withmatchlen") {
                with_len = true;
            } else if is("minmatchlen") && j + 1 < a.len() {
                let n = parse_i64(&a[j + 1]).ok_or(CommandError::NotAnInteger)?;
                min_len = n.max(0) as u64;
                j += 1;
            } else {
                return Err(CommandError::Syntax);
            }
            j += 1;
        }
        if len && idx {
            return Err(CommandError::Text(
                "ERR If you want both the length and indexes, please just use IDX.".into(),
            ));
        }
        let cells = (first.len() as u128 + 1) * (second.len() as u128 + 1) * 4;
        if cells > self.config.max_value_len as u128 {
            return Err(CommandError::Text(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
                    .into(),
            ));
        }
        let (common, matches) = lcs(&first, &second, idx, min_len);
        if len {
            return Ok(Reply::Integer(common.len() as i64));
        }
        if !idx {
            return Ok(Reply::Bulk(Bytes::from(common)));
        }
        let pair = |(start, end): (u32, u32)| {
            Reply::Array(vec![
                Reply::Integer(i64::from(start)),
                Reply::Integer(i64::from(end)),
            ])
        };
        let matches = matches
            .into_iter()
            .map(|m| {
                let mut item = vec![pair(m.a), pair(m.b)];
                if with_len {
                    item.push(Reply::Integer(i64::from(m.len)));
                }
                Reply::Array(item)
            })
            .collect();
        Ok(Reply::Map(vec![
            Reply::Bulk(Bytes::from_static(b"matches")),
            Reply::Array(matches),
            Reply::Bulk(Bytes::from_static(b"len")),
            Reply::Integer(common.len() as i64),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redis_example() {
        let (common, matches) = lcs(b"ohmytext", b"mynewtext", true, 0);
        assert_eq!(common, b"mytext");
        assert_eq!(
            matches,
            [
                Match {
                    a: (4, 7),
                    b: (5, 8),
                    len: 4
                },
                Match {
                    a: (2, 3),
                    b: (0, 1),
                    len: 2
                },
            ]
        );
        let (_, long_only) = lcs(b"ohmytext", b"mynewtext", true, 4);
        assert_eq!(long_only.len(), 1);
        assert_eq!(lcs(b"", b"abc", true, 0), (Vec::new(), Vec::new()));
    }

    #[test]
    fn command_replies_and_errors() {
        use crate::change::NoLog;
        use crate::command::Command;
        let mut store = Store::default();
        let run = |store: &mut Store, line: &str| {
            let args = line.split(' ').map(|s| Bytes::from(s.to_owned())).collect();
            store.execute(Command::parse(args).unwrap(), 0, &mut NoLog)
        };
        run(&mut store, "MSET a ohmytext b mynewtext");
        assert_eq!(
            run(&mut store, "LCS a b"),
            Reply::Bulk(Bytes::from_static(b"mytext"))
        );
        assert_eq!(run(&mut store, "LCS a b LEN"), Reply::Integer(6));
        assert_eq!(run(&mut store, "LCS a nokey"), Reply::Bulk(Bytes::new()));
        let Reply::Map(map) = run(&mut store, "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN") else {
            panic!("IDX answers a map");
        };
        assert_eq!(map[3], Reply::Integer(6));
        assert_eq!(
            map[1],
            Reply::Array(vec![Reply::Array(vec![
                Reply::Array(vec![Reply::Integer(4), Reply::Integer(7)]),
                Reply::Array(vec![Reply::Integer(5), Reply::Integer(8)]),
                Reply::Integer(4),
            ])])
        );
        let error = |text: &str| Reply::Error(Bytes::from(text.to_owned()));
        assert_eq!(
            run(&mut store, "LCS a b LEN IDX"),
            error("ERR If you want both the length and indexes, please just use IDX.")
        );
        assert_eq!(run(&mut store, "LCS a b FOO"), error("ERR syntax error"));
        assert_eq!(
            run(&mut store, "LCS a b MINMATCHLEN"),
            error("ERR syntax error")
        );
        run(&mut store, "RPUSH l x");
        assert_eq!(
            run(&mut store, "LCS a l"),
            error("ERR The specified keys must contain string values")
        );
    }
}
