//! Sorted sets: ZADD, ZREM, ZSCORE, ZMSCORE, ZINCRBY, ZCARD, ZCOUNT, ZLEXCOUNT, ZRANGE and its
//! older forms, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX, ZRANGESTORE,
//! ZSCAN (Redis 7.0's t_zset.c); the rest of the family is in `zset_ops.rs`.

use std::ops::Bound;

use bytes::Bytes;

use super::args::{float, format_double, int, is, optional_count, parse_float};
use super::{scan, Cx};
use crate::change::ChangeSink;
use crate::command::{CommandError, TypedOp as Op};
use crate::reply::{Bulks, Reply};
use crate::store::compact::CompactBytes;
use crate::store::value::{Score, Value, ValueType, ZSet};

const ZSET: ValueType = ValueType::ZSet;

pub(super) fn zset(value: &mut Value) -> &mut ZSet {
    match value {
        Value::ZSet(zset) => zset,
        _ => unreachable!("checked zset"),
    }
}

/// Removes up to `count` members from the low end (`max` false) or the high end, in that
/// order, with their scores: ZPOPMIN/ZPOPMAX and ZMPOP's pop.
pub(super) fn pop_ends(zset: &mut ZSet, count: usize, max: bool) -> Vec<(Bytes, f64)> {
    let mut popped = Vec::new();
    while popped.len() < count {
        let next = if max {
            zset.order.last().cloned()
        } else {
            zset.order.first().cloned()
        };
        let Some((Score(score), member)) = next else {
            break;
        };
        zset.remove(&member);
        popped.push((member.to_bytes(), score));
    }
    popped
}

pub(super) fn zset_ref(value: Option<&Value>) -> Option<&ZSet> {
    match value {
        Some(Value::ZSet(zset)) => Some(zset),
        _ => None,
    }
}

pub(super) fn own(arg: &Bytes) -> CompactBytes {
    CompactBytes::new(arg)
}

pub(super) fn text(message: &str) -> CommandError {
    CommandError::Text(message.into())
}

/// A score bound: `1.5`, `(1.5` (exclusive), `-inf`, `+inf`.
pub(super) fn score_bound(arg: &[u8]) -> Result<Bound<f64>, CommandError> {
    let error = || text("ERR min or max is not a float");
    // Redis reads bounds with a bare strtod: leading spaces pass, and an empty number is 0.
    let number = |text: &[u8]| {
        let trimmed = text.trim_ascii_start();
        if trimmed.is_empty() {
            Some(0.0)
        } else {
            parse_float(trimmed)
        }
    };
    match arg.strip_prefix(b"(") {
        Some(rest) => number(rest).map(Bound::Excluded).ok_or_else(error),
        None => number(arg).map(Bound::Included).ok_or_else(error),
    }
}

/// A lex bound: `[a` (inclusive), `(a` (exclusive), `-`, `+`.
#[derive(Clone)]
pub(super) enum Lex {
    Min,
    Max,
    In(Bytes),
    Ex(Bytes),
}

pub(super) fn lex_bound(arg: &Bytes) -> Result<Lex, CommandError> {
    match arg.first() {
        Some(b'-') if arg.len() == 1 => Ok(Lex::Min),
        Some(b'+') if arg.len() == 1 => Ok(Lex::Max),
        Some(b'[') => Ok(Lex::In(arg.slice(1..))),
        Some(b'(') => Ok(Lex::Ex(arg.slice(1..))),
        _ => Err(text("ERR min or max not valid string range item")),
    }
}

fn above_min(score: f64, min: &Bound<f64>) -> bool {
    match min {
        Bound::Included(m) => score >= *m,
        Bound::Excluded(m) => score > *m,
        Bound::Unbounded => true,
    }
}

fn below_max(score: f64, max: &Bound<f64>) -> bool {
    match max {
        Bound::Included(m) => score <= *m,
        Bound::Excluded(m) => score < *m,
        Bound::Unbounded => true,
    }
}

fn lex_above_min(member: &[u8], min: &Lex) -> bool {
    match min {
        Lex::Min => true,
        Lex::Max => false,
        Lex::In(m) => member >= &m[..],
        Lex::Ex(m) => member > &m[..],
    }
}

fn lex_below_max(member: &[u8], max: &Lex) -> bool {
    match max {
        Lex::Min => false,
        Lex::Max => true,
        Lex::In(m) => member <= &m[..],
        Lex::Ex(m) => member < &m[..],
    }
}

/// The elements of a lex range, as Redis finds them: lex ranges assume every score is equal,
/// and Redis walks (score, member) order from the first element at or above the minimum
/// while elements stay at or below the maximum (from the other end with REV). With mixed
/// scores that is not "every member in the range"; it is what Redis answers for its compact
/// encoding, and this walk reproduces it.
pub(super) fn lex_walk<'z>(
    zset: &'z ZSet,
    min: &Lex,
    max: &Lex,
    rev: bool,
) -> Box<dyn Iterator<Item = &'z (Score, CompactBytes)> + 'z> {
    let (min, max) = (min.clone(), max.clone());
    if lex_selects_nothing(zset, &min, &max) {
        return Box::new(std::iter::empty());
    }
    if let Some((lo, hi)) = lex_positions(zset, &min, &max) {
        let n = hi.saturating_sub(lo);
        return if rev {
            Box::new(zset.order.iter_back_from(hi).take(n))
        } else {
            Box::new(zset.order.iter_from(lo).take(n))
        };
    }
    if rev {
        Box::new(
            zset.order
                .iter()
                .rev()
                .skip_while(move |(_, m)| !lex_below_max(m, &max))
                .take_while(move |(_, m)| lex_above_min(m, &min)),
        )
    } else {
        Box::new(
            zset.order
                .iter()
                .skip_while(move |(_, m)| !lex_above_min(m, &min))
                .take_while(move |(_, m)| lex_below_max(m, &max)),
        )
    }
}

/// Redis's `zzlIsInLexRange`: an empty range, a last element below the minimum or a first
/// element above the maximum selects nothing.
fn lex_selects_nothing(zset: &ZSet, min: &Lex, max: &Lex) -> bool {
    let outside = match (zset.order.first(), zset.order.last()) {
        (Some((_, first)), Some((_, last))) => {
            !lex_above_min(last, min) || !lex_below_max(first, max)
        }
        _ => true,
    };
    outside || lex_range_is_empty(min, max)
}

/// What lex ranges are for: every score equal, so the members are in order and the walk's
/// ends are two binary searches, the positions [lo, hi) returned here; `None` when the scores
/// differ. Only for a range that is not empty and overlaps the set (see `lex_walk`).
fn lex_positions(zset: &ZSet, min: &Lex, max: &Lex) -> Option<(usize, usize)> {
    if zset.order.first().map(|(s, _)| s) != zset.order.last().map(|(s, _)| s) {
        return None;
    }
    let lo = (zset.order).partition_point(|(_, m)| !lex_above_min(m, min));
    let hi = (zset.order).partition_point(|(_, m)| lex_below_max(m, max));
    Some((lo, hi))
}

/// The positions [lo, hi) of the elements with scores between `min` and `max`: two binary
/// searches (the order is by score first).
pub(super) fn score_positions(zset: &ZSet, min: &Bound<f64>, max: &Bound<f64>) -> (usize, usize) {
    let lo = (zset.order).partition_point(|(Score(s), _)| !above_min(*s, min));
    let hi = (zset.order).partition_point(|(Score(s), _)| below_max(*s, max));
    (lo, hi)
}

/// Ranges that select nothing whatever the set holds (Redis's `zslIsInLexRange` test).
fn lex_range_is_empty(min: &Lex, max: &Lex) -> bool {
    let rank = |bound: &Lex| match bound {
        Lex::Min => (0, None, false),
        Lex::Max => (2, None, false),
        Lex::In(m) => (1, Some(m.clone()), false),
        Lex::Ex(m) => (1, Some(m.clone()), true),
    };
    let (min_rank, min_value, min_ex) = rank(min);
    let (max_rank, max_value, max_ex) = rank(max);
    match min_rank.cmp(&max_rank) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal if min_rank != 1 => {
            min_rank == 0 && max_rank == 0 || min_rank == 2
        }
        std::cmp::Ordering::Equal => match min_value.cmp(&max_value) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => min_ex || max_ex,
            std::cmp::Ordering::Less => false,
        },
    }
}

/// Which elements a range command selects.
enum Range {
    Rank(i64, i64),
    Score(Bound<f64>, Bound<f64>),
    Lex(Lex, Lex),
}

struct RangeQuery {
    range: Range,
    rev: bool,
    /// LIMIT offset count (count < 0: all).
    limit: Option<(i64, i64)>,
    with_scores: bool,
}

impl RangeQuery {
    /// The selected (member, score) pairs in reply order.
    fn run(&self, zset: &ZSet) -> Vec<(Bytes, f64)> {
        let order = &zset.order;
        let (offset, count) = match self.limit {
            Some((offset, _)) if offset < 0 => return Vec::new(),
            Some((offset, count)) => (
                offset as usize,
                if count < 0 {
                    usize::MAX
                } else {
                    count as usize
                },
            ),
            None => (0, usize::MAX),
        };
        let picked = |(Score(score), member): &(Score, CompactBytes)| (member.to_bytes(), *score);
        match &self.range {
            Range::Rank(start, stop) => {
                let len = zset.len() as i64;
                let start = if *start < 0 {
                    (len + start).max(0)
                } else {
                    *start
                };
                let stop = if *stop < 0 {
                    len + stop
                } else {
                    (*stop).min(len - 1)
                };
                if start > stop || start >= len {
                    return Vec::new();
                }
                let (start, n) = (start as usize, (stop - start + 1) as usize);
                // Under REV, ranks count from the highest element.
                if self.rev {
                    order
                        .iter_back_from(len as usize - start)
                        .take(n)
                        .map(picked)
                        .collect()
                } else {
                    order.iter_from(start).take(n).map(picked).collect()
                }
            }
            Range::Score(min, max) => {
                // LIMIT's offset is a position too: no walk over the skipped elements.
                let (lo, hi) = score_positions(zset, min, max);
                let n = hi.saturating_sub(lo).saturating_sub(offset).min(count);
                if n == 0 {
                    return Vec::new();
                }
                if self.rev {
                    order
                        .iter_back_from(hi - offset)
                        .take(n)
                        .map(picked)
                        .collect()
                } else {
                    order.iter_from(lo + offset).take(n).map(picked).collect()
                }
            }
            Range::Lex(min, max) => lex_walk(zset, min, max, self.rev)
                .skip(offset)
                .take(count)
                .map(picked)
                .collect(),
        }
    }
}

/// Members (and scores) written as RESP straight away (`reply/bulks.rs`).
pub(super) fn pairs_reply(pairs: Vec<(Bytes, f64)>, with_scores: bool) -> Reply {
    let per_member = if with_scores { 2 } else { 1 };
    let bytes = pairs.iter().map(|(m, _)| m.len() + 8).sum();
    let mut items = Bulks::builder(pairs.len() * per_member, bytes);
    for (member, score) in pairs {
        items.push(&member);
        if with_scores {
            items.push(&format_double(score));
        }
    }
    Reply::Bulks(items.finish())
}

impl<S: ChangeSink> Cx<'_, S> {
    pub fn zadd(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
            (false, false, false, false, false, false);
        let mut i = 1;
        while i < a.len() {
            let flag = &a[i];
            match () {
                _ if is(flag, "nx") => nx = true,
                _ if is(flag, "xx") => xx = true,
                _ if is(flag, "gt") => gt = true,
                _ if is(flag, "lt") => lt = true,
                _ if is(flag, "ch") => ch = true,
                _ if is(flag, "incr") => incr = true,
                _ => break,
            }
            i += 1;
        }
        let rest = &a[i..];
        if rest.is_empty() || !rest.len().is_multiple_of(2) {
            return Err(CommandError::Syntax);
        }
        if nx && xx {
            return Err(text(
                "ERR XX and NX options at the same time are not compatible",
            ));
        }
        if ((gt || lt) && nx) || (gt && lt) {
            return Err(text(
                "ERR GT, LT, and/or NX options at the same time are not compatible",
            ));
        }
        if incr && rest.len() > 2 {
            return Err(text(
                "ERR INCR option supports a single increment-element pair",
            ));
        }
        let mut pairs = Vec::with_capacity(rest.len() / 2);
        for pair in rest.chunks_exact(2) {
            pairs.push((float(&pair[0])?, &pair[1]));
        }
        self.check(&a[0], ZSET)?;
        let exists = self.store.lookup(&a[0], self.now, self.sink).is_some();
        if xx && !exists {
            return Ok(if incr {
                Reply::NullBulk
            } else {
                Reply::Integer(0)
            });
        }
        let outcome = self
            .store
            .update(&a[0], ZSET, true, self.now, self.sink, |value| {
                let zset = zset(value);
                let (mut added, mut changed) = (0i64, 0i64);
                let mut incr_result = None;
                for (score, member) in pairs {
                    let current = zset.scores.get(&member[..]).copied();
                    match current {
                        Some(old) => {
                            if nx {
                                continue;
                            }
                            let new = if incr { old + score } else { score };
                            if new.is_nan() {
                                return Err(text("ERR resulting score is not a number (NaN)"));
                            }
                            if (gt && new <= old) || (lt && new >= old) {
                                continue;
                            }
                            incr_result = Some(new);
                            if new != old {
                                zset.insert(own(member), new);
                                changed += 1;
                            }
                        }
                        None => {
                            if xx {
                                continue;
                            }
                            zset.insert(own(member), score);
                            incr_result = Some(score);
                            added += 1;
                        }
                    }
                }
                Ok((added, changed, incr_result))
            })?
            .unwrap_or(Ok((0, 0, None)))?;
        let (added, changed, incr_result) = outcome;
        if added + changed > 0 {
            self.log_as_written(a);
            self.event(if incr { "zincr" } else { "zadd" }, &a[0]);
        }
        Ok(if incr {
            incr_result.map_or(Reply::NullBulk, |s| Reply::Bulk(format_double(s)))
        } else {
            Reply::Integer(if ch { added + changed } else { added })
        })
    }

    pub fn zincrby(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let delta = float(&a[1])?;
        let result = self
            .store
            .update(&a[0], ZSET, true, self.now, self.sink, |value| {
                let zset = zset(value);
                let new = zset.scores.get(&a[2][..]).map_or(delta, |old| old + delta);
                if new.is_nan() {
                    return Err(text("ERR resulting score is not a number (NaN)"));
                }
                zset.insert(own(&a[2]), new);
                Ok(new)
            })?
            .unwrap_or(Ok(0.0))?;
        self.log_as_written(a);
        self.event("zincr", &a[0]);
        Ok(Reply::Bulk(format_double(result)))
    }

    pub fn zrem(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let removed = self
            .store
            .update(&a[0], ZSET, false, self.now, self.sink, |value| {
                let zset = zset(value);
                a[1..].iter().filter(|m| zset.remove(m).is_some()).count()
            })?
            .unwrap_or(0);
        if removed > 0 {
            self.log_as_written(a);
            self.event("zrem", &a[0]);
        }
        Ok(Reply::Integer(removed as i64))
    }

    pub fn zscore(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let score = zset_ref(value).and_then(|z| z.scores.get(&a[1][..]).copied());
        Ok(score.map_or(Reply::NullBulk, |s| Reply::Bulk(format_double(s))))
    }

    pub fn zmscore(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let zset = zset_ref(value);
        Ok(Reply::Array(
            a[1..]
                .iter()
                .map(|m| {
                    zset.and_then(|z| z.scores.get(&m[..]).copied())
                        .map_or(Reply::NullBulk, |s| Reply::Bulk(format_double(s)))
                })
                .collect(),
        ))
    }

    pub fn zcard(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        Ok(Reply::Integer(zset_ref(value).map_or(0, ZSet::len) as i64))
    }

    pub fn zcount(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (min, max) = (score_bound(&a[1])?, score_bound(&a[2])?);
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let count = zset_ref(value).map_or(0, |z| {
            let (lo, hi) = score_positions(z, &min, &max);
            hi.saturating_sub(lo)
        });
        Ok(Reply::Integer(count as i64))
    }

    pub fn zlexcount(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (min, max) = (lex_bound(&a[1])?, lex_bound(&a[2])?);
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let count = zset_ref(value).map_or(0, |z| {
            if lex_selects_nothing(z, &min, &max) {
                return 0;
            }
            match lex_positions(z, &min, &max) {
                Some((lo, hi)) => hi.saturating_sub(lo),
                None => lex_walk(z, &min, &max, false).count(),
            }
        });
        Ok(Reply::Integer(count as i64))
    }

    /// Parses ZRANGE's forms: `a` starts at the key; `store` for ZRANGESTORE (no WITHSCORES).
    fn range_query(&self, a: &[Bytes], store: bool) -> Result<RangeQuery, CommandError> {
        #[derive(PartialEq)]
        enum By {
            Rank,
            Score,
            Lex,
        }
        let (mut by, mut rev) = match self.op {
            Op::ZRangeByScore => (By::Score, false),
            Op::ZRevRangeByScore => (By::Score, true),
            Op::ZRangeByLex => (By::Lex, false),
            Op::ZRevRangeByLex => (By::Lex, true),
            Op::ZRevRange => (By::Rank, true),
            _ => (By::Rank, false),
        };
        let modern = matches!(self.op, Op::ZRange | Op::ZRangeStore);
        let (mut limit, mut with_scores) = (None, false);
        let mut i = 3;
        while i < a.len() {
            let option = &a[i];
            if is(option, "withscores") && !store {
                with_scores = true;
            } else if is(option, "limit") && self.op != Op::ZRevRange && i + 2 < a.len() {
                limit = Some((int(&a[i + 1])?, int(&a[i + 2])?));
                i += 2;
            } else if modern && is(option, "byscore") {
                by = By::Score;
            } else if modern && is(option, "bylex") {
                by = By::Lex;
            } else if modern && is(option, "rev") {
                rev = true;
            } else {
                return Err(CommandError::Syntax);
            }
            i += 1;
        }
        // Redis objects only to a LIMIT that limits (a count other than -1).
        if limit.is_some_and(|(_, count)| count != -1) && by == By::Rank {
            return Err(text(
                "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
            ));
        }
        if with_scores && by == By::Lex {
            return Err(text(
                "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
            ));
        }
        // With REV, BYSCORE and BYLEX take the maximum first.
        let (low, high) = if rev && by != By::Rank {
            (&a[2], &a[1])
        } else {
            (&a[1], &a[2])
        };
        let range = match by {
            By::Rank => Range::Rank(int(&a[1])?, int(&a[2])?),
            By::Score => Range::Score(score_bound(low)?, score_bound(high)?),
            By::Lex => Range::Lex(lex_bound(low)?, lex_bound(high)?),
        };
        Ok(RangeQuery {
            range,
            rev,
            limit,
            with_scores,
        })
    }

    /// ZRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZREVRANGE.
    pub fn zrange(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let query = self.range_query(a, false)?;
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let pairs = zset_ref(value).map_or_else(Vec::new, |z| query.run(z));
        Ok(pairs_reply(pairs, query.with_scores))
    }

    pub fn zrangestore(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let query = self.range_query(&a[1..], true)?;
        let value = self.store.view(&a[1], ZSET, self.now, self.sink)?;
        let pairs = zset_ref(value).map_or_else(Vec::new, |z| query.run(z));
        Ok(self.store_result(a, pairs))
    }

    /// Replaces `a[0]` with `pairs` (deleted when empty); logged as written, which replays
    /// to the same result from the same sources.
    pub(super) fn store_result(&mut self, a: &[Bytes], pairs: Vec<(Bytes, f64)>) -> Reply {
        let mut result = ZSet::default();
        for (member, score) in pairs {
            result.insert(CompactBytes::from(member), score);
        }
        self.store_zset(a, result)
    }

    /// Replaces `a[0]` with `result` (deleted when empty); logged as written.
    pub(super) fn store_zset(&mut self, a: &[Bytes], result: ZSet) -> Reply {
        let count = result.len();
        let existed = self.store.remove(&a[0]).is_some();
        if count > 0 {
            self.store.insert_new(
                CompactBytes::new(&a[0]),
                Value::ZSet(Box::new(result)),
                None,
            );
            self.event(self.op.name(), &a[0]);
        } else if existed {
            self.store
                .notify(crate::notify::Class::Generic, "del", &a[0]);
        }
        self.log_as_written(a);
        Reply::Integer(count as i64)
    }

    pub fn zrank(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let rev = self.op == Op::ZRevRank;
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let rank = zset_ref(value).and_then(|z| {
            let score = *z.scores.get(&a[1][..])?;
            let rank = z.rank(&a[1], score);
            Some(if rev { z.len() - 1 - rank } else { rank })
        });
        Ok(rank.map_or(Reply::NullBulk, |r| Reply::Integer(r as i64)))
    }

    pub fn zpop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        if a.len() > 2 {
            return Err(CommandError::Syntax);
        }
        let max = self.op == Op::ZPopMax;
        let count = optional_count(a, 1)?.unwrap_or(1);
        let popped = self
            .store
            .update(&a[0], ZSET, false, self.now, self.sink, |value| {
                pop_ends(zset(value), count, max)
            })?
            .unwrap_or_default();
        if !popped.is_empty() {
            self.log_as_written(a);
            self.event(self.op.name(), &a[0]);
        }
        Ok(pairs_reply(popped, true))
    }

    pub fn zscan(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let scan = scan::parse(a)?;
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let Some(zset) = zset_ref(value) else {
            return Ok(scan::reply(0, Vec::new()));
        };
        let mut items = Vec::new();
        let next = scan.walk(zset.scores.positions(), |index| {
            if let Some((member, score)) = zset.scores.at(index) {
                if scan.matches(member) {
                    items.push(Reply::Bulk(member.to_bytes()));
                    items.push(Reply::Bulk(format_double(*score)));
                }
            }
        });
        Ok(scan::reply(next, items))
    }
}
