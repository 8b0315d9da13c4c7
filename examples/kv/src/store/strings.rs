//! String commands: GET, SET, GETSET, INCRBY (and friends), APPEND, STRLEN, MGET, MSET.

use bytes::Bytes;

use super::compact::CompactBytes;

use super::keyspace::TtlUpdate;
use super::value::Value;
use super::Store;
use crate::change::{ChangeSink, LoggedTtl, WriteOp};
use crate::command::{CommandError, SetCommand, SetCondition, SetExpiry};
use crate::notify::Class;
use crate::number::parse_i64;
use crate::reply::Reply;

impl Store {
    pub(super) fn set<S: ChangeSink>(
        &mut self,
        set: SetCommand,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let ttl = match set.expiry {
            SetExpiry::Clear => TtlUpdate::Clear,
            SetExpiry::Keep => TtlUpdate::Keep,
            SetExpiry::AtMs(at) => TtlUpdate::At(at),
            // Redis rejects a relative expiry whose absolute time would overflow a signed
            // 64-bit millisecond clock.
            SetExpiry::AfterMs(ms) => match now.checked_add(ms) {
                Some(at) if at <= i64::MAX as u64 => TtlUpdate::At(at),
                _ => return Err(CommandError::InvalidExpireTime { command: "set" }),
            },
        };
        if set.condition == SetCondition::Always && !set.get {
            // The plain SET: one probe for a key stored without a TTL. The DEL of
            // an expired key, if any, is logged inside, before this SET.
            self.overwrite(
                &set.key,
                Value::Str(CompactBytes::new(&set.value)),
                ttl,
                now,
                sink,
            );
            sink.record(WriteOp::Set {
                key: &set.key,
                value: &set.value,
                ttl: logged_ttl(ttl),
            });
            self.notify_set(&set.key, ttl);
            return Ok(Reply::ok());
        }
        let old = if set.get {
            self.read_counted(&set.key, now, sink)?
        } else {
            None
        };
        let exists = old.is_some() || self.is_live(&set.key, now, sink);
        let write = match set.condition {
            SetCondition::Always => true,
            SetCondition::IfAbsent => !exists,
            SetCondition::IfPresent => exists,
        };
        if write {
            sink.record(WriteOp::Set {
                key: &set.key,
                value: &set.value,
                ttl: logged_ttl(ttl),
            });
            self.upsert(&set.key, CompactBytes::new(&set.value), ttl);
            self.notify_set(&set.key, ttl);
        }
        Ok(match (set.get, write) {
            (true, _) => Reply::bulk_or_null(old),
            (false, true) => Reply::ok(),
            (false, false) => Reply::NullBulk,
        })
    }

    pub(super) fn getset<S: ChangeSink>(
        &mut self,
        key: Bytes,
        value: Bytes,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let old = self.read_counted(&key, now, sink)?;
        sink.record(WriteOp::Set {
            key: &key,
            value: &value,
            ttl: LoggedTtl::None,
        });
        self.upsert(&key, CompactBytes::new(&value), TtlUpdate::Clear);
        self.notify(Class::String, "set", &key);
        Ok(Reply::bulk_or_null(old))
    }

    pub(super) fn incr_by<S: ChangeSink>(
        &mut self,
        key: Bytes,
        delta: i64,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        // Parsed where it is stored and formatted on the stack: no copy of the old value and
        // no allocation for the new one, which fits inline.
        let mut digits = [0; 20];
        // A key without a TTL cannot have expired: one probe reads and replaces it.
        if let Some(entry) = self.map.get_mut(&key).filter(|entry| !entry.has_ttl) {
            let updated = incremented(Some(&entry.value), delta)?;
            let value = crate::resp::decimal(updated, &mut digits);
            sink.record(WriteOp::Set {
                key: &key,
                value,
                ttl: LoggedTtl::Keep,
            });
            let value = Value::Str(CompactBytes::new(value));
            super::keyspace::replace_value(&mut self.data_bytes, entry, value);
            entry.access = self.memory.clock;
            self.notify(Class::String, "incrby", &key);
            return Ok(Reply::Integer(updated));
        }
        let updated = incremented(self.lookup(&key, now, sink), delta)?;
        let value = crate::resp::decimal(updated, &mut digits);
        // Logged as the resulting value: replay then needs no arithmetic.
        sink.record(WriteOp::Set {
            key: &key,
            value,
            ttl: LoggedTtl::Keep,
        });
        self.upsert(&key, CompactBytes::new(value), TtlUpdate::Keep);
        self.notify(Class::String, "incrby", &key);
        Ok(Reply::Integer(updated))
    }

    pub(super) fn append<S: ChangeSink>(
        &mut self,
        key: Bytes,
        value: Bytes,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let old_len = match self.lookup(&key, now, sink) {
            None => None,
            Some(Value::Str(old)) => Some(old.len()),
            Some(_) => return Err(CommandError::WrongType),
        };
        let new_len = old_len.unwrap_or(0) + value.len();
        if new_len > self.config.max_value_len {
            return Err(CommandError::StringTooLong);
        }
        sink.record(WriteOp::Append {
            key: &key,
            value: &value,
        });
        // Take the old value out of the entry so its allocation can grow in place
        // (`CompactBytes::Growable`): repeated APPENDs are amortised O(appended bytes).
        let mut buffer = match self.map.get_mut(&key[..]) {
            Some(entry) if old_len.is_some() => {
                self.data_bytes -= entry.value.payload_len();
                match std::mem::replace(&mut entry.value, Value::Str(CompactBytes::default())) {
                    Value::Str(old) => old.into_vec(),
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        };
        CompactBytes::reserve_growth(&mut buffer, new_len);
        buffer.extend_from_slice(&value);
        self.upsert(&key, CompactBytes::appended(buffer), TtlUpdate::Keep);
        self.notify(Class::String, "append", &key);
        Ok(Reply::Integer(new_len as i64))
    }

    pub(super) fn strlen<S: ChangeSink>(
        &mut self,
        key: &[u8],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let found = self.lookup(key, now, sink).is_some();
        self.count_lookup(key, found);
        let len = match self.map.get(key).map(|entry| &entry.value) {
            None => 0,
            Some(Value::Str(value)) => value.len(),
            Some(_) => return Err(CommandError::WrongType),
        };
        Ok(Reply::Integer(len as i64))
    }

    pub(super) fn mget<S: ChangeSink>(&mut self, keys: &[Bytes], now: u64, sink: &mut S) -> Reply {
        Reply::Array(
            keys.iter()
                // MGET answers nil for a key of another type.
                .map(|key| Reply::bulk_or_null(self.read_counted(key, now, sink).ok().flatten()))
                .collect(),
        )
    }

    pub(super) fn mset<S: ChangeSink>(
        &mut self,
        pairs: Vec<(Bytes, Bytes)>,
        sink: &mut S,
    ) -> Reply {
        sink.record(WriteOp::MSet(&pairs));
        for (key, value) in pairs {
            self.upsert(&key, CompactBytes::new(&value), TtlUpdate::Clear);
            self.notify(Class::String, "set", &key);
        }
        Reply::ok()
    }

    /// SET's events: `set`, then `expire` when it gave the key a TTL.
    fn notify_set(&mut self, key: &[u8], ttl: TtlUpdate) {
        self.notify(Class::String, "set", key);
        if let TtlUpdate::At(_) = ttl {
            self.notify(Class::Generic, "expire", key);
        }
    }
}

fn logged_ttl(ttl: TtlUpdate) -> LoggedTtl {
    match ttl {
        TtlUpdate::Clear => LoggedTtl::None,
        TtlUpdate::Keep => LoggedTtl::Keep,
        TtlUpdate::At(at) => LoggedTtl::At(at),
    }
}

/// What INCRBY makes of the value at a key (`None`: absent, counted from 0).
fn incremented(value: Option<&Value>, delta: i64) -> Result<i64, CommandError> {
    let current = match value {
        Some(Value::Str(value)) => parse_i64(value).ok_or(CommandError::NotAnInteger)?,
        Some(_) => return Err(CommandError::WrongType),
        None => 0,
    };
    current
        .checked_add(delta)
        .ok_or(CommandError::IncrementOverflow)
}
