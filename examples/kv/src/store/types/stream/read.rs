//! XREAD and XREADGROUP without the waiting: the options in Redis's order, then each stream
//! in turn. A read that finds nothing answers a nil array; the shard blocks a request with
//! BLOCK on that (see `server/blocking.rs`), after [`Store::stream_read_to_wait`] fixed its
//! `$` IDs, and serves it once [`Store::stream_ready`] says so.

use bytes::Bytes;

use super::group::Group;
use super::id::{self, StreamId};
use super::{entry_reply, err, shown, stream_mut, stream_ref, Stream, STREAM};
use crate::change::{ChangeSink, WriteOp};
use crate::command::{CommandError, TypedCommand, TypedOp};
use crate::number::parse_i64;
use crate::reply::Reply;
use crate::store::types::args::is;
use crate::store::types::Cx;
use crate::store::value::Value;
use crate::store::Store;

/// What a blocked read gets at most when it had no COUNT (`XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// XREAD / XREADGROUP options, parsed as `xreadCommand` does (arguments after the name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadArgs {
    /// 0: no limit.
    pub count: usize,
    /// The BLOCK argument (milliseconds), if given.
    pub block: Option<Bytes>,
    pub group: Option<(Bytes, Bytes)>,
    pub noack: bool,
    /// Index of the first key.
    pub streams_at: usize,
    pub streams: usize,
}

pub fn parse_read(a: &[Bytes], group_read: bool) -> Result<ReadArgs, CommandError> {
    let mut args = ReadArgs {
        count: 0,
        block: None,
        group: None,
        noack: false,
        streams_at: 0,
        streams: 0,
    };
    let mut i = 0;
    while i < a.len() {
        let more = a.len() - i - 1;
        let opt = &a[i];
        if is(opt, "block") && more > 0 {
            i += 1;
            crate::blocking::parse_timeout_ms(&a[i], 0)?;
            args.block = Some(a[i].clone());
        } else if is(opt, "count") && more > 0 {
            i += 1;
            let n = parse_i64(&a[i]).ok_or(CommandError::NotAnInteger)?;
            args.count = n.max(0) as usize;
        } else if is(opt, "streams") && more > 0 {
            args.streams_at = i + 1;
            let n = a.len() - args.streams_at;
            if !n.is_multiple_of(2) {
                return Err(err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            args.streams = n / 2;
            break;
        } else if is(opt, "group") && more >= 2 {
            if !group_read {
                return Err(err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            args.group = Some((a[i + 1].clone(), a[i + 2].clone()));
            i += 2;
        } else if is(opt, "noack") {
            if !group_read {
                return Err(err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            args.noack = true;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    if args.streams_at == 0 {
        return Err(CommandError::Syntax);
    }
    if group_read && args.group.is_none() {
        return Err(err("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(args)
}

/// The keys of an XREAD / XREADGROUP (none when the arguments are wrong).
pub fn read_keys(a: &[Bytes]) -> &[Bytes] {
    // Both parse the same way but for the group checks; parse leniently as XREADGROUP.
    match parse_read(a, true).or_else(|_| parse_read(a, false)) {
        Ok(args) => &a[args.streams_at..args.streams_at + args.streams],
        Err(_) => &[],
    }
}

/// One stream's starting point.
enum From {
    After(StreamId),
    /// `>`: entries never delivered to the group.
    New,
}

/// Whether a blocked read on a key can go on, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    Wait,
    Serve,
    /// Answer this error (a group read whose key or group went away).
    Fail(Reply),
}

/// The read that serves a waiter (as [`Store::stream_read_to_wait`] made it) from `key`
/// alone: Redis answers a served read with that one stream.
pub fn served_from(typed: &TypedCommand, key: &[u8]) -> TypedCommand {
    let a = &typed.args;
    let Ok(args) = parse_read(a, typed.op == TypedOp::XReadGroup) else {
        return typed.clone();
    };
    let keys = &a[args.streams_at..args.streams_at + args.streams];
    let Some(at) = keys.iter().position(|k| &k[..] == key) else {
        return typed.clone();
    };
    let mut out = a[..args.streams_at].to_vec();
    out.push(keys[at].clone());
    out.push(if args.group.is_some() {
        Bytes::from_static(b">")
    } else {
        a[args.streams_at + args.streams + at].clone()
    });
    TypedCommand {
        op: typed.op,
        args: out,
    }
}

impl Store {
    /// A blocking XREAD / XREADGROUP as it waits: without BLOCK, with `$` fixed to each
    /// stream's last ID now and the count a blocked read gets. Looks only.
    pub fn stream_read_to_wait(&self, typed: &TypedCommand) -> TypedCommand {
        let a = &typed.args;
        let Ok(args) = parse_read(a, typed.op == TypedOp::XReadGroup) else {
            return typed.clone();
        };
        let mut out = Vec::with_capacity(a.len() + 2);
        if let Some((group, consumer)) = &args.group {
            out.extend([
                Bytes::from_static(b"GROUP"),
                group.clone(),
                consumer.clone(),
            ]);
        }
        if args.noack {
            out.push(Bytes::from_static(b"NOACK"));
        }
        let count = if args.count == 0 {
            BLOCKED_DEFAULT_COUNT
        } else {
            args.count
        };
        out.extend([Bytes::from_static(b"COUNT"), Bytes::from(count.to_string())]);
        out.push(Bytes::from_static(b"STREAMS"));
        let keys = &a[args.streams_at..args.streams_at + args.streams];
        out.extend(keys.iter().cloned());
        for (key, id) in keys.iter().zip(&a[args.streams_at + args.streams..]) {
            if &id[..] == b"$" {
                let last = match self.map.get(key).map(|entry| &entry.value) {
                    Some(Value::Stream(stream)) => stream.last_id,
                    _ => StreamId::MIN,
                };
                out.push(last.to_bytes());
            } else {
                out.push(id.clone());
            }
        }
        TypedCommand {
            op: typed.op,
            args: out,
        }
    }

    /// Whether the read `typed` (as [`Store::stream_read_to_wait`] made it), blocked on
    /// `key`, is served now (Redis's `serveClientsBlockedOnStreamKey` and
    /// `unblockDeletedStreamReadgroupClients`). Looks only.
    pub fn stream_ready(&self, typed: &TypedCommand, key: &[u8], now: u64) -> Ready {
        let a = &typed.args;
        let Ok(args) = parse_read(a, typed.op == TypedOp::XReadGroup) else {
            return Ready::Serve;
        };
        let entry = self
            .map
            .get(key)
            .filter(|entry| !self.expiring.expired(key, entry, now));
        let stream = match entry.map(|entry| &entry.value) {
            Some(Value::Stream(stream)) => Some(&**stream),
            _ => None,
        };
        if let Some((group, _)) = &args.group {
            let Some(stream) = stream else {
                return Ready::Fail(Reply::error("UNBLOCKED the stream key no longer exists"));
            };
            return match stream.groups.get(group) {
                None => Ready::Fail(Reply::error(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                )),
                Some(group) if stream.last_id > group.last_id => Ready::Serve,
                Some(_) => Ready::Wait,
            };
        }
        let keys = &a[args.streams_at..args.streams_at + args.streams];
        let ids = &a[args.streams_at + args.streams..];
        let after = keys
            .iter()
            .position(|k| &k[..] == key)
            .and_then(|at| id::strict(&ids[at]).ok());
        match (stream, after) {
            (Some(stream), Some(after)) if stream.last_id > after => Ready::Serve,
            _ => Ready::Wait,
        }
    }
}

impl<S: ChangeSink> Cx<'_, S> {
    pub fn xread(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let group_read = self.op == TypedOp::XReadGroup;
        let args = parse_read(a, group_read)?;
        let keys = &a[args.streams_at..args.streams_at + args.streams];
        let id_args = &a[args.streams_at + args.streams..];
        let mut froms = Vec::with_capacity(keys.len());
        for (key, id_arg) in keys.iter().zip(id_args) {
            let value = self.store.view(key, STREAM, self.now, self.sink)?;
            let stream = stream_ref(value);
            if let Some((group, _)) = &args.group {
                if stream.and_then(|s| s.groups.get(group)).is_none() {
                    return Err(err(format!(
                        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                        shown(key),
                        shown(group)
                    )));
                }
            }
            froms.push(match &id_arg[..] {
                b"$" if group_read => {
                    return Err(err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
                }
                b"$" => From::After(stream.map_or(StreamId::MIN, |s| s.last_id)),
                b">" if !group_read => {
                    return Err(err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
                }
                b">" => From::New,
                _ => From::After(id::strict(id_arg)?),
            });
        }
        let mut replies = Vec::new();
        for (key, from) in keys.iter().zip(froms) {
            let served = match &args.group {
                None => self.read_plain(key, &from, args.count)?,
                Some((group, consumer)) => {
                    self.read_group(key, group, consumer, &from, args.count, args.noack)?
                }
            };
            if let Some(entries) = served {
                replies.push(Reply::Array(vec![Reply::Bulk(key.clone()), entries]));
            }
        }
        Ok(if replies.is_empty() {
            Reply::NullArray
        } else {
            Reply::Array(replies)
        })
    }

    fn read_plain(
        &mut self,
        key: &Bytes,
        from: &From,
        count: usize,
    ) -> Result<Option<Reply>, CommandError> {
        let value = self.store.view(key, STREAM, self.now, self.sink)?;
        let (Some(stream), From::After(after)) = (stream_ref(value), from) else {
            return Ok(None);
        };
        match stream.last_live() {
            Some(top) if top > *after => {}
            _ => return Ok(None),
        }
        let start = after.next().unwrap_or(StreamId::MAX);
        let entries = stream
            .range_replies(start, StreamId::MAX, false)
            .take(if count == 0 { usize::MAX } else { count })
            .collect();
        Ok(Some(Reply::Array(entries)))
    }

    /// One stream of an XREADGROUP: new entries (`>`) or the consumer's history.
    fn read_group(
        &mut self,
        key: &Bytes,
        group_name: &Bytes,
        consumer: &Bytes,
        from: &From,
        count: usize,
        noack: bool,
    ) -> Result<Option<Reply>, CommandError> {
        let now = self.now;
        let limit = if count == 0 { usize::MAX } else { count };
        let mut logs: Vec<Vec<Bytes>> = Vec::new();
        let existed = self.has_consumer(key, group_name, consumer);
        let reply = self
            .store
            .update(key, STREAM, false, now, self.sink, |value| {
                let stream = stream_mut(value);
                let mut group = stream.groups.remove(group_name).unwrap_or_default();
                let reply = serve_group(
                    stream, &mut group, consumer, from, limit, noack, now, key, group_name,
                    &mut logs,
                );
                stream.groups.insert(group_name.clone(), group);
                reply
            })?
            .flatten();
        self.note_consumer(existed, key, group_name, consumer);
        for args in &logs {
            let (name, head) = (args[0].clone(), args[1].clone());
            let name = if &name[..] == b"XCLAIM" {
                "XCLAIM"
            } else {
                "XGROUP"
            };
            self.sink.record(WriteOp::Command {
                name,
                key: &head,
                args: &args[2..],
            });
        }
        Ok(reply)
    }
}

/// The records Redis propagates for a group read: `XCLAIM key group consumer 0 id TIME ms
/// RETRYCOUNT n FORCE JUSTID LASTID last` per delivery (`streamPropagateXCLAIM`).
pub(super) fn xclaim_record(
    key: &Bytes,
    group_name: &Bytes,
    group: &Group,
    id: StreamId,
) -> Vec<Bytes> {
    let nack = &group.pel[&id];
    vec![
        Bytes::from_static(b"XCLAIM"),
        key.clone(),
        group_name.clone(),
        nack.consumer.clone(),
        Bytes::from_static(b"0"),
        id.to_bytes(),
        Bytes::from_static(b"TIME"),
        Bytes::from(nack.delivery_time.to_string()),
        Bytes::from_static(b"RETRYCOUNT"),
        Bytes::from(nack.delivery_count.to_string()),
        Bytes::from_static(b"FORCE"),
        Bytes::from_static(b"JUSTID"),
        Bytes::from_static(b"LASTID"),
        group.last_id.to_bytes(),
    ]
}

/// `XGROUP SETID key group last ENTRIESREAD n` (`streamPropagateGroupID`), in the
/// `[name, head, args...]` form of [`xclaim_record`] (the head is the subcommand).
pub(super) fn setid_record(key: &Bytes, group_name: &Bytes, group: &Group) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"SETID"),
        key.clone(),
        group_name.clone(),
        group.last_id.to_bytes(),
        Bytes::from_static(b"ENTRIESREAD"),
        Bytes::from(group.entries_read.to_string()),
    ]
}

#[allow(clippy::too_many_arguments)]
fn serve_group(
    stream: &Stream,
    group: &mut Group,
    consumer: &Bytes,
    from: &From,
    limit: usize,
    noack: bool,
    now: u64,
    key: &Bytes,
    group_name: &Bytes,
    logs: &mut Vec<Vec<Bytes>>,
) -> Option<Reply> {
    match from {
        From::New => {
            match stream.last_live() {
                Some(top) if top > group.last_id => {}
                _ => return None,
            }
            if group.touch_consumer(consumer, now) && noack {
                logs.push(vec![
                    Bytes::from_static(b"XGROUP"),
                    Bytes::from_static(b"CREATECONSUMER"),
                    key.clone(),
                    group_name.clone(),
                    consumer.clone(),
                ]);
            }
            let start = group.last_id.next().unwrap_or(StreamId::MAX);
            let mut entries = Vec::new();
            let mut moved = false;
            for (id, pairs) in stream.range(start, StreamId::MAX, false).take(limit) {
                group.advance(id, stream);
                moved = true;
                entries.push(entry_reply(id, pairs));
                if !noack {
                    group.deliver_new(id, consumer, now);
                    logs.push(xclaim_record(key, group_name, group, id));
                }
            }
            if noack && moved {
                logs.push(setid_record(key, group_name, group));
            }
            Some(Reply::Array(entries))
        }
        From::After(after) => {
            group.touch_consumer(consumer, now);
            let start = after.next().unwrap_or(StreamId::MAX);
            let pending: Vec<StreamId> = group.consumers[consumer]
                .pending
                .range(start..)
                .take(limit)
                .copied()
                .collect();
            let mut entries = Vec::with_capacity(pending.len());
            for id in pending {
                match stream.get(id) {
                    Some(pairs) => {
                        if let Some(nack) = group.pel.get_mut(&id) {
                            nack.delivery_time = now;
                            nack.delivery_count += 1;
                        }
                        entries.push(entry_reply(id, pairs));
                    }
                    None => entries.push(Reply::Array(vec![
                        Reply::Bulk(id.to_bytes()),
                        Reply::NullArray,
                    ])),
                }
            }
            Some(Reply::Array(entries))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::from(p.to_string())).collect()
    }

    fn error(result: Result<ReadArgs, CommandError>) -> String {
        match result {
            Err(CommandError::Text(text)) => text,
            Err(other) => format!("{other:?}"),
            Ok(args) => panic!("parsed {args:?}"),
        }
    }

    #[test]
    fn read_options_in_redis_order() {
        let a = parse_read(
            &args(&["COUNT", "2", "BLOCK", "0", "STREAMS", "a", "b", "0", "$"]),
            false,
        )
        .unwrap();
        assert_eq!((a.count, a.streams_at, a.streams), (2, 5, 2));
        assert_eq!(a.block, Some(Bytes::from("0")));
        let a = parse_read(
            &args(&["GROUP", "g", "c", "NOACK", "STREAMS", "s", ">"]),
            true,
        )
        .unwrap();
        assert_eq!(a.group, Some((Bytes::from("g"), Bytes::from("c"))));
        assert!(a.noack);
        assert!(error(parse_read(&args(&["STREAMS", "a", "b", "0"]), false))
            .starts_with("ERR Unbalanced XREAD"));
        assert_eq!(
            error(parse_read(
                &args(&["GROUP", "g", "c", "STREAMS", "s", ">"]),
                false
            )),
            "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
        );
        assert_eq!(
            error(parse_read(&args(&["STREAMS", "s", ">"]), true)),
            "ERR Missing GROUP option for XREADGROUP"
        );
        assert_eq!(error(parse_read(&args(&["COUNT", "1"]), false)), "Syntax");
        assert_eq!(
            error(parse_read(
                &args(&["BLOCK", "-1", "STREAMS", "s", "0"]),
                false
            )),
            "ERR timeout is negative"
        );
        assert_eq!(
            read_keys(&args(&[
                "GROUP", "streams", "c", "STREAMS", "k1", "k2", ">", ">"
            ])),
            &args(&["k1", "k2"])[..]
        );
    }
}
