//! The bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO) on a
//! shard's store: ports of Redis 7.0's `bitops.c`, argument checks and key lookups in its
//! order. Bitmaps are strings. Writes are logged as written (deterministic given the prior
//! value), BITOP as the SET (or DEL) of its result.

mod bits;

use bytes::Bytes;

use self::bits::{BitOp, Overflow};
use super::compact::CompactBytes;
use super::keyspace::TtlUpdate;
use super::value::Value;
use super::Store;
use crate::change::{ChangeSink, LoggedTtl, WriteOp};
use crate::command::{CommandError, KeyOp};
use crate::notify::Class;
use crate::number::parse_i64;
use crate::reply::Reply;

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

fn text(message: &str) -> CommandError {
    CommandError::Text(message.into())
}

fn int(arg: &[u8]) -> Result<i64, CommandError> {
    parse_i64(arg).ok_or(CommandError::NotAnInteger)
}

fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

/// Redis's `getBitOffsetFromArgument`: a bit offset within `proto-max-bulk-len` bytes; with
/// `bits`, the `#n` form (the n-th field of that width) too.
fn bit_offset(arg: &[u8], bits: Option<u32>, max_len: usize) -> Result<u64, CommandError> {
    let (digits, scale) = match (arg.first(), bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], i64::from(bits)),
        _ => (arg, 1),
    };
    parse_i64(digits)
        .and_then(|offset| offset.checked_mul(scale))
        .filter(|&offset| offset >= 0 && ((offset >> 3) as u64) < max_len as u64)
        .map(|offset| offset as u64)
        .ok_or_else(|| text(BAD_OFFSET))
}

/// BITFIELD's `i<bits>` or `u<bits>` (signed up to 64 bits, unsigned up to 63).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CommandError> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(text(BAD_TYPE)),
    };
    let max = if signed { 64 } else { 63 };
    parse_i64(&arg[1..])
        .filter(|&bits| (1..=max).contains(&bits))
        .map(|bits| (signed, bits as u32))
        .ok_or_else(|| text(BAD_TYPE))
}

/// A range of BITCOUNT or BITPOS in bits, after Redis's index conversions; `None` when empty.
fn bit_range(start: i64, end: i64, len: usize, in_bits: bool) -> Option<(u64, u64)> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (fix(start), fix(end).min(total - 1));
    if start > end {
        return None;
    }
    Some(if in_bits {
        (start as u64, end as u64)
    } else {
        (start as u64 * 8, end as u64 * 8 + 7)
    })
}

/// One BITFIELD operation.
struct FieldOp {
    kind: FieldKind,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

enum FieldKind {
    Get,
    Set(i64),
    IncrBy(i64),
}

impl Store {
    pub(in crate::store) fn run_bitmap<S: ChangeSink>(
        &mut self,
        op: KeyOp,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        match op {
            KeyOp::SetBit => self.setbit(a, now, sink),
            KeyOp::GetBit => self.getbit(a, now, sink),
            KeyOp::BitCount => self.bitcount(a, now, sink),
            KeyOp::BitPos => self.bitpos(a, now, sink),
            KeyOp::BitOp => self.bitop(a, now, sink),
            KeyOp::BitField => self.bitfield(a, false, now, sink),
            _ => self.bitfield(a, true, now, sink),
        }
    }

    /// The string at `key` for a bit write, zero-padded to hold byte `byte`, and whether it
    /// was created or grew (Redis's `lookupStringForBitCommand`). The value is taken out of
    /// its entry, not copied (a bit write to a large bitmap costs what Redis's does): the
    /// caller puts it back with [`Self::store_bits`] or [`Self::put_back`].
    fn bit_target<S: ChangeSink>(
        &mut self,
        key: &[u8],
        byte: u64,
        now: u64,
        sink: &mut S,
    ) -> Result<(Vec<u8>, bool), CommandError> {
        let exists = match self.lookup(key, now, sink) {
            None => false,
            Some(Value::Str(_)) => true,
            Some(_) => return Err(CommandError::WrongType),
        };
        let mut value = match self.map.get_mut(key) {
            Some(entry) if exists => {
                self.data_bytes -= entry.value.payload_len();
                match std::mem::replace(&mut entry.value, Value::Str(CompactBytes::default())) {
                    Value::Str(old) => old.into_vec(),
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        };
        let needed = byte as usize + 1;
        let grew = value.len() < needed;
        if grew {
            CompactBytes::reserve_growth(&mut value, needed);
            value.resize(needed, 0);
        }
        Ok((value, !exists || grew))
    }

    /// Stores a bit command's result, keeping the TTL, and logs the command as written.
    fn store_bits<S: ChangeSink>(&mut self, name: &str, a: &[Bytes], value: Vec<u8>, sink: &mut S) {
        sink.record(WriteOp::Command {
            name,
            key: &a[0],
            args: &a[1..],
        });
        self.put_back(&a[0], value);
    }

    /// Puts a value taken by [`Self::bit_target`] back, unchanged or not.
    fn put_back(&mut self, key: &[u8], value: Vec<u8>) {
        self.upsert(key, CompactBytes::appended(value), TtlUpdate::Keep);
    }

    /// `f` of the string at `key`, counted as a keyspace hit or miss, without a copy.
    fn with_string<S: ChangeSink, R>(
        &mut self,
        key: &[u8],
        now: u64,
        sink: &mut S,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, CommandError> {
        let result = match self.lookup(key, now, sink) {
            None => Ok(None),
            Some(Value::Str(value)) => Ok(Some(f(value.as_slice()))),
            Some(_) => Err(CommandError::WrongType),
        };
        self.count_lookup(key, !matches!(result, Ok(None)));
        result
    }

    fn setbit<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let offset = bit_offset(&a[1], None, self.config.max_value_len)?;
        let on = match parse_i64(&a[2]) {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(text(BAD_BIT)),
        };
        // The bit is set where the string lies (grown as Redis's `sdsgrowzero` grows it).
        let needed = (offset >> 3) as usize + 1;
        let (old, changed) = self.change_string(&a[0], now, sink, |value, existed, sink| {
            let grew = value.len() < needed;
            if grew {
                CompactBytes::reserve_growth(value, needed);
                value.resize(needed, 0);
            }
            let old = bits::set_bit(value, offset, on);
            let changed = !existed || grew || old != on;
            if changed {
                sink.record(WriteOp::Command {
                    name: "setbit",
                    key: &a[0],
                    args: &a[1..],
                });
            }
            (old, changed)
        })?;
        self.changes = Some(u64::from(changed));
        if changed {
            self.notify(Class::String, "setbit", &a[0]);
        }
        Ok(Reply::Integer(i64::from(old)))
    }

    fn getbit<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let offset = bit_offset(&a[1], None, self.config.max_value_len)?;
        let bit = self.with_string(&a[0], now, sink, |value| bits::get_bit(value, offset))?;
        Ok(Reply::Integer(i64::from(bit.unwrap_or(false))))
    }

    /// `BITCOUNT key [start end [BYTE|BIT]]`: the key is looked up before the range parses.
    fn bitcount<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let count = self.with_string(&a[0], now, sink, |value| bitcount(value, a))?;
        count.unwrap_or(Ok(Reply::Integer(0)))
    }

    /// `BITPOS key bit [start [end [BYTE|BIT]]]`.
    fn bitpos<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let bit = match int(&a[1])? {
            0 => false,
            1 => true,
            _ => return Err(text("ERR The bit argument must be 1 or 0.")),
        };
        let pos = self.with_string(&a[0], now, sink, |value| bitpos(value, bit, a))?;
        pos.unwrap_or(Ok(Reply::Integer(if bit { -1 } else { 0 })))
    }

    /// `BITOP op destkey key [key ...]`; logged as the SET (or DEL) of the result.
    fn bitop<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let op = if is(&a[0], "and") {
            BitOp::And
        } else if is(&a[0], "or") {
            BitOp::Or
        } else if is(&a[0], "xor") {
            BitOp::Xor
        } else if is(&a[0], "not") {
            BitOp::Not
        } else {
            return Err(CommandError::Syntax);
        };
        if op == BitOp::Not && a.len() != 3 {
            return Err(text(
                "ERR BITOP NOT must be called with a single source key.",
            ));
        }
        let mut sources = Vec::with_capacity(a.len() - 2);
        for key in &a[2..] {
            sources.push(self.read_counted(key, now, sink)?.unwrap_or_default());
        }
        let refs: Vec<&[u8]> = sources.iter().map(|s| &s[..]).collect();
        let result = bits::bitop(op, &refs);
        let dest = &a[1];
        let len = result.len() as i64;
        if result.is_empty() {
            let live = self.is_live(dest, now, sink);
            if live {
                self.del(std::slice::from_ref(dest), now, sink);
            }
            self.changes = Some(u64::from(live));
        } else {
            sink.record(WriteOp::Set {
                key: dest,
                value: &result,
                ttl: LoggedTtl::None,
            });
            self.upsert(dest, Bytes::from(result), TtlUpdate::Clear);
            self.notify(Class::String, "set", dest);
        }
        Ok(Reply::Integer(len))
    }

    /// BITFIELD and BITFIELD_RO: every operation parsed first, then the key, then the work.
    fn bitfield<S: ChangeSink>(
        &mut self,
        a: &[Bytes],
        read_only: bool,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let max_len = self.config.max_value_len;
        let mut ops = Vec::new();
        let mut overflow = Overflow::Wrap;
        let mut writes = false;
        let mut highest = 0u64;
        let mut j = 1;
        while j < a.len() {
            let left = a.len() - j - 1;
            let name = &a[j];
            let get = is(name, "get") && left >= 2;
            let set = is(name, "set") && left >= 3;
            let incr = is(name, "incrby") && left >= 3;
            if is(name, "overflow") && left >= 1 {
                overflow = if is(&a[j + 1], "wrap") {
                    Overflow::Wrap
                } else if is(&a[j + 1], "sat") {
                    Overflow::Sat
                } else if is(&a[j + 1], "fail") {
                    Overflow::Fail
                } else {
                    return Err(text("ERR Invalid OVERFLOW type specified"));
                };
                j += 2;
                continue;
            }
            if !(get || set || incr) {
                return Err(CommandError::Syntax);
            }
            let (signed, bits) = field_type(&a[j + 1])?;
            let offset = bit_offset(&a[j + 2], Some(bits), max_len)?;
            let kind = if get {
                FieldKind::Get
            } else {
                writes = true;
                highest = highest.max(offset + u64::from(bits) - 1);
                let operand = int(&a[j + 3])?;
                if set {
                    FieldKind::Set(operand)
                } else {
                    FieldKind::IncrBy(operand)
                }
            };
            ops.push(FieldOp {
                kind,
                signed,
                bits,
                offset,
                overflow,
            });
            j += if get { 3 } else { 4 };
        }
        let (mut value, dirty) = if writes {
            if read_only {
                return Err(text("ERR BITFIELD_RO only supports the GET subcommand"));
            }
            self.bit_target(&a[0], highest >> 3, now, sink)?
        } else {
            let value = self.with_string(&a[0], now, sink, <[u8]>::to_vec)?;
            (value.unwrap_or_default(), false)
        };
        let mut changes = 0;
        let replies = ops
            .iter()
            .map(|op| {
                let (old, new) = match (op.signed, &op.kind) {
                    (true, FieldKind::Get) => {
                        return Reply::Integer(bits::get_signed(&value, op.offset, op.bits))
                    }
                    (false, FieldKind::Get) => {
                        return Reply::Integer(bits::get_unsigned(&value, op.offset, op.bits) as i64)
                    }
                    (true, kind) => {
                        let old = bits::get_signed(&value, op.offset, op.bits);
                        let (base, incr) = match *kind {
                            FieldKind::Set(v) => (v, 0),
                            _ => (old, operand(kind)),
                        };
                        let new = match bits::add_signed(base, incr, op.bits, op.overflow) {
                            Ok(v) | Err(Some(v)) => v,
                            Err(None) => return Reply::NullBulk,
                        };
                        let reply = if matches!(kind, FieldKind::Set(_)) {
                            old
                        } else {
                            new
                        };
                        bits::set_unsigned(&mut value, op.offset, op.bits, new as u64);
                        (old as u64, (new as u64, reply))
                    }
                    (false, kind) => {
                        let old = bits::get_unsigned(&value, op.offset, op.bits);
                        let (base, incr) = match *kind {
                            FieldKind::Set(v) => (v as u64, 0),
                            _ => (old, operand(kind)),
                        };
                        let new = match bits::add_unsigned(base, incr, op.bits, op.overflow) {
                            Ok(v) | Err(Some(v)) => v,
                            Err(None) => return Reply::NullBulk,
                        };
                        let reply = if matches!(kind, FieldKind::Set(_)) {
                            old
                        } else {
                            new
                        };
                        bits::set_unsigned(&mut value, op.offset, op.bits, new);
                        (old, (new, reply as i64))
                    }
                };
                let (new, reply) = new;
                if dirty || old != new {
                    changes += 1;
                }
                Reply::Integer(reply)
            })
            .collect();
        // A key created or grown is stored (and logged) even when every write failed.
        if changes > 0 || dirty {
            self.store_bits("bitfield", a, value, sink);
        } else if writes {
            self.put_back(&a[0], value);
        }
        if changes > 0 {
            self.notify(Class::String, "setbit", &a[0]);
        }
        if !read_only {
            self.changes = Some(changes);
        }
        Ok(Reply::Array(replies))
    }
}

/// BITCOUNT's range and count over `value`.
fn bitcount(value: &[u8], a: &[Bytes]) -> Result<Reply, CommandError> {
    let range = match a.len() {
        1 => bit_range(0, -1, value.len(), false),
        3 | 4 => {
            let (start, end) = (int(&a[1])?, int(&a[2])?);
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Integer(0));
            }
            let in_bits = match a.get(3) {
                None => false,
                Some(unit) if is(unit, "bit") => true,
                Some(unit) if is(unit, "byte") => false,
                Some(_) => return Err(CommandError::Syntax),
            };
            bit_range(start, end, value.len(), in_bits)
        }
        _ => return Err(CommandError::Syntax),
    };
    Ok(Reply::Integer(range.map_or(0, |(first, last)| {
        bits::count_bits(value, first, last) as i64
    })))
}

/// BITPOS's range and search over `value`.
fn bitpos(value: &[u8], bit: bool, a: &[Bytes]) -> Result<Reply, CommandError> {
    let len = value.len();
    let (range, end_given) = match a.len() {
        2 => (bit_range(0, -1, len, false), false),
        3..=5 => {
            let start = int(&a[2])?;
            let in_bits = match a.get(4) {
                None => false,
                Some(unit) if is(unit, "bit") => true,
                Some(unit) if is(unit, "byte") => false,
                Some(_) => return Err(CommandError::Syntax),
            };
            let end = match a.get(3) {
                Some(end) => int(end)?,
                None => -1,
            };
            (bit_range(start, end, len, in_bits), a.len() >= 4)
        }
        _ => return Err(CommandError::Syntax),
    };
    let Some((first, last)) = range else {
        return Ok(Reply::Integer(-1));
    };
    Ok(Reply::Integer(
        match bits::find_bit(value, bit, first, last) {
            Some(at) => at as i64,
            // Past an open range the string reads as zero-padded.
            None if !bit && !end_given => last as i64 + 1,
            None => -1,
        },
    ))
}

fn operand(kind: &FieldKind) -> i64 {
    match *kind {
        FieldKind::Get => 0,
        FieldKind::Set(v) | FieldKind::IncrBy(v) => v,
    }
}

#[cfg(test)]
mod tests;
