//! Lists: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LRANGE, LLEN, LINDEX, LSET, LINSERT, LREM,
//! LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP (Redis 7.0's t_list.c).

use bytes::Bytes;

use super::args::{clamp_range, int, is, optional_count};
use super::Cx;
use crate::change::ChangeSink;
use crate::command::{CommandError, ListEnd, TypedOp as Op};
use crate::reply::{Bulks, Reply};
use crate::store::value::{List, Value, ValueType};

const LIST: ValueType = ValueType::List;

fn list(value: &mut Value) -> &mut List {
    match value {
        Value::List(list) => list,
        // `Store::update` checked the type.
        _ => unreachable!("checked list"),
    }
}

fn list_ref(value: Option<&Value>) -> Option<&List> {
    match value {
        Some(Value::List(list)) => Some(list),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

fn end(arg: &[u8]) -> Result<End, CommandError> {
    if is(arg, "left") {
        Ok(End::Left)
    } else if is(arg, "right") {
        Ok(End::Right)
    } else {
        Err(CommandError::Syntax)
    }
}

fn pop_end(list: &mut List, end: End) -> Option<Bytes> {
    match end {
        End::Left => list.pop_front(),
        End::Right => list.pop_back(),
    }
}

impl<S: ChangeSink> Cx<'_, S> {
    pub fn push(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let left = matches!(self.op, Op::LPush | Op::LPushX);
        let create = matches!(self.op, Op::LPush | Op::RPush);
        let pushed = self
            .store
            .update(&a[0], LIST, create, self.now, self.sink, |value| {
                let list = list(value);
                for item in &a[1..] {
                    if left {
                        list.push_front(item);
                    } else {
                        list.push_back(item);
                    }
                }
                list.len()
            })?;
        match pushed {
            None => Ok(Reply::Integer(0)),
            Some(len) => {
                self.log_as_written(a);
                self.event(if left { "lpush" } else { "rpush" }, &a[0]);
                Ok(Reply::Integer(len as i64))
            }
        }
    }

    pub fn pop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let at = if self.op == Op::LPop {
            End::Left
        } else {
            End::Right
        };
        // LPOP key [count]: more is Redis's arity error, not a syntax error.
        if a.len() > 2 {
            return Err(CommandError::WrongArity {
                command: self.op.name(),
            });
        }
        let count = optional_count(a, 1)?;
        let popped = self
            .store
            .update(&a[0], LIST, false, self.now, self.sink, |value| {
                let list = list(value);
                let n = count.unwrap_or(1).min(list.len());
                (0..n).filter_map(|_| pop_end(list, at)).collect::<Vec<_>>()
            })?;
        let Some(popped) = popped else {
            return Ok(match count {
                Some(_) => Reply::NullArray,
                None => Reply::NullBulk,
            });
        };
        if !popped.is_empty() {
            let logged = [a[0].clone(), Bytes::from(popped.len().to_string())];
            self.log(self.op.name(), &logged);
            self.event(self.op.name(), &a[0]);
        }
        Ok(match count {
            Some(_) => Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
            None => Reply::bulk_or_null(popped.into_iter().next()),
        })
    }

    /// BLPOP / BRPOP `key... timeout` without the waiting (Redis's order: the timeout, then
    /// each key in turn; a key of another type fails, the first non-empty list is popped):
    /// `[key, item]`, or a nil array when every list is empty. The shard blocks the request
    /// on a nil (see `server::blocking`); inside MULTI it is the reply, as in Redis. Logged
    /// as the plain pop Redis propagates.
    pub fn blocking_pop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (keys, timeout) = a.split_at(a.len() - 1);
        crate::blocking::parse_timeout(&timeout[0], self.now)?;
        let (at, name) = if self.op == Op::BLPop {
            (End::Left, "lpop")
        } else {
            (End::Right, "rpop")
        };
        for key in keys {
            let value = self.store.view(key, LIST, self.now, self.sink)?;
            if list_ref(value).is_none() {
                continue;
            }
            let item = self
                .store
                .update(key, LIST, false, self.now, self.sink, |value| {
                    pop_end(list(value), at)
                })?;
            if let Some(Some(item)) = item {
                self.log(name, std::slice::from_ref(key));
                self.event(name, key);
                return Ok(Reply::Array(vec![
                    Reply::Bulk(key.clone()),
                    Reply::Bulk(item),
                ]));
            }
        }
        Ok(Reply::NullArray)
    }

    /// LMPOP `numkeys key... LEFT|RIGHT [COUNT n]`, and BLMPOP (`timeout` first) without the
    /// waiting: `[key, [item...]]` from the first non-empty list (up to COUNT items), or a nil
    /// array. Redis's order: the options, BLMPOP's timeout, then each key in turn (a key of
    /// another type fails). Logged as the `LPOP|RPOP key n` Redis propagates.
    pub fn mpop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let blocking = self.op == Op::BLMPop;
        let args = crate::command::mpop_args(if blocking { &a[1..] } else { a })?;
        if blocking {
            crate::blocking::parse_timeout(&a[0], self.now)?;
        }
        let (at, name) = match args.end {
            ListEnd::Left => (End::Left, "lpop"),
            ListEnd::Right => (End::Right, "rpop"),
        };
        for key in args.keys {
            let value = self.store.view(key, LIST, self.now, self.sink)?;
            if list_ref(value).is_none() {
                continue;
            }
            let popped = self
                .store
                .update(key, LIST, false, self.now, self.sink, |value| {
                    let list = list(value);
                    let n = args.count.min(list.len());
                    (0..n).filter_map(|_| pop_end(list, at)).collect::<Vec<_>>()
                })?
                .unwrap_or_default();
            if popped.is_empty() {
                continue;
            }
            self.log(name, &[key.clone(), Bytes::from(popped.len().to_string())]);
            self.event(name, key);
            return Ok(Reply::Array(vec![
                Reply::Bulk(key.clone()),
                Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
            ]));
        }
        Ok(Reply::NullArray)
    }

    pub fn lrange(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (start, stop) = (int(&a[1])?, int(&a[2])?);
        let value = self.store.view(&a[0], LIST, self.now, self.sink)?;
        let Some(list) = list_ref(value) else {
            return Ok(Reply::Array(Vec::new()));
        };
        let Some((from, to)) = clamp_range(start, stop, list.len()) else {
            return Ok(Reply::Array(Vec::new()));
        };
        // Written as RESP straight from the list (`reply/bulks.rs`), sized by the list's
        // average element.
        let count = to + 1 - from;
        let mut bulks = Bulks::builder(count, count * (list.bytes / list.len().max(1)));
        list.range(from, to).for_each(|item| bulks.push(item));
        Ok(Reply::Bulks(bulks.finish()))
    }

    pub fn llen(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], LIST, self.now, self.sink)?;
        Ok(Reply::Integer(list_ref(value).map_or(0, List::len) as i64))
    }

    pub fn lindex(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        // Redis looks the key up before it parses the index.
        let value = self.store.view(&a[0], LIST, self.now, self.sink)?;
        if value.is_none() {
            return Ok(Reply::NullBulk);
        }
        let index = int(&a[1])?;
        let value = self.store.view(&a[0], LIST, self.now, self.sink)?;
        let item = list_ref(value).and_then(|list| {
            let len = list.len() as i64;
            let i = if index < 0 { len + index } else { index };
            (0..len)
                .contains(&i)
                .then(|| list.get(i as usize).map(Bytes::copy_from_slice))
                .flatten()
        });
        Ok(Reply::bulk_or_null(item))
    }

    pub fn lset(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        // Redis looks the key up before it parses the index.
        if self.store.view(&a[0], LIST, self.now, self.sink)?.is_none() {
            return Err(CommandError::Text("ERR no such key".into()));
        }
        let index = int(&a[1])?;
        let done = self
            .store
            .update(&a[0], LIST, false, self.now, self.sink, |value| {
                let list = list(value);
                let len = list.len() as i64;
                let i = if index < 0 { len + index } else { index };
                if !(0..len).contains(&i) {
                    return false;
                }
                list.set(i as usize, &a[2]);
                true
            })?;
        match done {
            None => Err(CommandError::Text("ERR no such key".into())),
            Some(false) => Err(CommandError::Text("ERR index out of range".into())),
            Some(true) => {
                self.log_as_written(a);
                self.event("lset", &a[0]);
                Ok(Reply::ok())
            }
        }
    }

    pub fn linsert(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let after = if is(&a[1], "after") {
            true
        } else if is(&a[1], "before") {
            false
        } else {
            return Err(CommandError::Syntax);
        };
        let result = self
            .store
            .update(&a[0], LIST, false, self.now, self.sink, |value| {
                let list = list(value);
                let Some(at) = list.iter().position(|item| item == &a[2][..]) else {
                    return -1;
                };
                list.insert(at + usize::from(after), &a[3]);
                list.len() as i64
            })?;
        let result = result.unwrap_or(0);
        if result > 0 {
            self.log_as_written(a);
            self.event("linsert", &a[0]);
        }
        Ok(Reply::Integer(result))
    }

    pub fn lrem(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let count = int(&a[1])?;
        let removed = self
            .store
            .update(&a[0], LIST, false, self.now, self.sink, |value| {
                let list = list(value);
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let len = list.len();
                let matches = |item: &[u8]| item == &a[2][..];
                let mut positions: Vec<usize> = if count >= 0 {
                    (list.iter().enumerate())
                        .filter(|(_, item)| matches(item))
                        .map(|(i, _)| i)
                        .take(limit)
                        .collect()
                } else {
                    (list.iter().rev().enumerate())
                        .filter(|(_, item)| matches(item))
                        .map(|(i, _)| len - 1 - i)
                        .take(limit)
                        .collect()
                };
                positions.sort_unstable();
                list.remove_positions(&positions);
                positions.len()
            })?
            .unwrap_or(0);
        if removed > 0 {
            self.log_as_written(a);
            self.event("lrem", &a[0]);
        }
        Ok(Reply::Integer(removed as i64))
    }

    pub fn ltrim(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (start, stop) = (int(&a[1])?, int(&a[2])?);
        let changed = self
            .store
            .update(&a[0], LIST, false, self.now, self.sink, |value| {
                let list = list(value);
                let len = list.len();
                let range = clamp_range(start, stop, len);
                list.retain_range(range);
                list.len() != len
            })?;
        if changed == Some(true) {
            self.log_as_written(a);
        }
        // Redis sends it whenever the list exists, trimmed or not.
        if changed.is_some() {
            self.event("ltrim", &a[0]);
        }
        Ok(Reply::ok())
    }

    pub fn lpos(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let mut rank: i64 = 1;
        let mut count: Option<usize> = None;
        let mut maxlen: usize = 0;
        let mut i = 2;
        while i < a.len() {
            let option = &a[i];
            let Some(arg) = a.get(i + 1) else {
                return Err(CommandError::Syntax);
            };
            if is(option, "rank") {
                rank = int(arg)?;
                if rank == 0 {
                    return Err(CommandError::Text(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from \
                         the second ... or use negative to start from the end of the list"
                            .into(),
                    ));
                }
            } else if is(option, "count") {
                // Redis reports a non-number with the same words as a negative one.
                let n = int(arg).unwrap_or(-1);
                if n < 0 {
                    return Err(CommandError::Text("ERR COUNT can't be negative".into()));
                }
                count = Some(n as usize);
            } else if is(option, "maxlen") {
                let n = int(arg).unwrap_or(-1);
                if n < 0 {
                    return Err(CommandError::Text("ERR MAXLEN can't be negative".into()));
                }
                maxlen = n as usize;
            } else {
                return Err(CommandError::Syntax);
            }
            i += 2;
        }
        let value = self.store.view(&a[0], LIST, self.now, self.sink)?;
        let Some(list) = list_ref(value) else {
            return Ok(match count {
                Some(_) => Reply::Array(Vec::new()),
                None => Reply::NullBulk,
            });
        };
        let len = list.len();
        let scan = if maxlen == 0 { len } else { maxlen.min(len) };
        let want = match count {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => 1,
        };
        let mut skip = rank.unsigned_abs() as usize - 1;
        let mut found = Vec::new();
        // (position, element) from the end RANK starts at, up to MAXLEN of them.
        let candidates: Box<dyn Iterator<Item = (usize, &[u8])>> = if rank > 0 {
            Box::new(list.iter().enumerate().take(scan))
        } else {
            Box::new(
                list.iter()
                    .rev()
                    .enumerate()
                    .take(scan)
                    .map(|(i, item)| (len - 1 - i, item)),
            )
        };
        for (position, item) in candidates {
            if item != &a[1][..] {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(Reply::Integer(position as i64));
            if found.len() == want {
                break;
            }
        }
        Ok(match count {
            Some(_) => Reply::Array(found),
            None => found.pop().unwrap_or(Reply::NullBulk),
        })
    }

    /// LMOVE and RPOPLPUSH: both keys on this shard (the router refuses otherwise).
    /// LMOVE and RPOPLPUSH, and BLMOVE and BRPOPLPUSH without the waiting (Redis's order:
    /// the ends, then the timeout; a missing source answers nil, which the shard turns into
    /// a wait, see `server::blocking`). The blocking forms are logged as the plain move.
    pub fn lmove(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (from, to, logged) = match self.op {
            Op::RPopLPush => (End::Right, End::Left, ("rpoplpush", &a[..2])),
            Op::BRPopLPush => {
                crate::blocking::parse_timeout(&a[2], self.now)?;
                (End::Right, End::Left, ("rpoplpush", &a[..2]))
            }
            Op::BLMove => {
                let ends = (end(&a[2])?, end(&a[3])?);
                crate::blocking::parse_timeout(&a[4], self.now)?;
                (ends.0, ends.1, ("lmove", &a[..4]))
            }
            _ => (end(&a[2])?, end(&a[3])?, ("lmove", &a[..4])),
        };
        // Redis: the source first (missing: nil), then the destination's type.
        let value = self.store.view(&a[0], LIST, self.now, self.sink)?;
        if list_ref(value).is_none() {
            return Ok(Reply::NullBulk);
        }
        self.check(&a[1], LIST)?;
        let item = self
            .store
            .update(&a[0], LIST, false, self.now, self.sink, |value| {
                pop_end(list(value), from)
            })?
            .flatten();
        let Some(item) = item else {
            return Ok(Reply::NullBulk);
        };
        self.store
            .update(&a[1], LIST, true, self.now, self.sink, |value| {
                let list = list(value);
                match to {
                    End::Left => list.push_front(&item),
                    End::Right => list.push_back(&item),
                }
            })?;
        self.log(logged.0, logged.1);
        // Redis's order: the push on the destination, then the pop on the source.
        self.event(if to == End::Left { "lpush" } else { "rpush" }, &a[1]);
        self.event(if from == End::Left { "lpop" } else { "rpop" }, &a[0]);
        Ok(Reply::Bulk(item))
    }
}
