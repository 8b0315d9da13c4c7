//! What a write command means for the log before it runs: how large its records can get (so
//! a write whose record would not fit the format, or `--aof-max-record-bytes`, is refused
//! before it runs instead of being applied and never logged), and which keys its records
//! depend on (so a rewrite in progress can put those keys in its image first).
//!
//! Both matches have no catch-all arm on purpose: a new command must say what it logs.

use bytes::Bytes;

use crate::cluster::ClusterRequest;
use crate::command::{Command, KeyOp};

/// Room for the command name, the array header and the options a record may carry that the
/// request did not (`PXAT <ms>` for `EX`, `KEEPTTL` for INCR logged as SET, ...).
const FIXED_OVERHEAD: u64 = 256;

/// `$<len>\r\n<bytes>\r\n`, with the widest length a `u64` can print.
const fn bulk(len: usize) -> u64 {
    len as u64 + 1 + 20 + 2 + 2
}

fn keys(keys: &[Bytes]) -> u64 {
    keys.iter().map(|k| bulk(k.len())).sum()
}

/// An upper bound on the payload of any one record `command` makes a shard log, when the
/// command is a write (reads log only the deletion of an expired key they looked at, which
/// is bounded by the key's own size and never refused). For a command that fans out, the
/// bound of the whole command covers every shard's part, so checking it once before
/// routing refuses the command before any part runs.
pub fn payload_bound(command: &Command) -> u64 {
    let args = match command {
        Command::Set(set) => bulk(set.key.len()) + bulk(set.value.len()),
        Command::GetSet { key, value } | Command::Append { key, value } => {
            bulk(key.len()) + bulk(value.len())
        }
        Command::IncrBy { key, .. } => bulk(key.len()),
        Command::MSet(pairs) => pairs
            .iter()
            .map(|(k, v)| bulk(k.len()) + bulk(v.len()))
            .sum(),
        Command::Del(keys_) | Command::Exists(keys_) | Command::MGet(keys_) => keys(keys_),
        Command::Expire(expire) => bulk(expire.key.len()),
        Command::Persist(key) | Command::Get(key) | Command::Strlen(key) => bulk(key.len()),
        Command::Ttl { key, .. } => bulk(key.len()),
        Command::Cluster(request) => match request {
            // One rebuild command per record: the key plus at most the whole payload.
            ClusterRequest::Restore(restore) => {
                bulk(restore.key.len()) + bulk(restore.payload.len())
            }
            // MIGRATE logs the DEL of the keys the target took.
            ClusterRequest::Migrate(migrate) => keys(&migrate.keys),
            ClusterRequest::MigrateCommit { keys: keys_, .. } => keys(keys_),
            ClusterRequest::Dump(key) => bulk(key.len()),
            ClusterRequest::Node(_)
            | ClusterRequest::KeySlot(_)
            | ClusterRequest::CountKeysInSlot(_)
            | ClusterRequest::GetKeysInSlot { .. }
            | ClusterRequest::Asking
            | ClusterRequest::ReadOnly
            | ClusterRequest::ReadWrite => 0,
        },
        // The command is logged as written (SPOP as one SREM per member, each no larger than
        // the record that once added it).
        Command::Typed(typed) => keys(&typed.args),
        // A script's writes are logged one by one, each checked as it runs; FUNCTION LOAD
        // and RESTORE log their code.
        Command::Script(script) => keys(&script.args),
        // Logged as written, except SETRANGE (the SET of the result: at most offset + value)
        // and INCRBYFLOAT (the SET of a number).
        Command::Key(key) => {
            keys(&key.args)
                + match key.op {
                    KeyOp::SetRange => key
                        .args
                        .get(1)
                        .and_then(|offset| crate::number::parse_i64(offset))
                        .map_or(0, |offset| offset.max(0) as u64),
                    _ => 0,
                }
        }
        Command::FlushAll
        | Command::DbSize
        | Command::Info(_)
        | Command::Ping(_)
        | Command::Echo(_)
        | Command::ConfigGet(_)
        | Command::Client(_)
        | Command::Introspect(_)
        | Command::Auth { .. }
        | Command::Acl(_)
        | Command::Replica(_)
        | Command::Repl(_)
        | Command::Quit
        | Command::Reset
        | Command::Select(_)
        | Command::BgRewriteAof
        | Command::Multi
        | Command::Exec
        | Command::Discard
        | Command::Watch(_)
        | Command::Unwatch
        | Command::Subscription(_)
        | Command::Publish { .. }
        | Command::PubSub(_)
        | Command::ShardPubSub(_)
        | Command::Hello(_)
        | Command::ConfigSet(_)
        | Command::ConfigApply(_)
        | Command::ConfigResetStat
        | Command::ConfigRewrite
        | Command::Help { .. } => 0,
        // Each queued command is admitted on its own when EXEC plans the transaction.
        Command::Transaction(_) => 0,
    };
    args + FIXED_OVERHEAD
}

/// Calls `f` with every key write `command` may change other than by deleting it. Before such
/// a write runs during a rewrite, each of these keys goes into the rewrite's image as it
/// still is ([`crate::store::Store::snapshot_touch`]), so records that build on the key's
/// state (APPEND, KEEPTTL, PEXPIREAT, ...) replay over exactly that state. Deletions need no
/// image (a key deleted before the image reached it is simply not in it, and the deletion
/// replays as a no-op), and FLUSHALL ends the image. Reads change nothing but lazy expiry,
/// which is a deletion.
pub fn for_each_image_key(command: &Command, mut f: impl FnMut(&[u8])) {
    match command {
        Command::Set(set) => f(&set.key),
        Command::GetSet { key, .. }
        | Command::Append { key, .. }
        | Command::IncrBy { key, .. }
        | Command::Persist(key) => f(key),
        Command::Expire(expire) => f(&expire.key),
        Command::MSet(pairs) => pairs.iter().for_each(|(key, _)| f(key)),
        // RESTORE rebuilds its key with commands that may append (the image must hold the
        // value from before); MIGRATE's commit only deletes.
        Command::Cluster(ClusterRequest::Restore(restore)) => f(&restore.key),
        // Reads of other keys need no image: the log holds every write after the switch.
        Command::Typed(typed) if typed.op.is_write() => typed.keys().into_iter().for_each(f),
        Command::Typed(_) => {}
        // RENAME and COPY replay over both keys' state: both are imaged.
        Command::Key(key) if key.op.is_write() => key.keys().into_iter().for_each(f),
        Command::Key(_) => {}
        Command::Cluster(_)
        | Command::Del(_)
        | Command::FlushAll
        | Command::Get(_)
        | Command::Strlen(_)
        | Command::Ttl { .. }
        | Command::Exists(_)
        | Command::MGet(_)
        | Command::DbSize
        | Command::Info(_)
        | Command::Ping(_)
        | Command::Echo(_)
        | Command::ConfigGet(_)
        | Command::Client(_)
        | Command::Introspect(_)
        | Command::Auth { .. }
        | Command::Acl(_)
        | Command::Replica(_)
        | Command::Repl(_)
        | Command::Quit
        | Command::Reset
        | Command::Select(_)
        | Command::BgRewriteAof
        | Command::Multi
        | Command::Exec
        | Command::Discard
        | Command::Watch(_)
        | Command::Unwatch
        | Command::Transaction(_)
        | Command::Script(_)
        | Command::Subscription(_)
        | Command::Publish { .. }
        | Command::PubSub(_)
        | Command::ShardPubSub(_)
        | Command::Hello(_)
        | Command::ConfigSet(_)
        | Command::ConfigApply(_)
        | Command::ConfigResetStat
        | Command::ConfigRewrite
        | Command::Help { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aof::{AofWriter, FsyncPolicy};
    use crate::store::Store;

    fn command(line: &str) -> Command {
        Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()).unwrap()
    }

    /// Every record a write produced is within its bound.
    #[test]
    fn the_bound_covers_what_is_logged() {
        let mut store = Store::default();
        let long = "x".repeat(300);
        let script = [
            format!("SET {long} {long} EX 1"),
            format!("SET k {long} PX 5 GET"),
            "INCRBY n 9223372036854775806".into(),
            "DECR n".into(),
            format!("APPEND {long} {long}"),
            format!("GETSET k {long}"),
            format!("MSET a {long} b {long} c 1"),
            "EXPIRE a 100".into(),
            "PEXPIREAT b 1".into(),
            "PERSIST a".into(),
            format!("DEL a b c {long}"),
            "FLUSHALL".into(),
        ];
        for line in &script {
            let command = command(line);
            let bound = payload_bound(&command);
            let mut aof = AofWriter::new(FsyncPolicy::No, 0, 0);
            let mut previous = 0;
            store.execute(command, 1_000, &mut aof);
            let batch = aof.take_batch().expect("a write is logged");
            let mut offset = 0;
            while offset < batch.bytes.len() {
                let header = &batch.bytes[offset..offset + 8];
                let len = u32::from_le_bytes(header[..4].try_into().unwrap()) as u64;
                assert!(len <= bound, "{line}: record of {len} bytes, bound {bound}");
                previous = previous.max(len);
                offset += 8 + len as usize;
            }
            assert!(previous > 0, "{line}");
        }
    }
}
