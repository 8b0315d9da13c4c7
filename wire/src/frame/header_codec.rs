//! The `WireHeader` flatbuffer (wire/schema/frame.fbs), read and written by hand.
//!
//! Why not the generated code: the header is one flat table of scalars and one string, and on
//! a small-message RPC load the generic verifier plus the generic builder were about a tenth
//! of a server's CPU per request (BENCHMARKS.md). This reader accepts any valid
//! flatbuffer of the table, as any other flatbuffers implementation may write it (fields
//! absent or in any order, any vtable, shared or not), with bounds-checked safe code and the
//! verifier's rules (alignment, in-bounds vtable and table, NUL-terminated UTF-8 string).
//! The writer emits one fixed layout. The tests hold both to the generated code: everything
//! the builder writes reads back the same here, everything written here passes the
//! generated verifier and reads back the same there, and mutated bytes never panic.
//!
//! Layout written (offsets in the header, little endian; `T` = 28 is the table):
//!
//! ```text
//!  0  u32  root offset = 28
//!  4  vtable: u16 vtable len = 24, u16 table len, then one u16 per field (id order)
//! 28  i32  table's vtable offset = 24
//! 32  u64  correlation_id        40 u32 service_id     44 u32 method_id
//! 48  u32  payload_len           52 u32 attachment_len 56 u32 error_message offset (or 0)
//! 60  u8   version  61 u8 kind   62 u8 status   63 pad
//! 64  u64  deadline_us (only when present; the table ends at 64 without it)
//! ..  the error message: u32 length, bytes, NUL (only when present)
//! ```

use std::time::Duration;

use bytes::BufMut;

use super::error::FrameError;
use super::header::{deadline_to_micros, BodyLens, FrameHeader, FrameKind, StatusCode};
use super::preamble::VERSION;

/// Field ids in schema order: each field's vtable entry is at `4 + 2 * id`.
mod field {
    pub const VERSION: usize = 0;
    pub const KIND: usize = 1;
    pub const SERVICE_ID: usize = 2;
    pub const METHOD_ID: usize = 3;
    pub const CORRELATION_ID: usize = 4;
    pub const STATUS: usize = 5;
    pub const PAYLOAD_LEN: usize = 6;
    pub const ATTACHMENT_LEN: usize = 7;
    pub const DEADLINE_US: usize = 8;
    pub const ERROR_MESSAGE: usize = 9;
    pub const COUNT: usize = 10;
}

const TABLE: usize = 28;
const VTABLE: usize = 4;
const VTABLE_LEN: usize = 4 + 2 * field::COUNT;
/// Where the fixed part ends: without a deadline, and with one.
const END_PLAIN: usize = 64;
const END_DEADLINE: usize = 72;
/// Field positions relative to the table (what the vtable holds).
const AT_CORRELATION: usize = 4;
const AT_SERVICE: usize = 12;
const AT_METHOD: usize = 16;
const AT_PAYLOAD: usize = 20;
const AT_ATTACHMENT: usize = 24;
const AT_ERROR: usize = 28;
const AT_VERSION: usize = 32;
const AT_KIND: usize = 33;
const AT_STATUS: usize = 34;
const AT_DEADLINE: usize = 36;

/// Bytes [`write`] produces for `header`.
pub(crate) fn encoded_len(header: &FrameHeader) -> usize {
    let fixed = if header.deadline.is_some() {
        END_DEADLINE
    } else {
        END_PLAIN
    };
    fixed + header.error_message.as_ref().map_or(0, |m| 4 + m.len() + 1)
}

/// Appends the header's flatbuffer ([`encoded_len`] bytes) to `dst`.
pub(crate) fn write(
    header: &FrameHeader,
    payload_len: u32,
    attachment_len: u32,
    dst: &mut impl BufMut,
) {
    let deadline = header.deadline.map(deadline_to_micros);
    let end = if deadline.is_some() {
        END_DEADLINE
    } else {
        END_PLAIN
    };
    let mut fixed = [0u8; END_DEADLINE];
    fixed[..TABLE + 4].copy_from_slice(&prefix(deadline.is_some(), header.error_message.is_some()));
    let mut put = |at: usize, bytes: &[u8]| {
        fixed[TABLE + at..TABLE + at + bytes.len()].copy_from_slice(bytes)
    };
    put(AT_CORRELATION, &header.correlation_id.to_le_bytes());
    put(AT_SERVICE, &header.service_id.to_le_bytes());
    put(AT_METHOD, &header.method_id.to_le_bytes());
    put(AT_PAYLOAD, &payload_len.to_le_bytes());
    put(AT_ATTACHMENT, &attachment_len.to_le_bytes());
    put(
        AT_VERSION,
        &[VERSION, header.kind.code(), header.status.code()],
    );
    if let Some(us) = deadline {
        put(AT_DEADLINE, &us.to_le_bytes());
    }
    if header.error_message.is_some() {
        // The string starts where the fixed part ends; the offset is from the field itself.
        put(AT_ERROR, &((end - TABLE - AT_ERROR) as u32).to_le_bytes());
    }
    dst.put_slice(&fixed[..end]);
    if let Some(message) = &header.error_message {
        dst.put_u32_le(message.len() as u32);
        dst.put_slice(message.as_bytes());
        dst.put_u8(0);
    }
}

/// The first bytes [`write`] produces for a header without an error message (root offset,
/// vtable, the table's vtable offset), without and with a deadline: what [`read`] recognises.
const PLAIN_PREFIX: [u8; TABLE + 4] = prefix(false, false);
const DEADLINE_PREFIX: [u8; TABLE + 4] = prefix(true, false);

/// Root offset, vtable and the table's vtable offset of the layout [`write`] emits: the one
/// place that says where each field is.
const fn prefix(deadline: bool, error: bool) -> [u8; TABLE + 4] {
    let mut p = [0u8; TABLE + 4];
    p[0] = TABLE as u8;
    let table_len = if deadline { END_DEADLINE } else { END_PLAIN } - TABLE;
    let entries: [usize; 2 + field::COUNT] = [
        VTABLE_LEN,
        table_len,
        AT_VERSION,
        AT_KIND,
        AT_SERVICE,
        AT_METHOD,
        AT_CORRELATION,
        AT_STATUS,
        AT_PAYLOAD,
        AT_ATTACHMENT,
        if deadline { AT_DEADLINE } else { 0 },
        if error { AT_ERROR } else { 0 },
    ];
    let mut i = 0;
    while i < entries.len() {
        // Every entry is below 256: one little-endian byte, the high byte stays 0.
        p[VTABLE + 2 * i] = entries[i] as u8;
        i += 1;
    }
    p[TABLE] = (TABLE - VTABLE) as u8;
    p
}

/// Reads a `WireHeader` flatbuffer: the header and the body lengths it declares.
pub(crate) fn read(buf: &[u8]) -> Result<(FrameHeader, BodyLens), FrameError> {
    // What this module writes for every request and reply comes in one of two layouts whose
    // fields sit at known places: one compare instead of following the offsets.
    let fixed_end = match buf.get(..TABLE + 4) {
        Some(p) if p == PLAIN_PREFIX && buf.len() >= END_PLAIN => Some(END_PLAIN),
        Some(p) if p == DEADLINE_PREFIX && buf.len() >= END_DEADLINE => Some(END_DEADLINE),
        _ => None,
    };
    match fixed_end {
        Some(end) => read_fixed(&buf[..end]),
        None => read_any(buf),
    }
}

/// [`read`] of a buffer that starts with [`PLAIN_PREFIX`] or [`DEADLINE_PREFIX`] and holds
/// that layout's fixed part.
fn read_fixed(buf: &[u8]) -> Result<(FrameHeader, BodyLens), FrameError> {
    let u32_of =
        |at: usize| u32::from_le_bytes(buf[TABLE + at..TABLE + at + 4].try_into().unwrap());
    let u64_of =
        |at: usize| u64::from_le_bytes(buf[TABLE + at..TABLE + at + 8].try_into().unwrap());
    let [version, kind_code, status_code] =
        [AT_VERSION, AT_KIND, AT_STATUS].map(|at| buf[TABLE + at]);
    if version != VERSION {
        return Err(FrameError::UnsupportedVersion(version));
    }
    let kind = FrameKind::from_code(kind_code).ok_or(FrameError::UnknownKind(kind_code))?;
    let status =
        StatusCode::from_code(status_code).ok_or(FrameError::UnknownStatus(status_code))?;
    let header = FrameHeader {
        kind,
        service_id: u32_of(AT_SERVICE),
        method_id: u32_of(AT_METHOD),
        correlation_id: u64_of(AT_CORRELATION),
        status,
        deadline: (buf.len() == END_DEADLINE).then(|| Duration::from_micros(u64_of(AT_DEADLINE))),
        error_message: None,
    };
    let lens = BodyLens {
        payload: u32_of(AT_PAYLOAD),
        attachment: u32_of(AT_ATTACHMENT),
    };
    Ok((header, lens))
}

/// [`read`] of any valid layout, following the offsets.
pub(crate) fn read_any(buf: &[u8]) -> Result<(FrameHeader, BodyLens), FrameError> {
    let t = Table::parse(buf)?;
    let version = t.u8(field::VERSION)?.unwrap_or(VERSION);
    if version != VERSION {
        return Err(FrameError::UnsupportedVersion(version));
    }
    let kind_code = t.u8(field::KIND)?.unwrap_or(0);
    let kind = FrameKind::from_code(kind_code).ok_or(FrameError::UnknownKind(kind_code))?;
    let status_code = t.u8(field::STATUS)?.unwrap_or(0);
    let status =
        StatusCode::from_code(status_code).ok_or(FrameError::UnknownStatus(status_code))?;
    let header = FrameHeader {
        kind,
        service_id: t.u32(field::SERVICE_ID)?.unwrap_or(0),
        method_id: t.u32(field::METHOD_ID)?.unwrap_or(0),
        correlation_id: t.u64(field::CORRELATION_ID)?.unwrap_or(0),
        status,
        deadline: t.u64(field::DEADLINE_US)?.map(Duration::from_micros),
        error_message: t.string(field::ERROR_MESSAGE)?.map(str::to_owned),
    };
    let lens = BodyLens {
        payload: t.u32(field::PAYLOAD_LEN)?.unwrap_or(0),
        attachment: t.u32(field::ATTACHMENT_LEN)?.unwrap_or(0),
    };
    Ok((header, lens))
}

fn invalid(why: &str) -> FrameError {
    FrameError::InvalidHeader(why.to_owned())
}

fn bytes_at<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], FrameError> {
    at.checked_add(N)
        .and_then(|end| buf.get(at..end))
        .map(|b| b.try_into().expect("slice of N bytes"))
        .ok_or_else(|| invalid("offset out of bounds"))
}

fn u16_at(buf: &[u8], at: usize) -> Result<u16, FrameError> {
    bytes_at(buf, at).map(u16::from_le_bytes)
}

fn u32_at(buf: &[u8], at: usize) -> Result<u32, FrameError> {
    bytes_at(buf, at).map(u32::from_le_bytes)
}

/// The root table, its vtable checked to lie inside the buffer. The checks are the flatbuffers
/// verifier's (the Rust crate's): alignment and bounds of every offset followed and every
/// field read, relative to the buffer; like it, the table length in the vtable is not used.
struct Table<'a> {
    buf: &'a [u8],
    /// Where the table starts.
    pos: usize,
    /// Where its vtable starts.
    vtable: usize,
    vtable_len: usize,
}

impl<'a> Table<'a> {
    fn parse(buf: &'a [u8]) -> Result<Self, FrameError> {
        let pos = u32_at(buf, 0)? as usize;
        if !pos.is_multiple_of(4) {
            return Err(invalid("unaligned table"));
        }
        let soffset = i32::from_le_bytes(bytes_at(buf, pos)?);
        let vtable = usize::try_from(pos as i64 - i64::from(soffset))
            .ok()
            .filter(|&at| at < buf.len())
            .ok_or_else(|| invalid("vtable out of bounds"))?;
        if !vtable.is_multiple_of(2) {
            return Err(invalid("unaligned vtable"));
        }
        let vtable_len = usize::from(u16_at(buf, vtable)?);
        if !vtable_len.is_multiple_of(2) || vtable + vtable_len > buf.len() {
            return Err(invalid("vtable out of bounds"));
        }
        Ok(Table {
            buf,
            pos,
            vtable,
            vtable_len,
        })
    }

    /// Where field `id` of `size` bytes is, `None` when absent (its default applies).
    fn field(&self, id: usize, size: usize) -> Result<Option<usize>, FrameError> {
        let entry = 4 + 2 * id;
        if entry >= self.vtable_len {
            return Ok(None);
        }
        let offset = usize::from(u16_at(self.buf, self.vtable + entry)?);
        if offset == 0 {
            return Ok(None);
        }
        let at = self.pos + offset;
        if !at.is_multiple_of(size) {
            return Err(invalid("unaligned field"));
        }
        if at + size > self.buf.len() {
            return Err(invalid("field out of bounds"));
        }
        Ok(Some(at))
    }

    fn u8(&self, id: usize) -> Result<Option<u8>, FrameError> {
        self.field(id, 1)?
            .map(|at| bytes_at(self.buf, at).map(|[b]| b))
            .transpose()
    }

    fn u32(&self, id: usize) -> Result<Option<u32>, FrameError> {
        self.field(id, 4)?
            .map(|at| u32_at(self.buf, at))
            .transpose()
    }

    fn u64(&self, id: usize) -> Result<Option<u64>, FrameError> {
        self.field(id, 8)?
            .map(|at| bytes_at(self.buf, at).map(u64::from_le_bytes))
            .transpose()
    }

    fn string(&self, id: usize) -> Result<Option<&'a str>, FrameError> {
        let Some(at) = self.field(id, 4)? else {
            return Ok(None);
        };
        let start = at
            .checked_add(u32_at(self.buf, at)? as usize)
            .ok_or_else(|| invalid("string offset overflows"))?;
        if !start.is_multiple_of(4) {
            return Err(invalid("unaligned string"));
        }
        let len = u32_at(self.buf, start)? as usize;
        // `start` is in the buffer, so these sums cannot overflow.
        let text = self
            .buf
            .get(start + 4..start + 4 + len)
            .ok_or_else(|| invalid("string out of bounds"))?;
        if self.buf.get(start + 4 + len) != Some(&0) {
            return Err(invalid("string without its NUL terminator"));
        }
        std::str::from_utf8(text)
            .map(Some)
            .map_err(|_| invalid("string is not UTF-8"))
    }
}
