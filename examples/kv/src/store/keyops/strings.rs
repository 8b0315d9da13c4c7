//! SETNX, SETEX, PSETEX, GETDEL, GETEX, GETRANGE (SUBSTR), SETRANGE, INCRBYFLOAT, MSETNX,
//! EXPIRETIME, PEXPIRETIME.

use bytes::{Bytes, BytesMut};

use super::Cx;
use crate::change::{ChangeSink, LoggedTtl, WriteOp};
use crate::command::{CommandError, KeyOp, SetCommand, SetCondition, SetExpiry};
use crate::notify::Class;
use crate::reply::Reply;
use crate::store::keyspace::TtlUpdate;
use crate::store::types::args::{format_human, int, is, parse_float};

/// Which expiry option GETEX saw.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GetExOption {
    None,
    Persist,
    Ex,
    Px,
    ExAt,
    PxAt,
}

impl<S: ChangeSink> Cx<'_, S> {
    fn invalid_expire(&self) -> CommandError {
        CommandError::InvalidExpireTime {
            command: self.op.name(),
        }
    }

    /// Redis's `getExpireMillisecondsOrReply`: the absolute expiry in milliseconds.
    fn expire_at(&self, arg: &[u8], seconds: bool, relative: bool) -> Result<u64, CommandError> {
        let amount = int(arg)?;
        if amount <= 0 || (seconds && amount > i64::MAX / 1000) {
            return Err(self.invalid_expire());
        }
        let ms = if seconds { amount * 1000 } else { amount };
        let at = if relative {
            ms.checked_add(self.now as i64)
                .ok_or_else(|| self.invalid_expire())?
        } else {
            ms
        };
        Ok(at as u64)
    }

    pub fn setnx(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let set = SetCommand {
            key: a[0].clone(),
            value: a[1].clone(),
            condition: SetCondition::IfAbsent,
            expiry: SetExpiry::Clear,
            get: false,
        };
        let reply = self.store.set(set, self.now, self.sink)?;
        Ok(Reply::Integer(i64::from(reply == Reply::ok())))
    }

    /// SETEX and PSETEX `key time value`.
    pub fn setex(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let at = self.expire_at(&a[1], self.op == KeyOp::SetEx, true)?;
        self.sink.record(WriteOp::Set {
            key: &a[0],
            value: &a[2],
            ttl: LoggedTtl::At(at),
        });
        self.store
            .upsert(&a[0], Bytes::copy_from_slice(&a[2]), TtlUpdate::At(at));
        self.store.notify(Class::String, "set", &a[0]);
        self.store.notify(Class::Generic, "expire", &a[0]);
        Ok(Reply::ok())
    }

    pub fn getdel(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.read_counted(&a[0], self.now, self.sink)?;
        if value.is_some() {
            self.store.del(&a[..1], self.now, self.sink);
        }
        Ok(Reply::bulk_or_null(value))
    }

    /// Port of Redis 7.0's `getexCommand`: options as SET parses them (PERSIST instead of
    /// KEEPTTL), then the key, then the expiry's value.
    pub fn getex(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let mut option = GetExOption::None;
        let mut time: Option<&Bytes> = None;
        let mut i = 1;
        while i < a.len() {
            let next = a.get(i + 1);
            let wanted = if is(&a[i], "persist") {
                GetExOption::Persist
            } else if is(&a[i], "ex") {
                GetExOption::Ex
            } else if is(&a[i], "px") {
                GetExOption::Px
            } else if is(&a[i], "exat") {
                GetExOption::ExAt
            } else if is(&a[i], "pxat") {
                GetExOption::PxAt
            } else {
                return Err(CommandError::Syntax);
            };
            if option != GetExOption::None && option != wanted {
                return Err(CommandError::Syntax);
            }
            option = wanted;
            if wanted != GetExOption::Persist {
                time = Some(next.ok_or(CommandError::Syntax)?);
                i += 1;
            }
            i += 1;
        }
        let Some(value) = self.store.read_counted(&a[0], self.now, self.sink)? else {
            return Ok(Reply::NullBulk);
        };
        let at = match (option, time) {
            (GetExOption::Ex, Some(t)) => Some(self.expire_at(t, true, true)?),
            (GetExOption::Px, Some(t)) => Some(self.expire_at(t, false, true)?),
            (GetExOption::ExAt, Some(t)) => Some(self.expire_at(t, true, false)?),
            (GetExOption::PxAt, Some(t)) => Some(self.expire_at(t, false, false)?),
            _ => None,
        };
        match at {
            Some(at) if at <= self.now => {
                self.store.del(&a[..1], self.now, self.sink);
            }
            Some(at) => {
                self.sink.record(WriteOp::PExpireAt {
                    key: &a[0],
                    at_ms: at,
                });
                self.store.set_expiry(&a[0], at);
                self.store.notify(Class::Generic, "expire", &a[0]);
            }
            None if option == GetExOption::Persist && self.store.clear_expiry(&a[0]) => {
                self.sink.record(WriteOp::Persist { key: &a[0] });
                self.store.notify(Class::Generic, "persist", &a[0]);
            }
            None => {}
        }
        Ok(Reply::Bulk(value))
    }

    /// Port of Redis 7.0's `getrangeCommand`.
    pub fn getrange(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (mut start, mut end) = (int(&a[1])?, int(&a[2])?);
        let Some(value) = self.store.read_counted(&a[0], self.now, self.sink)? else {
            return Ok(Reply::Bulk(Bytes::new()));
        };
        if start < 0 && end < 0 && start > end {
            return Ok(Reply::Bulk(Bytes::new()));
        }
        let len = value.len() as i64;
        if start < 0 {
            start += len;
        }
        if end < 0 {
            end += len;
        }
        start = start.max(0);
        end = end.max(0).min(len - 1);
        if start > end || len == 0 {
            return Ok(Reply::Bulk(Bytes::new()));
        }
        Ok(Reply::Bulk(value.slice(start as usize..=end as usize)))
    }

    /// Port of Redis 7.0's `setrangeCommand`; logged as the SET of the result.
    pub fn setrange(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let offset = int(&a[1])?;
        if offset < 0 {
            return Err(CommandError::Text("ERR offset is out of range".into()));
        }
        let offset = offset as usize;
        let patch = &a[2];
        let old = self.store.read(&a[0], self.now, self.sink)?;
        if patch.is_empty() {
            return Ok(Reply::Integer(old.map_or(0, |v| v.len() as i64)));
        }
        let new_len = offset
            .checked_add(patch.len())
            .filter(|&len| len <= self.store.config.max_value_len)
            .ok_or(CommandError::StringTooLong)?;
        let old = old.unwrap_or_default();
        let mut value = BytesMut::with_capacity(new_len.max(old.len()));
        value.extend_from_slice(&old);
        if value.len() < new_len {
            value.resize(new_len, 0);
        }
        value[offset..new_len].copy_from_slice(patch);
        let value = value.freeze();
        self.sink.record(WriteOp::Set {
            key: &a[0],
            value: &value,
            ttl: LoggedTtl::Keep,
        });
        let len = value.len() as i64;
        self.store.upsert(&a[0], value, TtlUpdate::Keep);
        self.store.notify(Class::String, "setrange", &a[0]);
        Ok(Reply::Integer(len))
    }

    /// Port of Redis 7.0's `incrbyfloatCommand`; logged as the SET of the result, keeping the
    /// TTL.
    pub fn incrbyfloat(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let current_text = self.store.read(&a[0], self.now, self.sink)?;
        let current = match &current_text {
            None => 0.0,
            Some(text) => parse_float(text).ok_or(CommandError::NotAFloat)?,
        };
        let delta = parse_float(&a[1]).ok_or(CommandError::NotAFloat)?;
        let updated = current + delta;
        if !updated.is_finite() {
            return Err(CommandError::Text(
                "ERR increment would produce NaN or Infinity".into(),
            ));
        }
        let value = exact_integer_sum(current_text.as_deref(), &a[1])
            .unwrap_or_else(|| format_human(updated));
        self.sink.record(WriteOp::Set {
            key: &a[0],
            value: &value,
            ttl: LoggedTtl::Keep,
        });
        self.store.upsert(&a[0], value.clone(), TtlUpdate::Keep);
        self.store.notify(Class::String, "incrbyfloat", &a[0]);
        Ok(Reply::Bulk(value))
    }

    /// MSETNX on one shard (the router refuses keys on several): all or nothing.
    pub fn msetnx(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        for key in a.iter().step_by(2) {
            if self.store.is_live(key, self.now, self.sink) {
                return Ok(Reply::Integer(0));
            }
        }
        let pairs: Vec<(Bytes, Bytes)> = a
            .chunks_exact(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect();
        self.store.mset(pairs, self.sink);
        Ok(Reply::Integer(1))
    }

    /// EXPIRETIME and PEXPIRETIME: the absolute expiry, -1 without one, -2 without the key.
    pub fn expiretime(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let live = self.store.is_live(&a[0], self.now, self.sink);
        self.store.count_lookup(&a[0], live);
        if !live {
            return Ok(Reply::Integer(-2));
        }
        let at = (self.store.map.get(&a[0][..])).and_then(|e| self.store.expiring.of(&a[0], e));
        Ok(Reply::Integer(match at {
            None => -1,
            Some(at) if self.op == KeyOp::PExpireTime => at as i64,
            Some(at) => (at as i64 + 500) / 1000,
        }))
    }
}

/// Redis adds in `long double`, whose 64-bit mantissa holds every integer below 2^64 exactly;
/// `f64` does not. When both operands are integers the sum is computed exactly instead, and
/// printed as Redis prints an integral `long double`.
fn exact_integer_sum(current: Option<&[u8]>, delta: &[u8]) -> Option<Bytes> {
    let integer = |text: &[u8]| -> Option<i128> {
        if text.len() > 21 {
            return None;
        }
        std::str::from_utf8(text).ok()?.parse::<i128>().ok()
    };
    let sum = current.map_or(Some(0), integer)? + integer(delta)?;
    (sum.unsigned_abs() < 1 << 64).then(|| Bytes::from(sum.to_string()))
}
