//! What cluster mode needs from a shard's store: the keys of each hash slot (CLUSTER
//! COUNTKEYSINSLOT / GETKEYSINSLOT, the reshard loop), a key's serialised form (DUMP,
//! MIGRATE) and its inverse (RESTORE).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use foldhash::fast::RandomState;

use super::compact::CompactBytes;
use super::entry::Entry;
use super::Store;
use crate::change::ChangeSink;
use crate::cluster::command::{ClusterRequest, Restore};
use crate::cluster::dump::{self, KeylessCommand, PayloadError, Restored};
use crate::cluster::slots::key_slot;
use crate::command::{Command, CommandError, ExpireCommand, ExpireCondition, ExpireKind};
use crate::reply::Reply;

const BUSYKEY: &str = "BUSYKEY Target key name already exists.";

/// Keys by slot: a copy of each key (most keys are short enough to be kept inline).
#[derive(Debug, Default)]
pub(super) struct SlotIndex {
    by_slot: HashMap<u16, HashSet<CompactBytes, RandomState>, RandomState>,
}

impl SlotIndex {
    pub fn insert(&mut self, key: &CompactBytes) {
        self.by_slot
            .entry(key_slot(key))
            .or_default()
            .insert(key.clone());
    }

    pub fn remove(&mut self, key: &[u8]) {
        let slot = key_slot(key);
        if let Some(keys) = self.by_slot.get_mut(&slot) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_slot.remove(&slot);
            }
        }
    }

    pub fn clear(&mut self) {
        self.by_slot.clear();
    }

    fn keys(&self, slot: u16) -> impl Iterator<Item = &CompactBytes> + '_ {
        self.by_slot.get(&slot).into_iter().flatten()
    }
}

impl Store {
    /// Starts keeping the keys of each slot (cluster mode), indexing the keys already
    /// stored (replayed from the AOF).
    pub fn enable_slot_index(&mut self) {
        let mut index = SlotIndex::default();
        for key in self.map.keys() {
            index.insert(key);
        }
        self.slot_index = Some(index);
    }

    fn live_entry(&self, key: &[u8], now: u64) -> Option<&Entry> {
        (self.map.get(key)).filter(|entry| !self.expiring.expired(key, entry, now))
    }

    /// Whether `key` is present and not expired. No side effect (not counted, not expired
    /// now): the cluster check asks before the command runs.
    pub fn contains_live(&self, key: &[u8], now: u64) -> bool {
        self.live_entry(key, now).is_some()
    }

    /// Live keys of `slot` (0 without the slot index).
    pub fn count_keys_in_slot(&self, slot: u16, now: u64) -> usize {
        self.live_keys_in_slot(slot, now).count()
    }

    fn live_keys_in_slot(&self, slot: u16, now: u64) -> impl Iterator<Item = &CompactBytes> + '_ {
        self.slot_index
            .iter()
            .flat_map(move |index| index.keys(slot))
            .filter(move |key| self.contains_live(key, now))
    }

    /// A key's DUMP payload and its expiry (Unix ms), if it is live.
    pub fn dump(&self, key: &[u8], now: u64) -> Option<(Bytes, Option<u64>)> {
        let entry = self.map.get(key)?;
        if self.expiring.expired(key, entry, now) {
            return None;
        }
        Some((
            dump::encode(&super::rdb_object::object_of(&entry.value)),
            self.expiring.of(key, entry),
        ))
    }

    pub(super) fn run_cluster<S: ChangeSink>(
        &mut self,
        request: ClusterRequest,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        match request {
            ClusterRequest::CountKeysInSlot(slot) => {
                Ok(Reply::Integer(self.count_keys_in_slot(slot, now) as i64))
            }
            ClusterRequest::GetKeysInSlot { slot, count } => Ok(Reply::Array(
                self.live_keys_in_slot(slot, now)
                    .take(count)
                    .map(|key| Reply::Bulk(key.to_bytes()))
                    .collect(),
            )),
            ClusterRequest::Dump(key) => Ok(Reply::bulk_or_null(
                self.dump(&key, now).map(|(payload, _)| payload),
            )),
            ClusterRequest::Restore(restore) => self.restore(*restore, now, sink),
            ClusterRequest::MigrateCommit { keys, reply } => {
                self.del(&keys, now, sink);
                Ok(reply)
            }
            other => Err(CommandError::NotShardCommand {
                command: other.name(),
            }),
        }
    }

    /// Redis's `restoreCommand` after option parsing: BUSYKEY, then the payload checks,
    /// then the value. The value is rebuilt by replaying its commands, so the AOF logs it
    /// like any write; a payload whose commands fail leaves no key behind. A stream is
    /// checked first and stored whole, and logged as the commands that rebuild it.
    fn restore<S: ChangeSink>(
        &mut self,
        restore: Restore,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let Restore {
            key,
            ttl_ms,
            absolute,
            payload,
            replace,
        } = restore;
        let existed = self.is_live(&key, now, sink);
        if existed && !replace {
            return Err(CommandError::Text(BUSYKEY.into()));
        }
        let payload_error = |e: PayloadError| CommandError::Text(e.message().into());
        let value = match dump::decode(&payload).map_err(payload_error)? {
            Restored::Commands(commands) => Rebuild::Commands(
                commands
                    .into_iter()
                    .map(|keyless| rebuild_command(&key, keyless))
                    .collect::<Option<Vec<Command>>>()
                    .ok_or(payload_error(PayloadError::BadFormat))?,
            ),
            Restored::Stream(image) => Rebuild::Stream(
                super::CheckedStream::new(*image)
                    .map_err(|_| payload_error(PayloadError::BadFormat))?,
            ),
        };
        let expire_at = match (ttl_ms, absolute) {
            (0, _) => None,
            (at, true) => Some(at),
            (ttl, false) => Some(now.saturating_add(ttl)),
        };
        // The value's own commands send no events: RESTORE sends `restore` (or `del`).
        let mark = self.events.mark();
        if existed {
            self.del(std::slice::from_ref(&key), now, sink);
        }
        self.events.truncate(mark);
        if expire_at.is_some_and(|at| at <= now) {
            // Already expired: nothing to create (an existing key was replaced by nothing).
            if existed {
                self.notify(crate::notify::Class::Generic, "del", &key);
            }
            return Ok(Reply::ok());
        }
        match value {
            Rebuild::Commands(commands) => {
                for command in commands {
                    if self.run(command, now, sink).is_error() {
                        self.del(std::slice::from_ref(&key), now, sink);
                        return Err(payload_error(PayloadError::BadFormat));
                    }
                }
            }
            Rebuild::Stream(stream) => {
                self.insert_stream(&key, stream, None);
                // Logged as the commands that rebuild it (what an AOF rewrite writes).
                if let Some(entry) = self.map.get(&key[..]) {
                    super::emit::emit_entry(&key, entry, None, sink);
                }
            }
        }
        if let Some(at) = expire_at {
            let expire = Command::Expire(ExpireCommand {
                key: key.clone(),
                kind: ExpireKind::PExpireAt,
                time_ms: at as i64,
                condition: ExpireCondition::default(),
            });
            self.run(expire, now, sink);
        }
        self.events.truncate(mark);
        self.notify(crate::notify::Class::Generic, "restore", &key);
        Ok(Reply::ok())
    }
}

/// What RESTORE makes the key from.
enum Rebuild {
    Commands(Vec<Command>),
    Stream(super::CheckedStream),
}

/// `keyless` with `key` put back after the name, if that makes a write command on that
/// key alone: a payload can rebuild its own key and nothing else.
fn rebuild_command(key: &Bytes, keyless: KeylessCommand) -> Option<Command> {
    let mut args = keyless;
    let at = key_at(args.first()?);
    if at > args.len() {
        return None;
    }
    args.insert(at, key.clone());
    let command = Command::parse(args).ok()?;
    let own_key_only = command.keys() == [&key[..]];
    (command.is_write() && own_key_only && !matches!(command, Command::Cluster(_)))
        .then_some(command)
}

/// Where a rebuild command's key sits: after the name, or after the subcommand for a
/// container's (`XGROUP CREATE key ...`).
pub(crate) fn key_at(name: &[u8]) -> usize {
    match crate::command::table::find(name) {
        Some(spec) if !spec.subcommands.is_empty() => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::NoLog;

    fn store() -> Store {
        let mut store = Store::default();
        store.enable_slot_index();
        store
    }

    fn run(store: &mut Store, line: &str, now: u64) -> Reply {
        let args: Vec<Bytes> = line.split(' ').map(|s| Bytes::from(s.to_owned())).collect();
        store.execute(Command::parse(args).unwrap(), now, &mut NoLog)
    }

    fn restore(store: &mut Store, key: &str, ttl: u64, payload: Bytes, replace: bool) -> Reply {
        let request = ClusterRequest::Restore(Box::new(Restore {
            key: Bytes::from(key.to_owned()),
            ttl_ms: ttl,
            absolute: false,
            payload,
            replace,
        }));
        store.execute(Command::Cluster(request), 1000, &mut NoLog)
    }

    #[test]
    fn slots_list_their_live_keys() {
        let mut store = store();
        run(&mut store, "SET {t}a 1", 0);
        run(&mut store, "SET {t}b 2 PXAT 500", 0);
        run(&mut store, "SET other 3", 0);
        let slot = key_slot(b"t");
        assert_eq!(store.count_keys_in_slot(slot, 100), 2);
        assert_eq!(
            store.count_keys_in_slot(slot, 600),
            1,
            "expired keys do not count"
        );
        run(&mut store, "DEL {t}a", 600);
        assert_eq!(store.count_keys_in_slot(slot, 100), 1);
        run(&mut store, "FLUSHALL", 600);
        assert_eq!(store.count_keys_in_slot(slot, 100), 0);
        // Keys stored before the index was enabled are indexed too.
        let mut late = Store::default();
        run(&mut late, "SET {t}c 1", 0);
        late.enable_slot_index();
        let keys = late.run_cluster(
            ClusterRequest::GetKeysInSlot { slot, count: 10 },
            0,
            &mut NoLog,
        );
        assert_eq!(
            keys,
            Ok(Reply::Array(vec![Reply::Bulk(Bytes::from("{t}c"))]))
        );
    }

    #[test]
    fn dump_and_restore_round_trip_with_ttl() {
        let mut source = store();
        run(&mut source, "SET k v\r\n PX 5000", 1000);
        let (payload, expire_at) = source.dump(b"k", 1000).unwrap();
        assert_eq!(expire_at, Some(6000));
        let mut target = store();
        assert_eq!(
            restore(&mut target, "k", 2000, payload.clone(), false),
            Reply::ok()
        );
        assert_eq!(
            run(&mut target, "GET k", 1000),
            Reply::Bulk(Bytes::from("v\r\n"))
        );
        assert_eq!(run(&mut target, "PTTL k", 1000), Reply::Integer(2000));
        assert_eq!(
            restore(&mut target, "k", 0, payload.clone(), false),
            Reply::error(BUSYKEY)
        );
        assert_eq!(restore(&mut target, "k", 0, payload, true), Reply::ok());
        assert_eq!(run(&mut target, "PTTL k", 1000), Reply::Integer(-1));
        assert_eq!(source.dump(b"missing", 0), None);
    }

    #[test]
    fn bad_payloads_leave_nothing() {
        let mut store = store();
        let mut damaged = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce".to_vec();
        damaged[2] = b'w';
        assert_eq!(
            restore(&mut store, "k", 0, Bytes::from(damaged), false),
            Reply::error("ERR DUMP payload version or checksum are wrong")
        );
        // A well-formed payload of an empty collection: nothing to rebuild.
        let empty = dump::encode(&crate::rdb::ObjectRef::Set(vec![]));
        assert_eq!(
            restore(&mut store, "k", 0, empty, false),
            Reply::error("ERR Bad data format")
        );
        assert!(store.is_empty());
    }
}
