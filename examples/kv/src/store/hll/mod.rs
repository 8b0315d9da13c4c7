//! PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST on a shard's store: ports of Redis 7.0's
//! `hyperloglog.c` commands over the sans-I/O [`crate::hyperloglog`] values. HLLs are
//! strings; writes are logged as written (deterministic given the prior value and
//! `hll-sparse-max-bytes`). PFCOUNT's refresh of the cached cardinality is stored but not
//! logged: the cache is recomputed on demand after a replay.

use bytes::Bytes;

use super::compact::CompactBytes;
use super::keyspace::TtlUpdate;
use super::Store;
use crate::change::{ChangeSink, LoggedTtl, WriteOp};
use crate::command::{CommandError, KeyOp};
use crate::hyperloglog::{self as hll, Encoding, REGISTERS};
use crate::notify::Class;
use crate::reply::Reply;

fn not_hll() -> CommandError {
    CommandError::Text("WRONGTYPE Key is not a valid HyperLogLog string value.".into())
}

fn corrupt() -> CommandError {
    CommandError::Text("INVALIDOBJ Corrupted HLL object detected".into())
}

impl Store {
    pub(in crate::store) fn run_hll<S: ChangeSink>(
        &mut self,
        op: KeyOp,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        match op {
            KeyOp::PfAdd => self.pfadd(a, now, sink),
            KeyOp::PfCount => self.pfcount(a, now, sink),
            KeyOp::PfMerge => self.pfmerge(a, now, sink),
            KeyOp::PfDebug => self.pfdebug(a, now, sink),
            _ => match hll::selftest(self.config.encoding.hll_sparse_max_bytes, || {
                fastrand::u32(..)
            }) {
                Ok(()) => Ok(Reply::ok()),
                Err(text) => Err(CommandError::Text(text)),
            },
        }
    }

    /// The HLL at `key` (`None` when missing); WRONGTYPE for another type or a string that
    /// is not an HLL.
    fn read_hll<S: ChangeSink>(
        &mut self,
        key: &[u8],
        counted: bool,
        now: u64,
        sink: &mut S,
    ) -> Result<Option<(Vec<u8>, Encoding)>, CommandError> {
        let value = if counted {
            self.read_counted(key, now, sink)?
        } else {
            self.read(key, now, sink)?
        };
        let Some(value) = value else {
            return Ok(None);
        };
        let encoding = hll::validate(&value).map_err(|_| not_hll())?;
        Ok(Some((value.to_vec(), encoding)))
    }

    /// Stores an HLL back, keeping the key's TTL (with the vector's spare room: no copy).
    fn store_hll(&mut self, key: &[u8], value: Vec<u8>) {
        self.upsert(key, CompactBytes::appended(value), TtlUpdate::Keep);
    }

    fn log_written<S: ChangeSink>(&mut self, name: &str, a: &[Bytes], sink: &mut S) {
        sink.record(WriteOp::Command {
            name,
            key: &a[0],
            args: &a[1..],
        });
    }

    fn pfadd<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let sparse_max = self.config.encoding.hll_sparse_max_bytes;
        // Changed where it lies: a dense HLL is 12 KiB.
        let added = self.change_string(&a[0], now, sink, |value, existed, sink| {
            let mut updated = 0;
            if existed {
                hll::validate(value).map_err(|_| not_hll())?;
            } else {
                *value = hll::new_sparse();
                updated = 1;
            }
            for element in &a[1..] {
                match hll::add(value, element, sparse_max) {
                    Ok(changed) => updated += u64::from(changed),
                    Err(_) => {
                        // Redis updates in place: the registers set before the corruption
                        // was found stay set (and the reply is the error).
                        if updated > 0 {
                            sink.record(WriteOp::Set {
                                key: &a[0],
                                value,
                                ttl: LoggedTtl::Keep,
                            });
                        }
                        return Err(corrupt());
                    }
                }
            }
            if updated > 0 {
                hll::invalidate_cache(value);
                sink.record(WriteOp::Command {
                    name: "pfadd",
                    key: &a[0],
                    args: &a[1..],
                });
            }
            Ok(updated)
        })?;
        let updated = added?;
        self.changes = Some(updated);
        if updated > 0 {
            self.notify(Class::String, "pfadd", &a[0]);
        }
        Ok(Reply::Integer(i64::from(updated > 0)))
    }

    fn pfcount<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        if a.len() > 1 {
            let mut max = [0u8; REGISTERS];
            for key in a {
                if let Some((value, _)) = self.read_hll(key, true, now, sink)? {
                    hll::merge(&mut max, &value).map_err(|_| corrupt())?;
                }
            }
            return Ok(Reply::Integer(hll::count_registers(&max) as i64));
        }
        let Some((mut value, _)) = self.read_hll(&a[0], true, now, sink)? else {
            return Ok(Reply::Integer(0));
        };
        if let Some(card) = hll::cached(&value) {
            return Ok(Reply::Integer(card as i64));
        }
        let card = hll::count(&value).map_err(|_| corrupt())?;
        hll::set_cache(&mut value, card);
        self.store_hll(&a[0], value);
        self.changes = Some(1);
        Ok(Reply::Integer(card as i64))
    }

    fn pfmerge<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let mut max = [0u8; REGISTERS];
        let mut dense = false;
        let mut dest = None;
        for (i, key) in a.iter().enumerate() {
            let Some((value, encoding)) = self.read_hll(key, true, now, sink)? else {
                continue;
            };
            dense |= encoding == Encoding::Dense;
            hll::merge(&mut max, &value).map_err(|_| corrupt())?;
            if i == 0 {
                dest = Some(value);
            }
        }
        let mut value = dest.unwrap_or_else(hll::new_sparse);
        if dense {
            hll::to_dense(&mut value).map_err(|_| corrupt())?;
        }
        let sparse_max = self.config.encoding.hll_sparse_max_bytes;
        for (index, &reg) in max.iter().enumerate() {
            if reg != 0 {
                // A corrupted destination was reported by the merge above.
                let _ = hll::set(&mut value, index, reg, sparse_max);
            }
        }
        hll::invalidate_cache(&mut value);
        self.log_written("pfmerge", a, sink);
        self.store_hll(&a[0], value);
        self.notify(Class::String, "pfadd", &a[0]);
        Ok(Reply::ok())
    }

    /// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`.
    fn pfdebug<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let sub = &a[0];
        let Some((mut value, encoding)) = self.read_hll(&a[1], false, now, sink)? else {
            return Err(CommandError::Text(
                "ERR The specified key does not exist".into(),
            ));
        };
        let is = |name: &str| sub.eq_ignore_ascii_case(name.as_bytes());
        if is("getreg") || is("todense") {
            let converted = hll::to_dense(&mut value).map_err(|_| corrupt())?;
            self.changes = Some(u64::from(converted));
            if converted {
                sink.record(WriteOp::Command {
                    name: "pfdebug",
                    key: b"todense",
                    args: &a[1..],
                });
            }
            let reply = if is("getreg") {
                Reply::Array(
                    hll::dense_registers(&value)
                        .into_iter()
                        .map(|reg| Reply::Integer(i64::from(reg)))
                        .collect(),
                )
            } else {
                Reply::Integer(i64::from(converted))
            };
            if converted {
                self.store_hll(&a[1], value);
            }
            Ok(reply)
        } else if is("decode") {
            self.changes = Some(0);
            if encoding != Encoding::Sparse {
                return Err(CommandError::Text("ERR HLL encoding is not sparse".into()));
            }
            Ok(Reply::Bulk(Bytes::from(hll::decode_sparse(&value))))
        } else if is("encoding") {
            self.changes = Some(0);
            Ok(Reply::Simple(Bytes::from_static(
                encoding.name().as_bytes(),
            )))
        } else {
            Err(CommandError::Text(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(sub)
            )))
        }
    }
}

#[cfg(test)]
mod tests;
