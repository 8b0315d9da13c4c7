//! Sorted sets, the rest of Redis 7.0's t_zset.c: ZREMRANGEBYSCORE, ZREMRANGEBYRANK,
//! ZREMRANGEBYLEX, ZRANDMEMBER, the set algebra (ZUNION, ZINTER, ZDIFF, their STORE forms and
//! ZINTERCARD), ZMPOP and the blocking pops without their waiting (BZPOPMIN, BZPOPMAX,
//! BZMPOP: the shard blocks a request that found nothing, see `server::blocking`).
//!
//! Pops are logged as the `ZPOPMIN|ZPOPMAX key [count]` Redis propagates; the rest as written
//! (deterministic given the prior state).

use std::ops::Bound;

use bytes::Bytes;

use super::args::{format_double, int, is, parse_float};
use super::hash::{random_count, random_indexes};
use super::zset::{
    lex_bound, lex_walk, pairs_reply, pop_ends, score_bound, score_positions, text, zset, zset_ref,
    Lex,
};
use super::Cx;
use crate::change::ChangeSink;
use crate::command::{zmpop_args, CommandError, ListEnd, TypedOp as Op};
use crate::reply::Reply;
use crate::store::value::{Score, Value, ValueType, ZSet};

const ZSET: ValueType = ValueType::ZSet;

/// What a ZREMRANGEBY* command removes.
enum RemRange {
    Rank(i64, i64),
    Score(Bound<f64>, Bound<f64>),
    Lex(Lex, Lex),
}

impl RemRange {
    /// The members it selects in `zset`, in order.
    fn members(&self, zset: &ZSet) -> Vec<Bytes> {
        let member = |(_, m): &(Score, crate::store::compact::CompactBytes)| m.to_bytes();
        match self {
            RemRange::Rank(start, end) => {
                // Redis's sanitising (zremrangeGenericCommand).
                let len = zset.len() as i64;
                let mut start = if *start < 0 { len + start } else { *start };
                let mut end = if *end < 0 { len + end } else { *end };
                start = start.max(0);
                if start > end || start >= len {
                    return Vec::new();
                }
                end = end.min(len - 1);
                let n = (end - start + 1) as usize;
                zset.order
                    .iter_from(start as usize)
                    .take(n)
                    .map(member)
                    .collect()
            }
            RemRange::Score(min, max) => {
                let (lo, hi) = score_positions(zset, min, max);
                let n = hi.saturating_sub(lo);
                zset.order.iter_from(lo).take(n).map(member).collect()
            }
            RemRange::Lex(min, max) => lex_walk(zset, min, max, false).map(member).collect(),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`: a NaN sum (inf + -inf) is 0; MIN and MAX keep the
/// target when the value does not compare (NaN).
fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if value < *target {
                *target = value;
            }
        }
        Aggregate::Max => {
            if value > *target {
                *target = value;
            }
        }
    }
}

/// One input of the set algebra: a sorted set, or a set (every member scores 1), its members
/// read where they lie in the store (no copy of any until the result needs one).
struct Source<'a> {
    members: Vec<(&'a [u8], f64)>,
    weight: f64,
}

/// Members and scores by member: a source's for lookups (ZINTER and ZDIFF look the first
/// one's up in the others), ZUNION's running result.
type Index<'a> = hashbrown::HashMap<&'a [u8], f64, foldhash::fast::RandomState>;

fn index<'a>(source: &Source<'a>) -> Index<'a> {
    source.members.iter().copied().collect()
}

/// Sorts `(member, score)` pairs as a sorted set orders them.
fn in_zset_order(pairs: &mut [(&[u8], f64)]) {
    pairs.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(b.0))
    });
}

impl<S: ChangeSink> Cx<'_, S> {
    /// ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZREMRANGEBYLEX `key min max`.
    pub fn zremrange(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (range, event) = match self.op {
            Op::ZRemRangeByRank => (RemRange::Rank(int(&a[1])?, int(&a[2])?), "zremrangebyrank"),
            Op::ZRemRangeByScore => (
                RemRange::Score(score_bound(&a[1])?, score_bound(&a[2])?),
                "zremrangebyscore",
            ),
            _ => (
                RemRange::Lex(lex_bound(&a[1])?, lex_bound(&a[2])?),
                "zremrangebylex",
            ),
        };
        let removed = self
            .store
            .update(&a[0], ZSET, false, self.now, self.sink, |value| {
                let zset = zset(value);
                let members = range.members(zset);
                members.iter().filter(|m| zset.remove(m).is_some()).count()
            })?
            .unwrap_or(0);
        if removed > 0 {
            self.log_as_written(a);
            self.event(event, &a[0]);
        }
        Ok(Reply::Integer(removed as i64))
    }

    /// ZRANDMEMBER `key [count [WITHSCORES]]`: a positive count picks distinct members, a
    /// negative one `|count|` members that may repeat.
    pub fn zrandmember(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let count = a.get(1).map(|n| random_count(n)).transpose()?;
        let with_scores = match a.get(2) {
            None => false,
            Some(option) if is(option, "withscores") && a.len() == 3 => true,
            Some(_) => return Err(CommandError::Syntax),
        };
        if with_scores && count.is_some_and(|n| !(-i64::MAX / 2..=i64::MAX / 2).contains(&n)) {
            // Two items per pick.
            return Err(text("ERR value is out of range"));
        }
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let Some(zset) = zset_ref(value) else {
            return Ok(match count {
                None => Reply::NullBulk,
                Some(_) => Reply::Array(Vec::new()),
            });
        };
        let Some(count) = count else {
            let (member, _) = zset.scores.random().expect("non-empty");
            return Ok(Reply::Bulk(member.to_bytes()));
        };
        let picks: Vec<(Bytes, f64)> = if count < 0 {
            // Independent picks: no list of the members needed.
            (0..count.unsigned_abs().min(1 << 20))
                .filter_map(|_| zset.scores.random())
                .map(|(m, s)| (m.to_bytes(), *s))
                .collect()
        } else if count as u64 >= zset.len() as u64 {
            // The whole set, as Redis's iterator walks it: from the highest element down.
            (zset.order.iter().rev())
                .map(|(Score(s), m)| (m.to_bytes(), *s))
                .collect()
        } else {
            let all: Vec<_> = zset.scores.iter().collect();
            random_indexes(all.len(), count)
                .into_iter()
                .map(|i| (all[i].0.to_bytes(), *all[i].1))
                .collect()
        };
        Ok(pairs_reply(picks, with_scores))
    }

    /// ZUNION, ZINTER, ZDIFF, ZINTERCARD and ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE, as Redis's
    /// `zunionInterDiffGenericCommand`: numkeys, the sources (type-checked: sorted sets or
    /// sets), then the options.
    pub fn zsetop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (store, setop, card_only) = match self.op {
            Op::ZUnionStore => (true, SetOp::Union, false),
            Op::ZInterStore => (true, SetOp::Inter, false),
            Op::ZDiffStore => (true, SetOp::Diff, false),
            Op::ZUnion => (false, SetOp::Union, false),
            Op::ZInter => (false, SetOp::Inter, false),
            Op::ZInterCard => (false, SetOp::Inter, true),
            _ => (false, SetOp::Diff, false),
        };
        let at = usize::from(store);
        let setnum = int(&a[at])?;
        if setnum < 1 {
            return Err(CommandError::Text(format!(
                "ERR at least 1 input key is needed for '{}' command",
                self.op.name()
            )));
        }
        if setnum as u64 > (a.len() - at - 1) as u64 {
            return Err(CommandError::Syntax);
        }
        let setnum = setnum as usize;
        let keys = &a[at + 1..at + 1 + setnum];
        // Each key is looked up as Redis reads it (its expiry, its access, its type), then
        // all are borrowed at once: nothing changes the store until the result is stored.
        let mut live = Vec::with_capacity(setnum);
        for key in keys {
            live.push(match self.store.lookup(key, self.now, self.sink) {
                None => false,
                Some(Value::ZSet(_) | Value::Set(_)) => true,
                Some(_) => return Err(CommandError::WrongType),
            });
        }
        let inputs = &*self.store;
        let mut sources = Vec::with_capacity(setnum);
        for (key, live) in keys.iter().zip(live) {
            let members = match live.then(|| inputs.value_of(key)).flatten() {
                Some(Value::ZSet(z)) => z.order.iter().map(|(Score(s), m)| (&m[..], *s)).collect(),
                Some(Value::Set(s)) => s.iter().map(|m| (&m[..], 1.0)).collect(),
                _ => Vec::new(),
            };
            sources.push(Source {
                members,
                weight: 1.0,
            });
        }
        let mut how = Aggregate::Sum;
        let (mut with_scores, mut limit) = (false, 0usize);
        let mut j = at + 1 + setnum;
        while j < a.len() {
            let remaining = a.len() - j;
            let word = &a[j];
            if setop != SetOp::Diff && !card_only && remaining > setnum && is(word, "weights") {
                for (source, arg) in sources.iter_mut().zip(&a[j + 1..=j + setnum]) {
                    source.weight =
                        parse_float(arg).ok_or_else(|| text("ERR weight value is not a float"))?;
                }
                j += setnum + 1;
            } else if setop != SetOp::Diff && !card_only && remaining >= 2 && is(word, "aggregate")
            {
                how = match &a[j + 1] {
                    arg if is(arg, "sum") => Aggregate::Sum,
                    arg if is(arg, "min") => Aggregate::Min,
                    arg if is(arg, "max") => Aggregate::Max,
                    _ => return Err(CommandError::Syntax),
                };
                j += 2;
            } else if !store && !card_only && is(word, "withscores") {
                with_scores = true;
                j += 1;
            } else if card_only && remaining >= 2 && is(word, "limit") {
                let n = crate::number::parse_i64(&a[j + 1])
                    .filter(|&n| n >= 0)
                    .ok_or_else(|| text("ERR LIMIT can't be negative"))?;
                limit = n as usize;
                j += 2;
            } else {
                return Err(CommandError::Syntax);
            }
        }
        if setop != SetOp::Diff {
            // Smallest first, as Redis (a stable sort, as glibc's qsort for these sizes).
            sources.sort_by_key(|s| s.members.len());
        }
        let mut result: Vec<(&[u8], f64)> = Vec::new();
        let mut cardinality = 0usize;
        match setop {
            SetOp::Inter => {
                let (first, rest) = sources.split_first().expect("at least one source");
                let rest: Vec<(Index, f64)> = rest.iter().map(|s| (index(s), s.weight)).collect();
                for (member, score) in &first.members {
                    let mut acc = first.weight * score;
                    if acc.is_nan() {
                        acc = 0.0;
                    }
                    let everywhere = rest.iter().all(|(other, weight)| match other.get(member) {
                        Some(score) => {
                            aggregate(&mut acc, score * weight, how);
                            true
                        }
                        None => false,
                    });
                    if !everywhere {
                        continue;
                    }
                    if card_only {
                        cardinality += 1;
                        if limit > 0 && cardinality >= limit {
                            break;
                        }
                    } else {
                        result.push((*member, acc));
                    }
                }
            }
            SetOp::Union => {
                let most = sources.iter().map(|s| s.members.len()).sum();
                let mut acc = Index::with_capacity_and_hasher(most, Default::default());
                for source in &sources {
                    for &(member, score) in &source.members {
                        let mut score = source.weight * score;
                        if score.is_nan() {
                            score = 0.0;
                        }
                        match acc.entry(member) {
                            hashbrown::hash_map::Entry::Occupied(mut target) => {
                                aggregate(target.get_mut(), score, how)
                            }
                            hashbrown::hash_map::Entry::Vacant(slot) => {
                                slot.insert(score);
                            }
                        }
                    }
                }
                // The order is the sort's below.
                result = acc.into_iter().collect();
            }
            SetOp::Diff => {
                let (first, rest) = sources.split_first().expect("at least one source");
                let rest: Vec<Index> = rest.iter().map(index).collect();
                result = (first.members.iter())
                    .filter(|(m, _)| rest.iter().all(|other| !other.contains_key(m)))
                    .copied()
                    .collect();
            }
        }
        if card_only {
            return Ok(Reply::Integer(cardinality as i64));
        }
        in_zset_order(&mut result);
        if store {
            // Built while the inputs are borrowed (the destination may be one of them).
            let zset = ZSet::from_ordered(result.into_iter());
            return Ok(self.store_zset(a, zset));
        }
        let result = (result.into_iter())
            .map(|(member, score)| (Bytes::copy_from_slice(member), score))
            .collect();
        Ok(pairs_reply(result, with_scores))
    }

    /// Pops up to `count` elements of the sorted set at `key` (which holds one) from its
    /// lowest (`min`) or highest end; logged as `ZPOPMIN|ZPOPMAX key [count]`, with the
    /// events Redis sends.
    fn pop_from(
        &mut self,
        key: &Bytes,
        min: bool,
        count: Option<usize>,
    ) -> Result<Vec<(Bytes, f64)>, CommandError> {
        let n = count.unwrap_or(1);
        let popped = self
            .store
            .update(key, ZSET, false, self.now, self.sink, |value| {
                pop_ends(zset(value), n, !min)
            })?
            .unwrap_or_default();
        if !popped.is_empty() {
            let name = if min { "zpopmin" } else { "zpopmax" };
            let mut logged = vec![key.clone()];
            if count.is_some() {
                logged.push(Bytes::from(popped.len().to_string()));
            }
            self.log(name, &logged);
            self.store.notify(crate::notify::Class::Zset, name, key);
            self.store.notify_emptied(key);
        }
        Ok(popped)
    }

    /// The first of `keys` holding a sorted set (WRONGTYPE for a key of another type met
    /// first), as Redis walks them.
    fn first_zset<'k>(&mut self, keys: &'k [Bytes]) -> Result<Option<&'k Bytes>, CommandError> {
        for key in keys {
            if self.store.view(key, ZSET, self.now, self.sink)?.is_some() {
                return Ok(Some(key));
            }
        }
        Ok(None)
    }

    /// ZMPOP `numkeys key... MIN|MAX [COUNT n]`, and BZMPOP (`timeout` first) without the
    /// waiting: `[key, [[member, score]...]]` from the first non-empty sorted set, or a nil
    /// array.
    pub fn zmpop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let blocking = self.op == Op::BZMPop;
        let args = zmpop_args(if blocking { &a[1..] } else { a })?;
        if blocking {
            crate::blocking::parse_timeout(&a[0], self.now)?;
        }
        let Some(key) = self.first_zset(args.keys)?.cloned() else {
            return Ok(Reply::NullArray);
        };
        let popped = self.pop_from(&key, args.end == ListEnd::Left, Some(args.count))?;
        let pairs = popped
            .into_iter()
            .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(format_double(s))]))
            .collect();
        Ok(Reply::Array(vec![Reply::Bulk(key), Reply::Array(pairs)]))
    }

    /// BZPOPMIN / BZPOPMAX `key... timeout` without the waiting: `[key, member, score]` from
    /// the first non-empty sorted set, or a nil array.
    pub fn bzpop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (keys, timeout) = a.split_at(a.len() - 1);
        crate::blocking::parse_timeout(&timeout[0], self.now)?;
        let Some(key) = self.first_zset(keys)?.cloned() else {
            return Ok(Reply::NullArray);
        };
        let popped = self.pop_from(&key, self.op == Op::BZPopMin, None)?;
        let Some((member, score)) = popped.into_iter().next() else {
            return Ok(Reply::NullArray);
        };
        Ok(Reply::Array(vec![
            Reply::Bulk(key),
            Reply::Bulk(member),
            Reply::Double(format_double(score)),
        ]))
    }
}
