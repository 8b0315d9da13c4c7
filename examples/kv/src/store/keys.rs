//! Generic key commands: DEL, EXISTS, EXPIRE (all variants), TTL/PTTL, PERSIST.

use bytes::Bytes;

use super::Store;
use crate::change::{ChangeSink, WriteOp};
use crate::command::{CommandError, ExpireCommand, TimeUnit};
use crate::notify::Class;
use crate::reply::Reply;

impl Store {
    pub(super) fn del<S: ChangeSink>(&mut self, keys: &[Bytes], now: u64, sink: &mut S) -> Reply {
        self.delete(keys, now, sink, false)
    }

    /// UNLINK: DEL whose large values are freed after the command (see `lazyfree.rs`).
    pub(super) fn unlink<S: ChangeSink>(
        &mut self,
        keys: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Reply {
        self.delete(keys, now, sink, true)
    }

    fn delete<S: ChangeSink>(
        &mut self,
        keys: &[Bytes],
        now: u64,
        sink: &mut S,
        lazy: bool,
    ) -> Reply {
        let mut deleted = 0;
        let mut removed = Vec::new();
        for key in keys {
            let Some((stored_key, entry, expire_at)) = self.remove(key) else {
                continue;
            };
            if lazy {
                self.lazy_free.release(entry.value, &self.config.encoding);
            }
            if expire_at.is_some_and(|at| now > at) {
                // Gone already as far as clients can tell; it still has to reach the log.
                self.counters.expired_keys += 1;
                self.notify(Class::Expired, "expired", &stored_key);
            } else {
                deleted += 1;
                self.notify(Class::Generic, "del", &stored_key);
            }
            if S::ENABLED {
                removed.push(stored_key.to_bytes());
            }
        }
        if !removed.is_empty() {
            sink.record(WriteOp::Del(&removed));
        }
        Reply::Integer(deleted)
    }

    pub(super) fn exists<S: ChangeSink>(
        &mut self,
        keys: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Reply {
        let mut found = 0;
        for key in keys {
            let live = self.is_live(key, now, sink);
            self.count_lookup(key, live);
            found += i64::from(live);
        }
        Reply::Integer(found)
    }

    /// Port of Redis 7's `expireGenericCommand` after argument parsing.
    pub(super) fn expire<S: ChangeSink>(
        &mut self,
        expire: ExpireCommand,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let base = if expire.kind.is_relative() {
            now as i64
        } else {
            0
        };
        let when = expire
            .time_ms
            .checked_add(base)
            .ok_or(CommandError::InvalidExpireTime {
                command: expire.kind.name(),
            })?;
        if !self.is_live(&expire.key, now, sink) {
            return Ok(Reply::Integer(0));
        }
        let current =
            (self.map.get(&expire.key[..])).and_then(|e| self.expiring.of(&expire.key, e));
        let condition = expire.condition;
        // No TTL counts as an infinitely distant expiry for GT and LT.
        let rejected = (condition.if_no_ttl && current.is_some())
            || (condition.if_has_ttl && current.is_none())
            || (condition.if_later && current.is_none_or(|at| when <= at as i64))
            || (condition.if_earlier && current.is_some_and(|at| when >= at as i64));
        if rejected {
            return Ok(Reply::Integer(0));
        }
        if when <= now as i64 {
            if let Some((stored_key, _, _)) = self.remove(&expire.key) {
                self.notify(Class::Generic, "del", &stored_key);
                super::keyspace::record_del(sink, &stored_key);
            }
        } else {
            let at_ms = when as u64;
            sink.record(WriteOp::PExpireAt {
                key: &expire.key,
                at_ms,
            });
            self.set_expiry(&expire.key, at_ms);
            self.notify(Class::Generic, "expire", &expire.key);
        }
        Ok(Reply::Integer(1))
    }

    pub(super) fn ttl<S: ChangeSink>(
        &mut self,
        key: &[u8],
        unit: TimeUnit,
        now: u64,
        sink: &mut S,
    ) -> Reply {
        let live = self.is_live(key, now, sink);
        self.count_lookup(key, live);
        if !live {
            return Reply::Integer(-2);
        }
        let Some(at) = self.map.get(key).and_then(|e| self.expiring.of(key, e)) else {
            return Reply::Integer(-1);
        };
        let remaining_ms = at.saturating_sub(now) as i64;
        Reply::Integer(match unit {
            TimeUnit::Millis => remaining_ms,
            TimeUnit::Seconds => (remaining_ms + 500) / 1000,
        })
    }

    pub(super) fn persist<S: ChangeSink>(&mut self, key: &[u8], now: u64, sink: &mut S) -> Reply {
        if !self.is_live(key, now, sink) || !self.clear_expiry(key) {
            return Reply::Integer(0);
        }
        sink.record(WriteOp::Persist { key });
        self.notify(Class::Generic, "persist", key);
        Reply::Integer(1)
    }
}
