//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS.

use bytes::Bytes;

use super::group::Group;
use super::id::StreamId;
use super::{entry_reply, err, shown, stream_ref, Stream, STREAM};
use crate::change::ChangeSink;
use crate::command::{CommandError, TypedOp as Op};
use crate::number::parse_i64;
use crate::reply::Reply;
use crate::store::types::args::is;
use crate::store::types::Cx;

fn name(text: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(text.as_bytes()))
}

fn id(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

fn int(n: impl TryInto<i64>) -> Reply {
    Reply::Integer(n.try_into().unwrap_or(i64::MAX))
}

fn syntax(sub: &str) -> CommandError {
    err(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try XINFO HELP."
    ))
}

fn entries_read(group: &Group) -> Reply {
    if group.entries_read >= 0 {
        int(group.entries_read)
    } else {
        Reply::NullBulk
    }
}

fn lag(stream: &Stream, group: &Group) -> Reply {
    stream.lag(group).map_or(Reply::NullBulk, int)
}

/// Radix-tree nodes Redis would use for `keys` 16-byte keys: an estimate (a leaf per key and
/// the inner nodes of their common prefixes), XINFO's `radix-tree-nodes`.
fn rax_nodes(keys: usize) -> usize {
    if keys == 0 {
        1
    } else {
        keys * 2
    }
}

impl<S: ChangeSink> Cx<'_, S> {
    pub fn xinfo(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let op = self.op;
        let now = self.now as i64;
        let value = self.store.view(&a[0], STREAM, self.now, self.sink)?;
        let stream = stream_ref(value).ok_or_else(|| err("ERR no such key"))?;
        match op {
            Op::XInfoConsumers => {
                let group = stream.groups.get(&a[1]).ok_or_else(|| {
                    err(format!(
                        "NOGROUP No such consumer group '{}' for key name '{}'",
                        shown(&a[1]),
                        shown(&a[0])
                    ))
                })?;
                let consumers = group.consumers.iter().map(|(consumer, c)| {
                    Reply::Map(vec![
                        name("name"),
                        Reply::Bulk(consumer.clone()),
                        name("pending"),
                        int(c.pending.len()),
                        name("idle"),
                        int((now - c.seen_time as i64).max(0)),
                    ])
                });
                Ok(Reply::Array(consumers.collect()))
            }
            Op::XInfoGroups => {
                let groups = stream.groups.iter().map(|(group_name, group)| {
                    Reply::Map(vec![
                        name("name"),
                        Reply::Bulk(group_name.clone()),
                        name("consumers"),
                        int(group.consumers.len()),
                        name("pending"),
                        int(group.pel.len()),
                        name("last-delivered-id"),
                        id(group.last_id),
                        name("entries-read"),
                        entries_read(group),
                        name("lag"),
                        lag(stream, group),
                    ])
                });
                Ok(Reply::Array(groups.collect()))
            }
            _ => stream_info(stream, &a[1..]),
        }
    }
}

fn stream_info(stream: &Stream, options: &[Bytes]) -> Result<Reply, CommandError> {
    let mut count = 10usize;
    let full = !options.is_empty();
    if full {
        if (options.len() != 1 && options.len() != 3) || !is(&options[0], "full") {
            return Err(syntax("STREAM"));
        }
        if options.len() == 3 {
            if !is(&options[1], "count") {
                return Err(syntax("STREAM"));
            }
            let n = parse_i64(&options[2]).ok_or(CommandError::NotAnInteger)?;
            count = if n < 0 { 10 } else { n as usize };
        }
    }
    let mut map = vec![
        name("length"),
        int(stream.len()),
        name("radix-tree-keys"),
        int(stream.node_count()),
        name("radix-tree-nodes"),
        int(rax_nodes(stream.node_count())),
        name("last-generated-id"),
        id(stream.last_id),
        name("max-deleted-entry-id"),
        id(stream.max_deleted_entry_id),
        name("entries-added"),
        int(stream.entries_added),
        name("recorded-first-entry-id"),
        id(stream.first_id),
    ];
    let limit = if count == 0 { usize::MAX } else { count };
    if !full {
        let edge = |rev: bool| {
            stream
                .range(StreamId::MIN, StreamId::MAX, rev)
                .next()
                .map_or(Reply::NullBulk, |(id, pairs)| entry_reply(id, pairs))
        };
        map.extend([
            name("groups"),
            int(stream.groups.len()),
            name("first-entry"),
            edge(false),
            name("last-entry"),
            edge(true),
        ]);
        return Ok(Reply::Map(map));
    }
    let entries = stream
        .range(StreamId::MIN, StreamId::MAX, false)
        .take(limit)
        .map(|(id, pairs)| entry_reply(id, pairs))
        .collect();
    let groups = stream.groups.iter().map(|(group_name, group)| {
        let pel = group.pel.iter().take(limit).map(|(pending, nack)| {
            Reply::Array(vec![
                id(*pending),
                Reply::Bulk(nack.consumer.clone()),
                int(nack.delivery_time),
                int(nack.delivery_count),
            ])
        });
        let consumers = group.consumers.iter().map(|(consumer, c)| {
            let pending = c.pending.iter().take(limit).map(|pending| {
                let nack = &group.pel[pending];
                Reply::Array(vec![
                    id(*pending),
                    int(nack.delivery_time),
                    int(nack.delivery_count),
                ])
            });
            Reply::Map(vec![
                name("name"),
                Reply::Bulk(consumer.clone()),
                name("seen-time"),
                int(c.seen_time),
                name("pel-count"),
                int(c.pending.len()),
                name("pending"),
                Reply::Array(pending.collect()),
            ])
        });
        Reply::Map(vec![
            name("name"),
            Reply::Bulk(group_name.clone()),
            name("last-delivered-id"),
            id(group.last_id),
            name("entries-read"),
            entries_read(group),
            name("lag"),
            lag(stream, group),
            name("pel-count"),
            int(group.pel.len()),
            name("pending"),
            Reply::Array(pel.collect()),
            name("consumers"),
            Reply::Array(consumers.collect()),
        ])
    });
    map.extend([
        name("entries"),
        Reply::Array(entries),
        name("groups"),
        Reply::Array(groups.collect()),
    ]);
    Ok(Reply::Map(map))
}
