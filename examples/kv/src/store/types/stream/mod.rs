//! Streams (Redis 7.0's t_stream.c): the value ([`model::Stream`]), entry IDs, trimming, the
//! consumer groups' bookkeeping, and the X* commands on a shard's store. The parsing and the
//! bookkeeping are sans-I/O modules with their own tests; the command files put them
//! together in Redis's order of checks.
//!
//! What is logged: XADD and XTRIM with the ID and trimming made exact (`*` becomes the ID
//! added, `~ n` becomes `= what was kept`), reads from a group as the `XCLAIM ... FORCE
//! JUSTID LASTID` and `XGROUP SETID ... ENTRIESREAD` Redis propagates, the rest as written.

mod basic;
mod claim;
pub mod emit;
pub mod group;
mod groups;
pub mod id;
pub mod image;
mod info;
pub mod model;
mod node;
pub(crate) mod read;
pub mod trim;

use bytes::Bytes;

use super::Cx;
use crate::change::ChangeSink;
use crate::command::{CommandError, TypedOp as Op};
use crate::reply::Reply;
use crate::store::value::{Value, ValueType};

pub use id::StreamId;
pub use model::{NodeLimits, Stream};

pub(super) const STREAM: ValueType = ValueType::Stream;

pub(super) fn stream_mut(value: &mut Value) -> &mut Stream {
    match value {
        Value::Stream(stream) => stream,
        // `Store::update` checked the type.
        _ => unreachable!("checked stream"),
    }
}

pub(super) fn stream_ref(value: Option<&Value>) -> Option<&Stream> {
    match value {
        Some(Value::Stream(stream)) => Some(stream),
        _ => None,
    }
}

/// `[id, [field, value, ...]]`, an entry as the X commands reply it.
pub(super) fn entry_reply(id: StreamId, pairs: Vec<(Bytes, Bytes)>) -> Reply {
    let flat = pairs
        .into_iter()
        .flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)]);
    Reply::Array(vec![
        Reply::Bulk(id.to_bytes()),
        Reply::Array(flat.collect()),
    ])
}

pub(super) fn err(message: impl Into<String>) -> CommandError {
    CommandError::Text(message.into())
}

/// How keys and names show in Redis's `%s` messages.
pub(super) fn shown(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(super) fn nogroup_key(key: &[u8], group: &[u8]) -> CommandError {
    err(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        shown(key),
        shown(group)
    ))
}

/// XGROUP HELP and XINFO HELP (Redis's `addReplyHelp`).
pub(super) fn help(op: Op) -> Reply {
    let (container, lines): (&str, &[&str]) = if op == Op::XGroupHelp {
        (
            "XGROUP",
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a new consumer group. Options are:",
                "    * MKSTREAM",
                "      Create the empty stream if it does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Set the group's entries_read counter (internal use).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Create a new consumer in the specified group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove the specified consumer.",
                "DESTROY <key> <groupname>",
                "    Remove the specified group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Set the current group ID and entries_read counter.",
            ],
        )
    } else {
        (
            "XINFO",
            &[
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
            ],
        )
    };
    let mut out = vec![Reply::Simple(Bytes::from(format!(
        "{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    )))];
    out.extend(
        lines
            .iter()
            .map(|line| Reply::Simple(Bytes::from_static(line.as_bytes()))),
    );
    out.push(Reply::simple("HELP"));
    out.push(Reply::simple("    Prints this help."));
    Reply::Array(out)
}

impl<S: ChangeSink> Cx<'_, S> {
    /// The stream commands.
    pub fn stream_command(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        match self.op {
            Op::XAdd => self.xadd(a),
            Op::XRange | Op::XRevRange => self.xrange(a),
            Op::XLen => self.xlen(a),
            Op::XDel => self.xdel(a),
            Op::XTrim => self.xtrim(a),
            Op::XSetId => self.xsetid(a),
            Op::XRead | Op::XReadGroup => self.xread(a),
            Op::XGroupCreate
            | Op::XGroupCreateConsumer
            | Op::XGroupDelConsumer
            | Op::XGroupDestroy
            | Op::XGroupSetId => self.xgroup(a),
            Op::XAck => self.xack(a),
            Op::XPending => self.xpending(a),
            Op::XClaim => self.xclaim(a),
            Op::XAutoClaim => self.xautoclaim(a),
            Op::XInfoStream | Op::XInfoGroups | Op::XInfoConsumers => self.xinfo(a),
            _ => Err(CommandError::Syntax),
        }
    }

    /// Whether `key`'s group has `consumer` (a plain look, for the event of a consumer that
    /// a read or claim creates).
    pub(super) fn has_consumer(&self, key: &[u8], group: &[u8], consumer: &[u8]) -> bool {
        matches!(
            self.store.map.get(key).map(|entry| &entry.value),
            Some(Value::Stream(stream))
                if stream.groups.get(group).is_some_and(|g| g.consumers.contains_key(consumer))
        )
    }

    /// Sends `xgroup-createconsumer` when `consumer` appeared (Redis's `streamCreateConsumer`).
    pub(super) fn note_consumer(
        &mut self,
        existed: bool,
        key: &[u8],
        group: &[u8],
        consumer: &[u8],
    ) {
        if !existed && self.has_consumer(key, group, consumer) {
            self.event("xgroup-createconsumer", key);
        }
    }

    pub(super) fn node_limits(&self) -> NodeLimits {
        let limits = &self.store.config.encoding;
        NodeLimits {
            max_entries: limits.stream_node_entries,
            max_bytes: limits.stream_node_bytes,
        }
    }

    /// Replay of the log (the store runs it at time 0): trimming obeys the log without a
    /// LIMIT, as Redis's AOF client does.
    pub(super) fn replaying(&self) -> bool {
        self.now == 0
    }
}
