//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER), XACK and XPENDING.

use bytes::Bytes;

use super::group::Group;
use super::id::{self, StreamId};
use super::{err, nogroup_key, shown, stream_mut, stream_ref, STREAM};
use crate::change::{ChangeSink, WriteOp};
use crate::command::{CommandError, TypedOp as Op};
use crate::number::parse_i64;
use crate::reply::Reply;
use crate::store::types::args::is;
use crate::store::types::Cx;

fn subcommand_syntax(op: Op) -> CommandError {
    let name = op
        .name()
        .rsplit('|')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    err(format!(
        "ERR unknown subcommand or wrong number of arguments for '{name}'. Try XGROUP HELP."
    ))
}

impl<S: ChangeSink> Cx<'_, S> {
    /// XGROUP's subcommands: `a` is `key group ...` (after the subcommand).
    pub fn xgroup(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let op = self.op;
        let argc = a.len() + 2;
        let mut mkstream = false;
        let mut entries_read: i64 = -1;
        let mut i = 3;
        while i < a.len() {
            if op == Op::XGroupCreate && is(&a[i], "mkstream") {
                mkstream = true;
                i += 1;
            } else if matches!(op, Op::XGroupCreate | Op::XGroupSetId)
                && is(&a[i], "entriesread")
                && i + 1 < a.len()
            {
                entries_read = parse_i64(&a[i + 1]).ok_or(CommandError::NotAnInteger)?;
                if entries_read < 0 && entries_read != -1 {
                    return Err(err("ERR value for ENTRIESREAD must be positive or -1"));
                }
                i += 2;
            } else {
                return Err(subcommand_syntax(op));
            }
        }
        let (key, name) = (&a[0], &a[1]);
        let value = self.store.view(key, STREAM, self.now, self.sink)?;
        let stream = stream_ref(value);
        if !mkstream {
            let Some(stream) = stream else {
                return Err(err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
            };
            if !stream.groups.contains_key(name)
                && matches!(
                    op,
                    Op::XGroupSetId | Op::XGroupCreateConsumer | Op::XGroupDelConsumer
                )
            {
                return Err(err(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    shown(name),
                    shown(key)
                )));
            }
        }
        let now = self.now;
        match op {
            Op::XGroupCreate if (5..=8).contains(&argc) => {
                let start = match &a[2][..] {
                    b"$" => stream.map_or(StreamId::MIN, |s| s.last_id),
                    arg => id::strict(arg)?,
                };
                let created = self
                    .store
                    .update(key, STREAM, true, now, self.sink, |value| {
                        let stream = stream_mut(value);
                        if stream.groups.contains_key(name) {
                            return false;
                        }
                        stream
                            .groups
                            .insert(name.clone(), Group::new(start, entries_read));
                        true
                    })?
                    .unwrap_or(false);
                if !created {
                    return Err(err("BUSYGROUP Consumer Group name already exists"));
                }
                // Logged with the `$` resolved, as the group's start must replay the same.
                let mut logged = vec![key.clone(), name.clone(), start.to_bytes()];
                if mkstream {
                    logged.push(Bytes::from_static(b"MKSTREAM"));
                }
                logged.extend([
                    Bytes::from_static(b"ENTRIESREAD"),
                    Bytes::from(entries_read.to_string()),
                ]);
                self.log_group("CREATE", &logged);
                self.event("xgroup-create", key);
                Ok(Reply::ok())
            }
            Op::XGroupSetId if argc == 5 || argc == 7 => {
                let last = match &a[2][..] {
                    b"$" => stream.map_or(StreamId::MIN, |s| s.last_id),
                    arg => id::parse_id(arg, id::Parse::RANGE_START)?.0,
                };
                self.store
                    .update(key, STREAM, false, now, self.sink, |value| {
                        if let Some(group) = stream_mut(value).groups.get_mut(name) {
                            group.last_id = last;
                            group.entries_read = entries_read;
                        }
                    })?;
                let logged = [
                    key.clone(),
                    name.clone(),
                    last.to_bytes(),
                    Bytes::from_static(b"ENTRIESREAD"),
                    Bytes::from(entries_read.to_string()),
                ];
                self.log_group("SETID", &logged);
                self.event("xgroup-setid", key);
                Ok(Reply::ok())
            }
            Op::XGroupDestroy if argc == 4 => {
                let destroyed = self
                    .store
                    .update(key, STREAM, false, now, self.sink, |value| {
                        stream_mut(value).groups.remove(name).is_some()
                    })?
                    .unwrap_or(false);
                if !destroyed {
                    return Ok(Reply::Integer(0));
                }
                self.log_group("DESTROY", a);
                self.event("xgroup-destroy", key);
                Ok(Reply::Integer(1))
            }
            Op::XGroupCreateConsumer if argc == 5 => {
                let created = self
                    .store
                    .update(key, STREAM, false, now, self.sink, |value| {
                        stream_mut(value)
                            .groups
                            .get_mut(name)
                            .is_some_and(|group| group.create_consumer(&a[2], now))
                    })?
                    .unwrap_or(false);
                if created {
                    self.log_group("CREATECONSUMER", a);
                    self.event("xgroup-createconsumer", key);
                }
                Ok(Reply::Integer(i64::from(created)))
            }
            Op::XGroupDelConsumer if argc == 5 => {
                let pending = self
                    .store
                    .update(key, STREAM, false, now, self.sink, |value| {
                        stream_mut(value)
                            .groups
                            .get_mut(name)
                            .and_then(|group| group.delete_consumer(&a[2]))
                    })?
                    .flatten();
                if pending.is_some() {
                    self.log_group("DELCONSUMER", a);
                    self.event("xgroup-delconsumer", key);
                }
                Ok(Reply::Integer(pending.unwrap_or(0) as i64))
            }
            _ => Err(subcommand_syntax(op)),
        }
    }

    /// Logs `XGROUP sub args...` (the key is the first of `args`).
    pub(super) fn log_group(&mut self, sub: &'static str, args: &[Bytes]) {
        self.sink.record(WriteOp::Command {
            name: "XGROUP",
            key: sub.as_bytes(),
            args,
        });
    }

    pub fn xack(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], STREAM, self.now, self.sink)?;
        let has_group = stream_ref(value).is_some_and(|s| s.groups.contains_key(&a[1]));
        if !has_group {
            return Ok(Reply::Integer(0));
        }
        let ids = a[2..]
            .iter()
            .map(|arg| id::strict(arg))
            .collect::<Result<Vec<_>, _>>()?;
        let acked = self
            .store
            .update(&a[0], STREAM, false, self.now, self.sink, |value| {
                let group = stream_mut(value).groups.get_mut(&a[1]);
                group.map_or(0, |group| ids.iter().filter(|id| group.ack(**id)).count())
            })?
            .unwrap_or(0);
        if acked > 0 {
            self.log_as_written(a);
        }
        Ok(Reply::Integer(acked as i64))
    }

    /// XPENDING key group [[IDLE min] start end count [consumer]].
    pub fn xpending(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let argc = a.len() + 1;
        if argc != 3 && !(6..=9).contains(&argc) {
            return Err(CommandError::Syntax);
        }
        let mut range = None;
        if argc >= 6 {
            let mut at = 2;
            let mut min_idle = 0;
            if is(&a[2], "idle") {
                min_idle = parse_i64(&a[3]).ok_or(CommandError::NotAnInteger)?;
                if argc < 8 {
                    return Err(CommandError::Syntax);
                }
                at += 2;
            }
            let count = parse_i64(&a[at + 2])
                .ok_or(CommandError::NotAnInteger)?
                .max(0) as usize;
            let start = id::interval(&a[at], true)?;
            let end = id::interval(&a[at + 1], false)?;
            let consumer = a.get(at + 3).cloned();
            range = Some((min_idle, start, end, count, consumer));
        }
        let now = self.now as i64;
        let value = self.store.view(&a[0], STREAM, self.now, self.sink)?;
        let group = stream_ref(value)
            .and_then(|s| s.groups.get(&a[1]))
            .ok_or_else(|| nogroup_key(&a[0], &a[1]))?;
        let Some((min_idle, start, end, count, consumer)) = range else {
            if group.pel.is_empty() {
                return Ok(Reply::Array(vec![
                    Reply::Integer(0),
                    Reply::NullBulk,
                    Reply::NullBulk,
                    Reply::NullArray,
                ]));
            }
            let first = group.pel.keys().next().copied().unwrap_or_default();
            let last = group.pel.keys().next_back().copied().unwrap_or_default();
            let consumers = group
                .consumers
                .iter()
                .filter(|(_, c)| !c.pending.is_empty())
                .map(|(name, c)| {
                    Reply::Array(vec![
                        Reply::Bulk(name.clone()),
                        Reply::Bulk(Bytes::from(c.pending.len().to_string())),
                    ])
                })
                .collect();
            return Ok(Reply::Array(vec![
                Reply::Integer(group.pel.len() as i64),
                Reply::Bulk(first.to_bytes()),
                Reply::Bulk(last.to_bytes()),
                Reply::Array(consumers),
            ]));
        };
        let ids: Box<dyn Iterator<Item = StreamId>> = match &consumer {
            Some(name) => match group.consumers.get(name) {
                None => return Ok(Reply::Array(Vec::new())),
                Some(c) if start <= end => Box::new(c.pending.range(start..=end).copied()),
                Some(_) => Box::new(std::iter::empty()),
            },
            None if start <= end => Box::new(group.pel.range(start..=end).map(|(id, _)| *id)),
            None => Box::new(std::iter::empty()),
        };
        let mut out = Vec::new();
        for id in ids {
            if out.len() >= count {
                break;
            }
            let nack = &group.pel[&id];
            let idle = now - nack.delivery_time as i64;
            if min_idle != 0 && idle < min_idle {
                continue;
            }
            out.push(Reply::Array(vec![
                Reply::Bulk(id.to_bytes()),
                Reply::Bulk(nack.consumer.clone()),
                Reply::Integer(idle.max(0)),
                Reply::Integer(nack.delivery_count as i64),
            ]));
        }
        Ok(Reply::Array(out))
    }
}
