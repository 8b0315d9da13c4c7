//! SORT and SORT_RO on a shard's store: a port of Redis 7.0's `sortCommandGeneric` (options,
//! then the sorted key, LIMIT's clamping, the BY weights, the GET lookups, STORE). One
//! deliberate difference: a set is always sorted (ALPHA) when BY names a constant, where Redis
//! does so only for STORE and scripts and otherwise answers in its hash table's order, which
//! no other server reproduces. STORE is logged as the DEL and RPUSH of its result.
//!
//! Patterns name keys that may live on other shards; the multi-key route gathers them first
//! ([`Store::sort_pattern_keys`]).

use std::cmp::Ordering;

use bytes::Bytes;

use super::keyspace::TtlUpdate;
use super::value::{List, Value};
use super::Store;
use crate::change::{ChangeSink, WriteOp};
use crate::command::{
    parse_sort, pattern_target, Command, CommandError, KeyCommand, KeyOp, SortArgs,
};
use crate::notify::Class;
use crate::reply::Reply;

/// One element to sort and what it sorts by.
struct Item {
    element: Bytes,
    score: f64,
    by: Option<Bytes>,
}

impl Store {
    pub(in crate::store) fn run_sort<S: ChangeSink>(
        &mut self,
        op: KeyOp,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let mut sort = parse_sort(a, op == KeyOp::SortRo, self.slot_index.is_some())?;
        let Some(elements) = self.sort_source(&a[0], now, sink)? else {
            return self.sort_output(&sort, Vec::new(), 0, -1, now, sink);
        };
        let (is_set, is_list, len) = elements;
        // A set has no order of its own to keep (see the module's note).
        if sort.dont_sort && is_set {
            sort.dont_sort = false;
            sort.alpha = true;
            sort.by = None;
        }
        let len = len as i64;
        let mut start = sort.limit.0.max(0).min(len);
        let count = sort.limit.1.max(-1).min(len);
        let mut end = if count < 0 {
            len - 1
        } else {
            start + count - 1
        };
        if start >= len {
            start = len - 1;
            end = len - 2;
        }
        if end >= len {
            end = len - 1;
        }
        let items: Vec<Bytes> = if sort.dont_sort {
            // Native order (a list's, a sorted set's by score), DESC from the other end, only
            // the LIMIT range.
            let wanted = if end >= start {
                (end - start + 1) as usize
            } else {
                0
            };
            let taken = self.sort_native(&a[0], is_list, sort.desc, start.max(0) as usize, wanted);
            end -= start;
            start = 0;
            taken
        } else {
            self.sort_all(&a[0])
        };
        let mut items: Vec<Item> = items
            .into_iter()
            .map(|element| Item {
                element,
                score: 0.0,
                by: None,
            })
            .collect();
        if !sort.dont_sort {
            let mut conversion_error = false;
            for item in &mut items {
                let weight = match &sort.by {
                    Some(by) => match self.sort_lookup(by, &item.element, now, sink) {
                        Some(weight) => weight,
                        None => continue,
                    },
                    None => item.element.clone(),
                };
                if sort.alpha {
                    if sort.by.is_some() {
                        item.by = Some(weight);
                    }
                } else {
                    match strtod(&weight) {
                        Some(score) => item.score = score,
                        None => conversion_error = true,
                    }
                }
            }
            let by_pattern = sort.by.is_some();
            let compare = |x: &Item, y: &Item| -> Ordering {
                let order = if !sort.alpha {
                    x.score
                        .partial_cmp(&y.score)
                        .unwrap_or(Ordering::Equal)
                        .then_with(|| x.element.cmp(&y.element))
                } else if by_pattern {
                    match (&x.by, &y.by) {
                        (None, None) => Ordering::Equal,
                        (None, Some(_)) => Ordering::Less,
                        (Some(_), None) => Ordering::Greater,
                        (Some(p), Some(q)) => p.cmp(q),
                    }
                } else {
                    x.element.cmp(&y.element)
                };
                if sort.desc {
                    order.reverse()
                } else {
                    order
                }
            };
            items.sort_by(compare);
            if conversion_error {
                return Err(CommandError::Text(
                    "ERR One or more scores can't be converted into double".into(),
                ));
            }
        }
        let elements = items.into_iter().map(|item| item.element).collect();
        self.sort_output(&sort, elements, start, end, now, sink)
    }

    /// The sorted key's type and length: `(is set, is list, len)`, `None` when missing;
    /// WRONGTYPE for a string or hash.
    fn sort_source<S: ChangeSink>(
        &mut self,
        key: &[u8],
        now: u64,
        sink: &mut S,
    ) -> Result<Option<(bool, bool, usize)>, CommandError> {
        let value = self.lookup(key, now, sink).map(|value| match value {
            Value::Set(set) => Ok((true, false, set.len())),
            Value::List(list) => Ok((false, true, list.len())),
            Value::ZSet(zset) => Ok((false, false, zset.len())),
            _ => Err(CommandError::WrongType),
        });
        self.count_lookup(key, value.is_some());
        value.transpose()
    }

    /// `wanted` elements of a list or sorted set in their order from `start` (from the end
    /// with `desc`).
    fn sort_native(
        &self,
        key: &[u8],
        is_list: bool,
        desc: bool,
        start: usize,
        wanted: usize,
    ) -> Vec<Bytes> {
        let Some(entry) = self.map.get(key) else {
            return Vec::new();
        };
        let copy = |item: &[u8]| Bytes::copy_from_slice(item);
        match &entry.value {
            Value::List(list) if is_list => {
                if desc {
                    list.iter()
                        .rev()
                        .skip(start)
                        .take(wanted)
                        .map(copy)
                        .collect()
                } else {
                    list.iter().skip(start).take(wanted).map(copy).collect()
                }
            }
            Value::ZSet(zset) => {
                let members = zset.order.iter().map(|(_, member)| member.to_bytes());
                if desc {
                    zset.order
                        .iter()
                        .rev()
                        .skip(start)
                        .take(wanted)
                        .map(|(_, member)| member.to_bytes())
                        .collect()
                } else {
                    members.skip(start).take(wanted).collect()
                }
            }
            _ => Vec::new(),
        }
    }

    /// Every element of the list, set or sorted set at `key`.
    fn sort_all(&self, key: &[u8]) -> Vec<Bytes> {
        let Some(entry) = self.map.get(key) else {
            return Vec::new();
        };
        match &entry.value {
            Value::List(list) => list.iter().map(Bytes::copy_from_slice).collect(),
            Value::Set(set) => set.iter().map(|m| m.to_bytes()).collect(),
            Value::ZSet(zset) => zset.order.iter().map(|(_, m)| m.to_bytes()).collect(),
            _ => Vec::new(),
        }
    }

    /// What a BY or GET pattern yields for `element` (Redis's `lookupKeyByPattern`): the
    /// element for `#`, a string key's value, a hash field's value, or nothing.
    fn sort_lookup<S: ChangeSink>(
        &mut self,
        pattern: &[u8],
        element: &Bytes,
        now: u64,
        sink: &mut S,
    ) -> Option<Bytes> {
        if pattern == b"#" {
            return Some(element.clone());
        }
        let (key, field) = pattern_target(pattern, element)?;
        let found = self
            .lookup(&key, now, sink)
            .map(|value| match (value, &field) {
                (Value::Str(s), None) => Some(s.to_bytes()),
                (Value::Hash(hash), Some(field)) => hash.map.get(field).map(|v| v.to_bytes()),
                _ => None,
            });
        self.count_lookup(&key, found.is_some());
        found.flatten()
    }

    /// The reply (or STORE) for the sorted `elements`' positions `start..=end`.
    fn sort_output<S: ChangeSink>(
        &mut self,
        sort: &SortArgs,
        elements: Vec<Bytes>,
        start: i64,
        end: i64,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let mut out: Vec<Option<Bytes>> = Vec::new();
        if end >= start {
            for element in &elements[start as usize..=end as usize] {
                if sort.gets.is_empty() {
                    out.push(Some(element.clone()));
                }
                for get in &sort.gets {
                    out.push(self.sort_lookup(get, element, now, sink));
                }
            }
        }
        let Some(dest) = &sort.store else {
            self.changes = Some(0);
            return Ok(Reply::Array(
                out.into_iter().map(Reply::bulk_or_null).collect(),
            ));
        };
        let len = out.len() as i64;
        if out.is_empty() {
            let live = self.is_live(dest, now, sink);
            if live {
                self.del(std::slice::from_ref(dest), now, sink);
            }
            self.changes = Some(u64::from(live));
            return Ok(Reply::Integer(0));
        }
        self.changes = Some(len as u64);
        let items: Vec<Bytes> = out.into_iter().map(Option::unwrap_or_default).collect();
        let mut list = List::default();
        for item in &items {
            list.push_back(item);
        }
        sink.record(WriteOp::Del(std::slice::from_ref(dest)));
        sink.record(WriteOp::Command {
            name: "rpush",
            key: dest,
            args: &items,
        });
        self.upsert_value(dest, Value::List(Box::new(list)), TtlUpdate::Clear);
        self.notify(Class::List, "sortstore", dest);
        Ok(Reply::Integer(len))
    }

    /// The keys a SORT's BY and GET patterns read, besides those it names (the sorted key and
    /// STORE's destination, `named`): what the multi-key route gathers before running it.
    pub fn sort_pattern_keys(
        &mut self,
        command: &Command,
        named: &[Bytes],
        now: u64,
    ) -> Vec<Bytes> {
        let Command::Key(KeyCommand {
            op: op @ (KeyOp::Sort | KeyOp::SortRo),
            args,
        }) = command
        else {
            return Vec::new();
        };
        let Ok(sort) = parse_sort(args, *op == KeyOp::SortRo, false) else {
            return Vec::new();
        };
        if !sort.reads_patterns() || !self.is_live(&args[0], now, &mut crate::change::NoLog) {
            return Vec::new();
        }
        let mut keys: Vec<Bytes> = Vec::new();
        let patterns = sort.by.iter().filter(|_| !sort.dont_sort).chain(&sort.gets);
        let patterns: Vec<&Bytes> = patterns.collect();
        for element in self.sort_all(&args[0]) {
            for pattern in &patterns {
                if let Some((key, _)) = pattern_target(pattern, &element) {
                    let key = Bytes::from(key);
                    if !named.contains(&key) && !keys.contains(&key) {
                        keys.push(key);
                    }
                }
            }
        }
        keys
    }
}

/// A weight as Redis reads it with `strtod`: the whole text (leading spaces allowed), not
/// NaN, not out of range; the empty string is 0.
fn strtod(text: &[u8]) -> Option<f64> {
    if text.is_empty() {
        return Some(0.0);
    }
    let text = std::str::from_utf8(text).ok()?;
    let trimmed = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let value: f64 = trimmed.parse().ok()?;
    let lower = trimmed.trim_start_matches(['+', '-']).to_ascii_lowercase();
    let named_infinity = lower == "inf" || lower == "infinity";
    if value.is_nan() || (value.is_infinite() && !named_infinity) {
        return None;
    }
    // Underflow: a nonzero mantissa that rounds to zero or a subnormal.
    let mantissa = lower.split('e').next().unwrap_or("");
    if (value == 0.0 || value.is_subnormal())
        && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))
    {
        return None;
    }
    Some(value)
}

#[cfg(test)]
mod tests;
