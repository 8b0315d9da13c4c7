//! Hashes: HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS, HDEL, HEXISTS, HLEN,
//! HINCRBY, HINCRBYFLOAT, HSTRLEN, HRANDFIELD, HSCAN (Redis 7.0's t_hash.c).

use bytes::Bytes;

use super::args::{float, format_human, int, is, parse_float};
use super::{scan, Cx};
use crate::change::ChangeSink;
use crate::command::{CommandError, TypedOp as Op};
use crate::number::{format_i64, parse_i64};
use crate::reply::{Bulks, Reply};
use crate::store::compact::CompactBytes;
use crate::store::value::{Hash, Value, ValueType};

const HASH: ValueType = ValueType::Hash;

fn hash(value: &mut Value) -> &mut Hash {
    match value {
        Value::Hash(hash) => hash,
        _ => unreachable!("checked hash"),
    }
}

fn hash_ref(value: Option<&Value>) -> Option<&Hash> {
    match value {
        Some(Value::Hash(hash)) => Some(hash),
        _ => None,
    }
}

fn own(arg: &Bytes) -> CompactBytes {
    CompactBytes::new(arg)
}

impl<S: ChangeSink> Cx<'_, S> {
    pub fn hset(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let added = self
            .store
            .update(&a[0], HASH, true, self.now, self.sink, |value| {
                let hash = hash(value);
                a[1..]
                    .chunks_exact(2)
                    .filter(|pair| hash.insert(own(&pair[0]), own(&pair[1])))
                    .count()
            })?
            .unwrap_or(0);
        self.log("hset", a);
        self.event("hset", &a[0]);
        Ok(match self.op {
            Op::HMSet => Reply::ok(),
            _ => Reply::Integer(added as i64),
        })
    }

    pub fn hsetnx(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let added = self
            .store
            .update(&a[0], HASH, true, self.now, self.sink, |value| {
                let hash = hash(value);
                !hash.map.contains_key(&a[1][..]) && hash.insert(own(&a[1]), own(&a[2]))
            })?
            .unwrap_or(false);
        if added {
            self.log("hset", a);
            self.event("hset", &a[0]);
        }
        Ok(Reply::Integer(i64::from(added)))
    }

    pub fn hget(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        let field =
            hash_ref(value).and_then(|hash| hash.map.get(&a[1][..]).map(CompactBytes::to_bytes));
        Ok(Reply::bulk_or_null(field))
    }

    pub fn hmget(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        let hash = hash_ref(value);
        Ok(Reply::Array(
            a[1..]
                .iter()
                .map(|field| {
                    Reply::bulk_or_null(
                        hash.and_then(|hash| hash.map.get(&field[..]).map(CompactBytes::to_bytes)),
                    )
                })
                .collect(),
        ))
    }

    /// HGETALL, HKEYS, HVALS.
    pub fn hgetall(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let op = self.op;
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        let payload = value.map_or(0, Value::payload_len);
        let Some(hash) = hash_ref(value) else {
            return Ok(Reply::Array(Vec::new()));
        };
        // Written as RESP straight from the hash (`reply/bulks.rs`).
        let per_field = if op == Op::HGetAll { 2 } else { 1 };
        let mut items = Bulks::builder(hash.map.len() * per_field, payload);
        for (field, value) in hash.map.iter() {
            if op != Op::HVals {
                items.push(field);
            }
            if op != Op::HKeys {
                items.push(value);
            }
        }
        Ok(Reply::Bulks(items.finish()))
    }

    pub fn hdel(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let removed = self
            .store
            .update(&a[0], HASH, false, self.now, self.sink, |value| {
                let hash = hash(value);
                a[1..].iter().filter(|field| hash.remove(field)).count()
            })?
            .unwrap_or(0);
        if removed > 0 {
            self.log_as_written(a);
            self.event("hdel", &a[0]);
        }
        Ok(Reply::Integer(removed as i64))
    }

    pub fn hexists(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        let found = hash_ref(value).is_some_and(|hash| hash.map.contains_key(&a[1][..]));
        Ok(Reply::Integer(i64::from(found)))
    }

    pub fn hlen(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        Ok(Reply::Integer(
            hash_ref(value).map_or(0, |hash| hash.map.len()) as i64,
        ))
    }

    pub fn hstrlen(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        let len = hash_ref(value)
            .and_then(|hash| hash.map.get(&a[1][..]))
            .map_or(0, |value| value.len());
        Ok(Reply::Integer(len as i64))
    }

    pub fn hincrby(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let delta = int(&a[2])?;
        self.check(&a[0], HASH)?;
        let current = self.field(&a[0], &a[1]);
        let current = match current {
            None => 0,
            Some(text) => parse_i64(&text)
                .ok_or_else(|| CommandError::Text("ERR hash value is not an integer".into()))?,
        };
        let updated = current
            .checked_add(delta)
            .ok_or(CommandError::IncrementOverflow)?;
        self.set_field(a, format_i64(updated))?;
        self.event("hincrby", &a[0]);
        Ok(Reply::Integer(updated))
    }

    pub fn hincrbyfloat(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let delta = float(&a[2])?;
        if delta.is_infinite() {
            return Err(CommandError::Text("ERR value is NaN or Infinity".into()));
        }
        self.check(&a[0], HASH)?;
        let current = match self.field(&a[0], &a[1]) {
            None => 0.0,
            Some(text) => parse_float(&text)
                .ok_or_else(|| CommandError::Text("ERR hash value is not a float".into()))?,
        };
        let updated = current + delta;
        if !updated.is_finite() {
            return Err(CommandError::Text(
                "ERR increment would produce NaN or Infinity".into(),
            ));
        }
        let text = format_human(updated);
        self.set_field(a, text.clone())?;
        self.event("hincrbyfloat", &a[0]);
        Ok(Reply::Bulk(text))
    }

    fn field(&mut self, key: &[u8], field: &[u8]) -> Option<Bytes> {
        let value = self.store.lookup(key, self.now, self.sink);
        hash_ref(value).and_then(|hash| hash.map.get(field).map(CompactBytes::to_bytes))
    }

    /// Stores the result of an increment, logged as the HSET of that result.
    fn set_field(&mut self, a: &[Bytes], result: Bytes) -> Result<(), CommandError> {
        self.store
            .update(&a[0], HASH, true, self.now, self.sink, |value| {
                hash(value).insert(own(&a[1]), own(&result));
            })?;
        self.log("hset", &[a[0].clone(), a[1].clone(), result]);
        Ok(())
    }

    pub fn hrandfield(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let count = a.get(1).map(|n| random_count(n)).transpose()?;
        let with_values = match a.get(2) {
            None => false,
            Some(option) if is(option, "withvalues") && a.len() == 3 => true,
            Some(_) => return Err(CommandError::Syntax),
        };
        if with_values && count.is_some_and(|n| !(-i64::MAX / 2..=i64::MAX / 2).contains(&n)) {
            // Two items per pick.
            return Err(CommandError::Text("ERR value is out of range".into()));
        }
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        let Some(hash) = hash_ref(value) else {
            return Ok(match count {
                None => Reply::NullBulk,
                Some(_) => Reply::Array(Vec::new()),
            });
        };
        let Some(count) = count else {
            let (field, _) = hash.map.random().expect("non-empty");
            return Ok(Reply::Bulk(field.to_bytes()));
        };
        let mut items = Vec::new();
        let push = |(field, value): (&CompactBytes, &CompactBytes)| {
            items.push(Reply::Bulk(field.to_bytes()));
            if with_values {
                items.push(Reply::Bulk(value.to_bytes()));
            }
        };
        if count < 0 {
            // Picks that may repeat: each one independent, no walk of the hash.
            let picks = count.unsigned_abs().min(1 << 20);
            (0..picks).filter_map(|_| hash.map.random()).for_each(push);
        } else {
            // Distinct fields: by position in a list of them (a large hash has no dense one).
            let fields: Vec<_> = hash.map.iter().collect();
            let picks = random_indexes(fields.len(), count);
            picks.into_iter().map(|index| fields[index]).for_each(push);
        }
        Ok(Reply::Array(items))
    }

    pub fn hscan(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let scan = scan::parse(a)?;
        let value = self.store.view(&a[0], HASH, self.now, self.sink)?;
        let Some(hash) = hash_ref(value) else {
            return Ok(scan::reply(0, Vec::new()));
        };
        let mut items = Vec::new();
        let next = scan.walk(hash.map.positions(), |index| {
            if let Some((field, value)) = hash.map.at(index) {
                if scan.matches(field) {
                    items.push(Reply::Bulk(field.to_bytes()));
                    items.push(Reply::Bulk(value.to_bytes()));
                }
            }
        });
        Ok(scan::reply(next, items))
    }
}

/// HRANDFIELD / SRANDMEMBER / ZRANDMEMBER's count, in Redis's range (`LONG_MIN` is out: its
/// magnitude is not a count).
pub(super) fn random_count(arg: &[u8]) -> Result<i64, CommandError> {
    match int(arg)? {
        i64::MIN => Err(CommandError::Text(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807"
                .into(),
        )),
        n => Ok(n),
    }
}

/// HRANDFIELD / SRANDMEMBER / ZRANDMEMBER counts: positive → distinct elements (at most
/// `len`), negative → `|count|` picks that may repeat.
pub(super) fn random_indexes(len: usize, count: i64) -> Vec<usize> {
    if len == 0 {
        return Vec::new();
    }
    if count < 0 {
        return (0..count.unsigned_abs().min(1 << 20))
            .map(|_| fastrand::usize(..len))
            .collect();
    }
    let count = (count as usize).min(len);
    let mut all: Vec<usize> = (0..len).collect();
    fastrand::shuffle(&mut all);
    all.truncate(count);
    all
}
