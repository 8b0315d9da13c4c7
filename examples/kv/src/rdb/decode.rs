//! Reading RDB: a [`Decoder`] walks a whole file held in memory item by item (AUX fields,
//! databases, function libraries, keys), and checks the CRC-64 at the end. Every length is
//! checked against the bytes that are left before anything is allocated, so a damaged or
//! hostile file is an error with its offset, never a panic or a huge allocation.

use std::fmt;

use bytes::Bytes;

use super::{crc64, intset, kind, listpack, lzf, opcode, ziplist, RdbValue, RDB_VERSION};

/// Why a file (or payload) could not be read, and where: the offset of the first byte of
/// the thing that made no sense.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte offset {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for RdbError {}

/// One item of a file.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Aux(Bytes, Bytes),
    SelectDb(u64),
    ResizeDb {
        keys: u64,
        expires: u64,
    },
    /// A function library's code (`FUNCTION2`).
    Function(Bytes),
    Key {
        key: Bytes,
        value: RdbValue,
        /// Unix ms.
        expire_at_ms: Option<u64>,
    },
    /// The end, with the checksum verified (or stored as 0: not checked).
    End,
}

/// Reads a file item by item.
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    version: u16,
    ended: bool,
}

impl<'a> Decoder<'a> {
    /// Checks the `REDIS` magic and the version (1 to 10).
    pub fn new(buf: &'a [u8]) -> Result<Decoder<'a>, RdbError> {
        let err = |message: String| RdbError { offset: 0, message };
        if buf.len() < 9 || &buf[..5] != b"REDIS" {
            return Err(err("not an RDB file (no REDIS magic)".into()));
        }
        let version = std::str::from_utf8(&buf[5..9])
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .ok_or_else(|| err("RDB version is not a number".into()))?;
        if !(1..=RDB_VERSION).contains(&version) {
            return Err(err(format!("can't handle RDB format version {version}")));
        }
        Ok(Decoder {
            buf,
            pos: 9,
            version,
            ended: false,
        })
    }

    /// A decoder of the items in `buf`, a part of a file of `version` that begins where an
    /// item does (see `incremental.rs`).
    pub(crate) fn part(buf: &'a [u8], version: u16) -> Decoder<'a> {
        Decoder {
            buf,
            pos: 0,
            version,
            ended: false,
        }
    }

    pub fn version(&self) -> u16 {
        self.version
    }

    /// Where the next item starts.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The next item; after [`Item::End`], `End` again.
    pub fn next_item(&mut self) -> Result<Item, RdbError> {
        if self.ended {
            return Ok(Item::End);
        }
        let mut expire_at_ms = None;
        loop {
            let at = self.pos;
            let op = self.byte()?;
            match op {
                opcode::EOF => {
                    self.check_sum(at)?;
                    self.ended = true;
                    return Ok(Item::End);
                }
                opcode::SELECTDB => return Ok(Item::SelectDb(self.len()?)),
                opcode::RESIZEDB => {
                    let keys = self.len()?;
                    let expires = self.len()?;
                    return Ok(Item::ResizeDb { keys, expires });
                }
                opcode::AUX => {
                    let name = self.string()?;
                    let value = self.string()?;
                    return Ok(Item::Aux(name, value));
                }
                opcode::FUNCTION2 => return Ok(Item::Function(self.string()?)),
                opcode::FUNCTION_PRE_GA => {
                    return Err(self.error_at(
                        at,
                        "pre-release function format (Redis 7.0 RC1) is not supported",
                    ))
                }
                opcode::MODULE_AUX => {
                    return Err(self.error_at(
                        at,
                        "module auxiliary data: this server has no modules to load it",
                    ))
                }
                opcode::EXPIRETIME_MS => {
                    let b = self.take(8)?;
                    expire_at_ms = Some(u64::from_le_bytes(b.try_into().unwrap_or_default()));
                }
                opcode::EXPIRETIME => {
                    let b = self.take(4)?;
                    let secs = u32::from_le_bytes(b.try_into().unwrap_or_default());
                    expire_at_ms = Some(secs as u64 * 1000);
                }
                // LRU/LFU hints: nothing to keep.
                opcode::IDLE => {
                    self.len()?;
                }
                opcode::FREQ => {
                    self.byte()?;
                }
                ty => {
                    let key = self.string()?;
                    let value = self.value(ty, at)?;
                    return Ok(Item::Key {
                        key,
                        value,
                        expire_at_ms,
                    });
                }
            }
        }
    }

    fn check_sum(&mut self, eof_at: usize) -> Result<(), RdbError> {
        if self.version < 5 {
            return Ok(());
        }
        let at = self.pos;
        let stored = u64::from_le_bytes(
            self.take(8)
                .map_err(|_| self.error_at(at, "the file ends inside its checksum"))?
                .try_into()
                .unwrap_or_default(),
        );
        if stored != 0 {
            let computed = crc64::crc64(&self.buf[..=eof_at]);
            if computed != stored {
                return Err(self.error_at(
                    at,
                    &format!("wrong checksum (stored {stored:016x}, computed {computed:016x})"),
                ));
            }
        }
        if self.pos != self.buf.len() {
            return Err(self.error_at(self.pos, "bytes after the checksum"));
        }
        Ok(())
    }

    pub(super) fn error_at(&self, offset: usize, message: &str) -> RdbError {
        RdbError {
            offset,
            message: message.to_string(),
        }
    }

    fn byte(&mut self) -> Result<u8, RdbError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| self.error_at(self.pos, "unexpected end of file"))?;
        self.pos += 1;
        Ok(b)
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let buf: &'a [u8] = self.buf;
        let end = self.pos.checked_add(n).filter(|&e| e <= buf.len());
        match end {
            Some(end) => {
                let s = &buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.error_at(
                self.pos,
                &format!(
                    "unexpected end of file ({n} bytes needed, {} left)",
                    buf.len() - self.pos
                ),
            )),
        }
    }

    /// A length, or the special-encoding marker of a string (`Err(kind)`).
    fn len_or_special(&mut self) -> Result<Result<u64, u8>, RdbError> {
        let at = self.pos;
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Ok((b & 0x3f) as u64),
            1 => Ok(((b & 0x3f) as u64) << 8 | self.byte()? as u64),
            2 => match b {
                0x80 => Ok(u32::from_be_bytes(self.take(4)?.try_into().unwrap_or_default()) as u64),
                0x81 => Ok(u64::from_be_bytes(
                    self.take(8)?.try_into().unwrap_or_default(),
                )),
                _ => return Err(self.error_at(at, &format!("unknown length encoding 0x{b:02x}"))),
            },
            _ => Err(b & 0x3f),
        })
    }

    pub(super) fn len(&mut self) -> Result<u64, RdbError> {
        let at = self.pos;
        self.len_or_special()?
            .map_err(|_| self.error_at(at, "a string encoding where a length belongs"))
    }

    /// A count of things each at least `min_bytes` long: refused if the file cannot hold
    /// them (so no allocation is sized by a damaged count).
    pub(super) fn count(&mut self, min_bytes: usize) -> Result<usize, RdbError> {
        let at = self.pos;
        let n = self.len()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes.max(1) as u64) > left {
            return Err(self.error_at(at, &format!("count {n} is more than the file holds")));
        }
        Ok(n as usize)
    }

    pub(crate) fn string(&mut self) -> Result<Bytes, RdbError> {
        let at = self.pos;
        match self.len_or_special()? {
            Ok(len) => {
                let len = usize::try_from(len).map_err(|_| self.error_at(at, "string too long"))?;
                Ok(Bytes::copy_from_slice(self.take(len)?))
            }
            Err(0) => Ok(Bytes::from((self.byte()? as i8).to_string())),
            Err(1) => Ok(Bytes::from(
                i16::from_le_bytes(self.take(2)?.try_into().unwrap_or_default()).to_string(),
            )),
            Err(2) => Ok(Bytes::from(
                i32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default()).to_string(),
            )),
            Err(3) => {
                let clen = self.len()? as usize;
                let len = self.len()?;
                // LZF expands at most ~ (255+2)/2 per byte of input... bound it by a sane ratio.
                if len > (clen as u64).saturating_mul(300).saturating_add(64) {
                    return Err(self.error_at(at, "LZF string claims an impossible length"));
                }
                let packed = self.take(clen)?;
                lzf::decompress(packed, len as usize)
                    .map(Bytes::from)
                    .map_err(|why| self.error_at(at, why))
            }
            Err(other) => Err(self.error_at(at, &format!("unknown string encoding {other}"))),
        }
    }

    fn double_text(&mut self) -> Result<f64, RdbError> {
        let at = self.pos;
        let len = self.byte()?;
        let v = match len {
            253 => f64::NAN,
            254 => f64::INFINITY,
            255 => f64::NEG_INFINITY,
            n => {
                let text = self.take(n as usize)?;
                std::str::from_utf8(text)
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .ok_or_else(|| self.error_at(at, "score is not a number"))?
            }
        };
        if v.is_nan() {
            return Err(self.error_at(at, "sorted set with a NaN score"));
        }
        Ok(v)
    }

    fn value(&mut self, ty: u8, at: usize) -> Result<RdbValue, RdbError> {
        let blob = |d: &mut Self, f: fn(&[u8]) -> Result<Vec<Bytes>, String>| {
            let start = d.pos;
            let s = d.string()?;
            f(&s).map_err(|why| d.error_at(start, &why))
        };
        Ok(match ty {
            kind::COREWIRE_COMMANDS => {
                let start = self.pos;
                let records = self.string()?;
                RdbValue::Commands(
                    parse_records(&records).map_err(|why| self.error_at(start, &why))?,
                )
            }
            kind::STRING => RdbValue::String(self.string()?),
            kind::LIST | kind::SET => {
                let n = self.count(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.string()?);
                }
                if ty == kind::LIST {
                    RdbValue::List(items)
                } else {
                    RdbValue::Set(items)
                }
            }
            kind::ZSET | kind::ZSET_2 => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let member = self.string()?;
                    let score = if ty == kind::ZSET_2 {
                        let s_at = self.pos;
                        let v = f64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default());
                        if v.is_nan() {
                            return Err(self.error_at(s_at, "sorted set with a NaN score"));
                        }
                        v
                    } else {
                        self.double_text()?
                    };
                    pairs.push((member, score));
                }
                RdbValue::ZSet(pairs)
            }
            kind::HASH => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let field = self.string()?;
                    pairs.push((field, self.string()?));
                }
                RdbValue::Hash(pairs)
            }
            kind::SET_INTSET => RdbValue::Set(blob(self, intset::decode)?),
            kind::SET_LISTPACK => RdbValue::Set(blob(self, listpack::decode)?),
            kind::LIST_ZIPLIST => RdbValue::List(blob(self, ziplist::decode)?),
            kind::HASH_ZIPMAP => {
                let start = self.pos;
                let s = self.string()?;
                RdbValue::Hash(ziplist::decode_zipmap(&s).map_err(|why| self.error_at(start, &why))?)
            }
            kind::HASH_ZIPLIST | kind::HASH_LISTPACK => {
                let start = self.pos;
                let f = if ty == kind::HASH_ZIPLIST { ziplist::decode } else { listpack::decode };
                let items = blob(self, f)?;
                RdbValue::Hash(pairs(items).ok_or_else(|| self.error_at(start, "hash with an odd number of elements"))?)
            }
            kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK => {
                let start = self.pos;
                let f = if ty == kind::ZSET_ZIPLIST { ziplist::decode } else { listpack::decode };
                let items = blob(self, f)?;
                let bad = || self.error_at(start, "sorted set with an odd number of elements or a bad score");
                let mut out = Vec::with_capacity(items.len() / 2);
                for (member, score) in pairs(items).ok_or_else(bad)? {
                    let score = std::str::from_utf8(&score)
                        .ok()
                        .and_then(parse_score)
                        .ok_or_else(bad)?;
                    out.push((member, score));
                }
                RdbValue::ZSet(out)
            }
            kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
                let nodes = self.count(1)?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    let container = if ty == kind::LIST_QUICKLIST_2 {
                        let c_at = self.pos;
                        match self.len()? {
                            1 => 1,
                            2 => 2,
                            c => return Err(self.error_at(c_at, &format!("quicklist node with unknown container {c}"))),
                        }
                    } else {
                        2
                    };
                    if container == 1 {
                        // A plain node: one element as it is.
                        items.push(self.string()?);
                        continue;
                    }
                    let f = if ty == kind::LIST_QUICKLIST { ziplist::decode } else { listpack::decode };
                    items.extend(blob(self, f)?);
                }
                RdbValue::List(items)
            }
            kind::MODULE_PRE_GA | kind::MODULE_2 => {
                return Err(self.error_at(at, &format!("a key holds a module value (RDB type {ty}); this server has no modules to load it")))
            }
            kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 | kind::STREAM_LISTPACKS_3 => {
                RdbValue::Stream(Box::new(super::stream::read(self, ty)?))
            }
            other => return Err(self.error_at(at, &format!("unknown value type {other}"))),
        })
    }
}

fn pairs(items: Vec<Bytes>) -> Option<Vec<(Bytes, Bytes)>> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Some(out)
}

/// A score's text as Redis writes it in a listpack/ziplist ("inf", "-inf", digits).
fn parse_score(text: &str) -> Option<f64> {
    let v = match text {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// Why a DUMP payload was refused (Redis's two RESTORE errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpError {
    /// "ERR DUMP payload version or checksum are wrong"
    VersionOrChecksum,
    /// "ERR Bad data format"
    BadFormat,
}

impl DumpError {
    pub fn message(self) -> &'static str {
        match self {
            DumpError::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            DumpError::BadFormat => "ERR Bad data format",
        }
    }
}

/// Reads a DUMP payload (Redis's `verifyDumpPayload`, then the value): a version newer than
/// 10 or a wrong checksum is the first error, a value that does not parse (or leaves bytes
/// over) the second.
pub fn decode_dump(payload: &[u8]) -> Result<RdbValue, DumpError> {
    if payload.len() < 10 {
        return Err(DumpError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return Err(DumpError::VersionOrChecksum);
    }
    let stored = u64::from_le_bytes(footer[2..].try_into().unwrap_or_default());
    let computed = crc64::crc64(&payload[..payload.len() - 8]);
    if stored != 0 && stored != computed {
        return Err(DumpError::VersionOrChecksum);
    }
    let mut d = Decoder {
        buf: body,
        pos: 0,
        version,
        ended: false,
    };
    let ty = d.byte().map_err(|_| DumpError::BadFormat)?;
    let value = d.value(ty, 0).map_err(|_| DumpError::BadFormat)?;
    if d.pos != body.len() || value.is_empty_collection() {
        return Err(DumpError::BadFormat);
    }
    Ok(value)
}

/// Reads a FUNCTION DUMP payload in Redis 7.0's form (see `encode::function_payload`): the
/// libraries' code. `None` for a version newer than 10, a wrong checksum, or anything but
/// `FUNCTION2` records.
pub fn decode_function_payload(payload: &[u8]) -> Option<Vec<Bytes>> {
    let body_len = payload.len().checked_sub(10)?;
    let footer = &payload[body_len..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return None;
    }
    let stored = u64::from_le_bytes(footer[2..].try_into().ok()?);
    if stored != 0 && stored != crc64::crc64(&payload[..payload.len() - 8]) {
        return None;
    }
    let mut d = Decoder {
        buf: &payload[..body_len],
        pos: 0,
        version,
        ended: false,
    };
    let mut codes = Vec::new();
    while d.pos < body_len {
        if d.byte().ok()? != opcode::FUNCTION2 {
            return None;
        }
        codes.push(d.string().ok()?);
    }
    Some(codes)
}

/// The RESP records of a `kind::COREWIRE_COMMANDS` value: every byte must be whole records.
fn parse_records(records: &[u8]) -> Result<Vec<Vec<Bytes>>, String> {
    use crate::resp::{ParserLimits, RequestParser};
    let mut buf = bytes::BytesMut::from(records);
    let mut parser = RequestParser::new(ParserLimits {
        max_bulk_len: records.len(),
        max_array_len: records.len(),
        ..ParserLimits::default()
    });
    let mut commands = Vec::new();
    while !buf.is_empty() {
        match parser.parse(&mut buf) {
            Ok(Some(args)) if !args.is_empty() => commands.push(args.into_iter().collect()),
            _ => return Err("a rebuild-commands value with a bad record".into()),
        }
    }
    Ok(commands)
}
