//! The keyspace and string commands of [`crate::command::KeyOp`] on a shard's store, each a
//! port of its Redis 7.0 implementation (argument checks, then the key's type, then the work).
//! Writes are logged in the forms replay already knows (SET with PXAT or KEEPTTL, DEL,
//! PEXPIREAT, PERSIST, MSET), or as written where that is deterministic given the prior state
//! (RENAME, RENAMENX, COPY).

mod keys;
mod strings;

use bytes::Bytes;

use super::Store;
use crate::change::{ChangeSink, WriteOp};
use crate::command::{CommandError, KeyCommand, KeyOp as Op};
use crate::reply::Reply;

impl Store {
    pub(in crate::store) fn run_key_op<S: ChangeSink>(
        &mut self,
        command: KeyCommand,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let KeyCommand { op, args } = command;
        let mut cx = Cx {
            store: self,
            now,
            sink,
            op,
        };
        let a = &args[..];
        let reply = match op {
            Op::SetNx => cx.setnx(a),
            Op::SetEx | Op::PSetEx => cx.setex(a),
            Op::GetDel => cx.getdel(a),
            Op::GetEx => cx.getex(a),
            Op::GetRange | Op::Substr => cx.getrange(a),
            Op::SetRange => cx.setrange(a),
            Op::IncrByFloat => cx.incrbyfloat(a),
            Op::MSetNx => cx.msetnx(a),
            Op::ExpireTime | Op::PExpireTime => cx.expiretime(a),
            // A read of each key: it counts as a use of it (EXISTS does not).
            Op::Touch => Ok(Reply::Integer(
                a.iter()
                    .filter(|key| {
                        let live = cx.store.lookup(key, now, cx.sink).is_some();
                        cx.store.count_lookup(key, live);
                        live
                    })
                    .count() as i64,
            )),
            Op::Unlink => Ok(cx.store.unlink(a, now, cx.sink)),
            Op::Rename | Op::RenameNx => cx.rename(a),
            Op::Copy => cx.copy(a),
            Op::Keys => Ok(cx.keys(a)),
            Op::Scan => cx.scan(a),
            Op::RandomKey => Ok(cx.random_key()),
            Op::ObjectEncoding
            | Op::ObjectRefCount
            | Op::ObjectFreq
            | Op::ObjectIdleTime
            | Op::MemoryUsage => cx.object(a),
            Op::ObjectHelp => Ok(object_help()),
            Op::SetBit
            | Op::GetBit
            | Op::BitCount
            | Op::BitPos
            | Op::BitOp
            | Op::BitField
            | Op::BitFieldRo => cx.store.run_bitmap(op, a, now, cx.sink),
            Op::PfAdd | Op::PfCount | Op::PfMerge | Op::PfDebug | Op::PfSelfTest => {
                cx.store.run_hll(op, a, now, cx.sink)
            }
            Op::Lcs => cx.store.lcs_command(a, now, cx.sink),
            Op::Sort | Op::SortRo => cx.store.run_sort(op, a, now, cx.sink),
            Op::Lolwut => crate::store::lolwut::lolwut(a),
            // Parsed into FLUSHALL; never reaches a store as a KeyOp.
            Op::FlushDb => Err(CommandError::NotShardCommand { command: "flushdb" }),
        };
        // The vector may be the thread's, lent by the parser: back for the next request.
        crate::command::argv::give_back(args);
        reply
    }
}

/// One command's context: the store, the time, the change sink and which command runs.
struct Cx<'a, S> {
    store: &'a mut Store,
    now: u64,
    sink: &'a mut S,
    op: Op,
}

impl<S: ChangeSink> Cx<'_, S> {
    /// Logs `name a[0] a[1..]`.
    fn log(&mut self, name: &str, a: &[Bytes]) {
        self.sink.record(WriteOp::Command {
            name,
            key: &a[0],
            args: &a[1..],
        });
    }
}

fn object_help() -> Reply {
    Reply::Array(
        [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        ]
        .into_iter()
        .map(Reply::simple)
        .collect(),
    )
}

#[cfg(test)]
mod tests;
