//! Sets: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE,
//! SINTER, SUNION, SDIFF and their STORE forms, SINTERCARD, SSCAN (Redis 7.0's t_set.c).
//! Multi-key commands run here when all their keys are on this shard (the router refuses
//! the others).

use bytes::Bytes;

use super::args::optional_count;
use super::hash::random_indexes;
use super::{scan, Cx};
use crate::change::ChangeSink;
use crate::command::{CommandError, TypedOp as Op};
use crate::reply::Reply;
use crate::store::compact::CompactBytes;
use crate::store::value::{Set, Value, ValueType};

const SET: ValueType = ValueType::Set;

fn set(value: &mut Value) -> &mut Set {
    match value {
        Value::Set(set) => set,
        _ => unreachable!("checked set"),
    }
}

fn set_ref(value: Option<&Value>) -> Option<&Set> {
    match value {
        Some(Value::Set(set)) => Some(set),
        _ => None,
    }
}

fn own(arg: &Bytes) -> CompactBytes {
    CompactBytes::new(arg)
}

fn bulks(members: impl IntoIterator<Item = Bytes>) -> Reply {
    Reply::Array(members.into_iter().map(Reply::Bulk).collect())
}

#[derive(Clone, Copy)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

impl<S: ChangeSink> Cx<'_, S> {
    pub fn sadd(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let added = self
            .store
            .update(&a[0], SET, true, self.now, self.sink, |value| {
                let set = set(value);
                a[1..].iter().filter(|m| set.insert(own(m))).count()
            })?
            .unwrap_or(0);
        if added > 0 {
            self.log_as_written(a);
            self.event("sadd", &a[0]);
        }
        Ok(Reply::Integer(added as i64))
    }

    pub fn srem(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let removed = self
            .store
            .update(&a[0], SET, false, self.now, self.sink, |value| {
                let set = set(value);
                a[1..].iter().filter(|m| set.remove(m)).count()
            })?
            .unwrap_or(0);
        if removed > 0 {
            self.log_as_written(a);
            self.event("srem", &a[0]);
        }
        Ok(Reply::Integer(removed as i64))
    }

    pub fn smembers(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], SET, self.now, self.sink)?;
        Ok(bulks(
            set_ref(value)
                .into_iter()
                .flat_map(|s| s.iter().map(CompactBytes::to_bytes)),
        ))
    }

    pub fn sismember(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], SET, self.now, self.sink)?;
        let found = set_ref(value).is_some_and(|s| s.contains(&a[1][..]));
        Ok(Reply::Integer(i64::from(found)))
    }

    pub fn smismember(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], SET, self.now, self.sink)?;
        let set = set_ref(value);
        Ok(Reply::Array(
            a[1..]
                .iter()
                .map(|m| Reply::Integer(i64::from(set.is_some_and(|s| s.contains(&m[..])))))
                .collect(),
        ))
    }

    pub fn scard(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], SET, self.now, self.sink)?;
        Ok(Reply::Integer(set_ref(value).map_or(0, |s| s.len()) as i64))
    }

    /// Random members removed; logged as one SREM per member, so replay is exact.
    pub fn spop(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        if a.len() > 2 {
            return Err(CommandError::Syntax);
        }
        let count = optional_count(a, 1)?;
        let popped = self
            .store
            .update(&a[0], SET, false, self.now, self.sink, |value| {
                let set = set(value);
                let n = count.unwrap_or(1).min(set.len());
                (0..n)
                    .filter_map(|_| set.remove_random())
                    .map(|member| member.to_bytes())
                    .collect::<Vec<_>>()
            })?;
        let Some(popped) = popped else {
            return Ok(match count {
                Some(_) => Reply::Array(Vec::new()),
                None => Reply::NullBulk,
            });
        };
        for member in &popped {
            self.log("srem", &[a[0].clone(), member.clone()]);
        }
        if !popped.is_empty() {
            self.event("spop", &a[0]);
        }
        Ok(match count {
            Some(_) => bulks(popped),
            None => Reply::bulk_or_null(popped.into_iter().next()),
        })
    }

    pub fn srandmember(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        if a.len() > 2 {
            return Err(CommandError::Syntax);
        }
        let count = a.get(1).map(|n| super::hash::random_count(n)).transpose()?;
        let value = self.store.view(&a[0], SET, self.now, self.sink)?;
        let Some(set) = set_ref(value) else {
            return Ok(match count {
                Some(_) => Reply::Array(Vec::new()),
                None => Reply::NullBulk,
            });
        };
        // By position in a list of the members (a large set has no dense order to index).
        let all: Vec<&CompactBytes> = set.iter().collect();
        let picks = random_indexes(all.len(), count.unwrap_or(1));
        let members = picks.into_iter().map(|i| all[i].to_bytes());
        Ok(match count {
            Some(_) => bulks(members),
            None => Reply::bulk_or_null(members.into_iter().next()),
        })
    }

    pub fn smove(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (src, dst, member) = (&a[0], &a[1], &a[2]);
        let value = self.store.view(src, SET, self.now, self.sink)?;
        // Redis: a missing source answers 0 before the destination's type is looked at.
        let Some(present) = set_ref(value).map(|s| s.contains(&member[..])) else {
            return Ok(Reply::Integer(0));
        };
        self.check(dst, SET)?;
        if src == dst || !present {
            return Ok(Reply::Integer(i64::from(present)));
        }
        self.store
            .update(src, SET, false, self.now, self.sink, |v| {
                set(v).remove(member)
            })?;
        self.event("srem", src);
        let added = self
            .store
            .update(dst, SET, true, self.now, self.sink, |v| {
                set(v).insert(own(member))
            })?;
        if added.unwrap_or(true) {
            // Only a member the destination did not have is an `sadd` (Redis's SMOVE).
            self.event("sadd", dst);
            self.log_as_written(a);
        } else {
            // The destination had it: only the source changed (as Redis signals it).
            self.log("srem", &[src.clone(), member.clone()]);
        }
        Ok(Reply::Integer(1))
    }

    /// The members of SINTER / SUNION / SDIFF over `keys`, in the first set's order where
    /// it leads.
    fn algebra(&mut self, how: Algebra, keys: &[Bytes]) -> Result<Vec<CompactBytes>, CommandError> {
        let mut sets: Vec<Option<Set>> = Vec::with_capacity(keys.len());
        for key in keys {
            let value = self.store.view(key, SET, self.now, self.sink)?;
            sets.push(set_ref(value).cloned());
        }
        Ok(match how {
            Algebra::Inter => {
                if sets.iter().any(Option::is_none) {
                    return Ok(Vec::new());
                }
                let sets: Vec<Set> = sets.into_iter().flatten().collect();
                let smallest = (0..sets.len()).min_by_key(|&i| sets[i].len()).unwrap_or(0);
                sets[smallest]
                    .iter()
                    .filter(|m| sets.iter().all(|s| s.contains(m)))
                    .cloned()
                    .collect()
            }
            Algebra::Union => {
                let mut union = Set::default();
                for member in sets.iter().flatten().flat_map(|s| s.iter()) {
                    union.insert(member.clone());
                }
                union.iter().cloned().collect()
            }
            Algebra::Diff => {
                let mut rest = sets.into_iter();
                let Some(Some(first)) = rest.next() else {
                    return Ok(Vec::new());
                };
                let others: Vec<Set> = rest.flatten().collect();
                first
                    .iter()
                    .filter(|m| others.iter().all(|s| !s.contains(m)))
                    .cloned()
                    .collect()
            }
        })
    }

    fn how(&self) -> Algebra {
        match self.op {
            Op::SInter | Op::SInterStore => Algebra::Inter,
            Op::SUnion | Op::SUnionStore => Algebra::Union,
            _ => Algebra::Diff,
        }
    }

    pub fn set_algebra(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let how = self.how();
        Ok(bulks(
            self.algebra(how, a)?.iter().map(CompactBytes::to_bytes),
        ))
    }

    pub fn set_algebra_store(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let how = self.how();
        let members = self.algebra(how, &a[1..])?;
        let count = members.len();
        let existed = self.store.remove(&a[0]).is_some();
        if count > 0 {
            let mut result = Set::default();
            for member in members {
                result.insert(member);
            }
            self.store
                .insert_new(CompactBytes::new(&a[0]), Value::Set(Box::new(result)), None);
            self.event(self.op.name(), &a[0]);
        } else if existed {
            self.store
                .notify(crate::notify::Class::Generic, "del", &a[0]);
        }
        // Deterministic given the sources, which replay has in the same state.
        self.log_as_written(a);
        Ok(Reply::Integer(count as i64))
    }

    pub fn sintercard(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (numkeys, limit) = crate::command::sintercard_args(a)?;
        let members = self.algebra(Algebra::Inter, &a[1..=numkeys])?;
        let count = if limit == 0 {
            members.len()
        } else {
            members.len().min(limit)
        };
        Ok(Reply::Integer(count as i64))
    }

    pub fn sscan(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let scan = scan::parse(a)?;
        let value = self.store.view(&a[0], SET, self.now, self.sink)?;
        let Some(set) = set_ref(value) else {
            return Ok(scan::reply(0, Vec::new()));
        };
        let mut items = Vec::new();
        let next = scan.walk(set.members.positions(), |index| {
            if let Some((member, ())) = set.members.at(index) {
                if scan.matches(member) {
                    items.push(Reply::Bulk(member.to_bytes()));
                }
            }
        });
        Ok(scan::reply(next, items))
    }
}
