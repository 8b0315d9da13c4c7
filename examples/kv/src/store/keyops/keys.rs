//! RENAME, RENAMENX, COPY, KEYS, SCAN, RANDOMKEY, OBJECT and MEMORY USAGE.

use bytes::Bytes;

use super::Cx;
use crate::change::ChangeSink;
use crate::command::{CommandError, KeyOp, KeyOp as Op};
use crate::glob::glob_match;
use crate::notify::Class;
use crate::reply::Reply;
use crate::store::compact::CompactBytes;
use crate::store::types::args::{int, is};

impl<S: ChangeSink> Cx<'_, S> {
    /// Port of Redis 7.0's `renameGenericCommand`; logged as `RENAME src dst`, which replays
    /// exactly once both keys are as they were (the AOF rewrite images both).
    pub fn rename(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let nx = self.op == KeyOp::RenameNx;
        let (src, dst) = (&a[0], &a[1]);
        if !self.store.is_live(src, self.now, self.sink) {
            return Err(CommandError::Text("ERR no such key".into()));
        }
        let done = if nx { Reply::Integer(1) } else { Reply::ok() };
        if src == dst {
            return Ok(if nx { Reply::Integer(0) } else { done });
        }
        if self.store.is_live(dst, self.now, self.sink) {
            if nx {
                return Ok(Reply::Integer(0));
            }
            self.store.remove(dst);
        }
        self.log("rename", a);
        if let Some((_, entry, at)) = self.store.remove(src) {
            self.store
                .insert_new(CompactBytes::new(dst), entry.value, at);
        }
        self.store.notify(Class::Generic, "rename_from", src);
        self.store.notify(Class::Generic, "rename_to", dst);
        Ok(done)
    }

    /// Port of Redis 7.0's `copyCommand` with one database; logged as `COPY src dst REPLACE`.
    pub fn copy(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (src, dst) = (&a[0], &a[1]);
        let mut replace = false;
        let mut i = 2;
        while i < a.len() {
            if is(&a[i], "replace") {
                replace = true;
            } else if is(&a[i], "db") && i + 1 < a.len() {
                let db = int(&a[i + 1])?;
                if i32::try_from(db).is_err() {
                    return Err(CommandError::NotAnInteger);
                }
                // Database 0 only, answered as Redis Cluster does (as SELECT is).
                if db != 0 {
                    return Err(CommandError::Text(
                        "ERR Copying to another database is not allowed in cluster mode".into(),
                    ));
                }
                i += 1;
            } else {
                return Err(CommandError::Syntax);
            }
            i += 1;
        }
        if src == dst {
            return Err(CommandError::Text(
                "ERR source and destination objects are the same".into(),
            ));
        }
        let live = self.store.is_live(src, self.now, self.sink);
        self.store.count_lookup(src, live);
        if !live {
            return Ok(Reply::Integer(0));
        }
        if self.store.is_live(dst, self.now, self.sink) {
            if !replace {
                return Ok(Reply::Integer(0));
            }
            self.store.remove(dst);
        }
        self.log(
            "copy",
            &[src.clone(), dst.clone(), Bytes::from_static(b"REPLACE")],
        );
        let copied = self
            .store
            .map
            .get(&src[..])
            .map(|entry| (entry.value.clone(), self.store.expiring.of(src, entry)));
        if let Some((value, at)) = copied {
            self.store.insert_new(CompactBytes::new(dst), value, at);
        }
        self.store.notify(Class::Generic, "copy_to", dst);
        Ok(Reply::Integer(1))
    }

    /// KEYS: the live keys matching the pattern (expired ones are skipped, not removed).
    pub fn keys(&mut self, a: &[Bytes]) -> Reply {
        let pattern = &a[0];
        let all = &pattern[..] == b"*";
        let now = self.now;
        let expiring = &self.store.expiring;
        Reply::Array(
            self.store
                .map
                .iter()
                .filter(|(key, entry)| {
                    !expiring.expired(key, entry, now) && (all || glob_match(pattern, key, false))
                })
                .map(|(key, _)| Reply::Bulk(key.to_bytes()))
                .collect(),
        )
    }

    /// SCAN `cursor [MATCH pattern] [COUNT count] [TYPE type]` over this shard: the cursor
    /// is the number of map positions still to visit, walked downwards (see
    /// [`crate::store::Store`] on why a downward walk meets every key that stays), 0 to start.
    pub fn scan(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let cursor = std::str::from_utf8(&a[0])
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .ok_or_else(|| CommandError::Text("ERR invalid cursor".into()))?;
        let (mut pattern, mut kind, mut count) = (None, None, 10usize);
        let mut i = 1;
        while i < a.len() {
            let Some(value) = a.get(i + 1) else {
                return Err(CommandError::Syntax);
            };
            if is(&a[i], "count") {
                let n = int(value)?;
                if n < 1 {
                    return Err(CommandError::Syntax);
                }
                count = n as usize;
            } else if is(&a[i], "match") {
                pattern = Some(value.clone()).filter(|p| &p[..] != b"*");
            } else if is(&a[i], "type") {
                kind = Some(value.clone());
            } else {
                return Err(CommandError::Syntax);
            }
            i += 2;
        }
        let len = self.store.map.len();
        let top = if cursor == 0 {
            len
        } else {
            (cursor as usize).min(len)
        };
        let bottom = top.saturating_sub(count);
        let mut keys = Vec::new();
        for index in (bottom..top).rev() {
            let Some((key, entry)) = self.store.map.get_index(index) else {
                continue;
            };
            let wanted = !self.store.expiring.expired(key, entry, self.now)
                && pattern.as_ref().is_none_or(|p| glob_match(p, key, false))
                && kind
                    .as_ref()
                    .is_none_or(|t| is(t, entry.value.value_type().name()));
            if wanted {
                keys.push(Reply::Bulk(key.to_bytes()));
            }
        }
        Ok(Reply::Array(vec![
            Reply::Bulk(Bytes::from(bottom.to_string())),
            Reply::Array(keys),
        ]))
    }

    /// RANDOMKEY: a random live key; expired ones met on the way are removed (and logged), as
    /// Redis does.
    pub fn random_key(&mut self) -> Reply {
        let mut draws = 0;
        while !self.store.map.is_empty() {
            let index = fastrand::usize(..self.store.map.len());
            let Some((key, entry)) = self.store.map.get_index(index) else {
                break;
            };
            if !self.store.expiring.expired(key, entry, self.now) {
                return Reply::Bulk(key.to_bytes());
            }
            if self.store.expiry_view != super::super::ExpiryView::Delete {
                // A replica deletes nothing itself: after as many draws as Redis makes, an
                // expired key is answered rather than looping on a keyspace of them.
                draws += 1;
                if draws >= 100 {
                    return Reply::Bulk(key.to_bytes());
                }
                continue;
            }
            let key = key.clone();
            self.store.remove_expired(&key, self.sink);
        }
        Reply::NullBulk
    }

    /// OBJECT ENCODING / REFCOUNT / FREQ / IDLETIME and MEMORY USAGE of one key (nil when
    /// it does not exist), with Redis 7.0's errors for the policy-dependent ones.
    pub fn object(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        if self.op == Op::MemoryUsage {
            memory_usage_options(&a[1..])?;
        }
        // Lazy expiry first (it logs the removal), then a look at the entry itself.
        if self.store.lookup(&a[0], self.now, self.sink).is_none() {
            return Ok(Reply::NullBulk);
        }
        let Some(entry) = self.store.map.get(&a[0]) else {
            return Ok(Reply::NullBulk);
        };
        let store = &*self.store;
        Ok(match self.op {
            Op::ObjectEncoding => Reply::Bulk(Bytes::from_static(
                store.encoding_of(&entry.value).as_bytes(),
            )),
            Op::ObjectRefCount => Reply::Integer(store.refcount_of(&entry.value)),
            Op::ObjectIdleTime => {
                match store.idle_seconds(entry, self.now) {
                    Some(idle) => Reply::Integer(idle),
                    None => return Err(CommandError::Text(
                        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please \
                         note that when switching between policies at runtime LRU and LFU data \
                         will take some time to adjust."
                            .into(),
                    )),
                }
            }
            Op::ObjectFreq => match store.frequency(entry) {
                Some(freq) => Reply::Integer(freq),
                None => {
                    return Err(CommandError::Text(
                        "ERR An LFU maxmemory policy is not selected, access frequency not \
                         tracked. Please note that when switching between policies at runtime \
                         LRU and LFU data will take some time to adjust."
                            .into(),
                    ))
                }
            },
            _ => Reply::Integer(store.memory_usage(&a[0], &entry.value)),
        })
    }
}

/// MEMORY USAGE's `[SAMPLES count]` (the estimate here counts every element anyway).
fn memory_usage_options(options: &[Bytes]) -> Result<(), CommandError> {
    let mut i = 0;
    while i < options.len() {
        if options[i].eq_ignore_ascii_case(b"samples") && i + 1 < options.len() {
            match crate::number::parse_i64(&options[i + 1]) {
                Some(n) if n >= 0 => {}
                Some(_) => return Err(CommandError::Syntax),
                None => return Err(CommandError::NotAnInteger),
            }
            i += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    Ok(())
}
