//! Writing RDB: lengths, strings (int-encoded, LZF, raw), values in the encodings
//! redis-server 7.0 picks for them, and the file's framing. Everything appends to a
//! `Vec<u8>`; the caller writes the bytes wherever they go.

use super::{crc64, intset, kind, listpack::ListpackWriter, lzf, opcode, strict_i64};
use super::{RDB_VERSION, REDIS_VERSION};

/// The size limits that pick the compact encodings (Redis 7.0's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    /// Bytes per quicklist node (`list-max-listpack-size -2`).
    pub list_max_listpack_bytes: usize,
    /// `rdbcompression`: LZF for strings over 20 bytes.
    pub compression: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            set_max_intset_entries: 512,
            list_max_listpack_bytes: 8192,
            compression: true,
        }
    }
}

/// A value to write, borrowed from wherever it lives. A sorted set's pairs must be in
/// Redis's order (score, then member bytes): the listpack form is read as sorted.
#[derive(Debug, Clone)]
pub enum ObjectRef<'a> {
    String(&'a [u8]),
    List(Vec<&'a [u8]>),
    Set(Vec<&'a [u8]>),
    Hash(Vec<(&'a [u8], &'a [u8])>),
    ZSet(Vec<(&'a [u8], f64)>),
    /// The keyless commands that rebuild the value, as RESP records (`kind::COREWIRE_COMMANDS`,
    /// what earlier versions wrote for streams; kept to make such files in tests).
    Commands(Vec<u8>),
    /// A stream, written as `STREAM_LISTPACKS_2`.
    Stream(Box<super::StreamImage>),
}

pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// A string as Redis's `rdbSaveRawString` writes it.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], compression: bool) {
    if s.len() <= 11 {
        if let Some(v) = strict_i64(s) {
            if let Ok(v) = i8::try_from(v) {
                out.extend_from_slice(&[0xc0, v as u8]);
                return;
            } else if let Ok(v) = i16::try_from(v) {
                out.push(0xc1);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            } else if let Ok(v) = i32::try_from(v) {
                out.push(0xc2);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
        }
    }
    if compression && s.len() > 20 {
        // Compressed in place (no buffer per string), the header appended after it and
        // rotated to the front: its length depends on the compressed size.
        let mark = out.len();
        if lzf::compress_into(s, s.len() - 4, out) {
            let packed = out.len() - mark;
            out.push(0xc3);
            write_len(out, packed as u64);
            write_len(out, s.len() as u64);
            let header = out.len() - mark - packed;
            out[mark..].rotate_right(header);
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Writes `object`'s type byte and value; returns the type written.
pub fn write_object(out: &mut Vec<u8>, object: &ObjectRef<'_>, limits: &Limits) -> u8 {
    let c = limits.compression;
    match object {
        ObjectRef::Commands(records) => {
            out.push(kind::COREWIRE_COMMANDS);
            write_string(out, records, c);
            kind::COREWIRE_COMMANDS
        }
        ObjectRef::Stream(stream) => {
            out.push(kind::STREAM_LISTPACKS_2);
            super::stream::write(out, stream, c);
            kind::STREAM_LISTPACKS_2
        }
        ObjectRef::String(s) => {
            out.push(kind::STRING);
            write_string(out, s, c);
            kind::STRING
        }
        ObjectRef::List(items) => {
            out.push(kind::LIST_QUICKLIST_2);
            let mut nodes: Vec<Vec<u8>> = Vec::new();
            let mut node = ListpackWriter::default();
            for item in items {
                // An element's own cost is at most its length plus 11 header/back bytes.
                if node.count() > 0 && node.len() + item.len() + 11 > limits.list_max_listpack_bytes
                {
                    nodes.push(std::mem::take(&mut node).finish());
                }
                node.push(item);
            }
            if node.count() > 0 {
                nodes.push(node.finish());
            }
            write_len(out, nodes.len() as u64);
            for node in nodes {
                // QUICKLIST_NODE_CONTAINER_PACKED
                write_len(out, 2);
                write_string(out, &node, c);
            }
            kind::LIST_QUICKLIST_2
        }
        ObjectRef::Set(members) => {
            let ints: Option<Vec<i64>> = if members.len() <= limits.set_max_intset_entries {
                members.iter().map(|m| strict_i64(m)).collect()
            } else {
                None
            };
            match ints {
                Some(mut ints) => {
                    ints.sort_unstable();
                    ints.dedup();
                    out.push(kind::SET_INTSET);
                    write_string(out, &intset::encode(&ints), c);
                    kind::SET_INTSET
                }
                None => {
                    out.push(kind::SET);
                    write_len(out, members.len() as u64);
                    for m in members {
                        write_string(out, m, c);
                    }
                    kind::SET
                }
            }
        }
        ObjectRef::Hash(pairs) => {
            let small = pairs.len() <= limits.hash_max_listpack_entries
                && pairs.iter().all(|(f, v)| {
                    f.len() <= limits.hash_max_listpack_value
                        && v.len() <= limits.hash_max_listpack_value
                });
            if small {
                out.push(kind::HASH_LISTPACK);
                let mut lp = ListpackWriter::default();
                for (f, v) in pairs {
                    lp.push(f);
                    lp.push(v);
                }
                write_string(out, &lp.finish(), c);
                kind::HASH_LISTPACK
            } else {
                out.push(kind::HASH);
                write_len(out, pairs.len() as u64);
                for (f, v) in pairs {
                    write_string(out, f, c);
                    write_string(out, v, c);
                }
                kind::HASH
            }
        }
        ObjectRef::ZSet(pairs) => {
            let small = pairs.len() <= limits.zset_max_listpack_entries
                && pairs
                    .iter()
                    .all(|(m, _)| m.len() <= limits.zset_max_listpack_value);
            if small {
                out.push(kind::ZSET_LISTPACK);
                let mut lp = ListpackWriter::default();
                for (m, score) in pairs {
                    lp.push(m);
                    lp.push(super::format_score(*score).as_bytes());
                }
                write_string(out, &lp.finish(), c);
                kind::ZSET_LISTPACK
            } else {
                out.push(kind::ZSET_2);
                write_len(out, pairs.len() as u64);
                // Redis writes them from the highest score down, so loading inserts each
                // at the head of its skiplist.
                for (m, score) in pairs.iter().rev() {
                    write_string(out, m, c);
                    out.extend_from_slice(&score.to_le_bytes());
                }
                kind::ZSET_2
            }
        }
    }
}

/// Writes one key: its expiry (Unix ms) if it has one, then its type, name and value.
pub fn write_key(
    out: &mut Vec<u8>,
    key: &[u8],
    object: &ObjectRef<'_>,
    expire_at_ms: Option<u64>,
    limits: &Limits,
) {
    if let Some(at) = expire_at_ms {
        out.push(opcode::EXPIRETIME_MS);
        out.extend_from_slice(&at.to_le_bytes());
    }
    // The type byte goes before the key, and the value's encoding (so its type) is known
    // only once written: the key goes first after a placeholder, the value after it, and
    // its leading type byte moves into the placeholder (no buffer per key).
    let ty_at = out.len();
    out.push(0);
    write_string(out, key, limits.compression);
    let value_at = out.len();
    let ty = write_object(out, object, limits);
    out[ty_at] = ty;
    out.copy_within(value_at + 1.., value_at);
    out.pop();
}

/// The file's framing around the keys.
#[derive(Debug, Default)]
pub struct RdbWriter;

impl RdbWriter {
    /// `REDIS0010` and the AUX fields redis-server 7.0 writes (no replication ones).
    pub fn header(out: &mut Vec<u8>, ctime_s: u64, used_mem: u64) {
        out.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        let aux = |out: &mut Vec<u8>, name: &str, value: &str| {
            out.push(opcode::AUX);
            write_string(out, name.as_bytes(), false);
            write_string(out, value.as_bytes(), false);
        };
        aux(out, "redis-ver", REDIS_VERSION);
        aux(out, "redis-bits", "64");
        aux(out, "ctime", &ctime_s.to_string());
        aux(out, "used-mem", &used_mem.to_string());
        aux(out, "aof-base", "0");
    }

    /// A function library (Redis 7.0's `FUNCTION2`: the library's code).
    pub fn function(out: &mut Vec<u8>, code: &[u8]) {
        out.push(opcode::FUNCTION2);
        write_string(out, code, true);
    }

    /// `SELECTDB db` and `RESIZEDB keys expires` (a hint for the loader's tables).
    pub fn select_db(out: &mut Vec<u8>, db: u64, keys: u64, expires: u64) {
        out.push(opcode::SELECTDB);
        write_len(out, db);
        out.push(opcode::RESIZEDB);
        write_len(out, keys);
        write_len(out, expires);
    }

    /// `EOF` and the checksum, given the CRC-64 of everything before the `EOF`.
    pub fn finish(out: &mut Vec<u8>, crc_before: u64) {
        out.push(opcode::EOF);
        let crc = crc64::update(crc_before, &[opcode::EOF]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// A DUMP payload: the value as an RDB file holds it, the RDB version (u16 LE) and the
/// CRC-64 (LE) of both.
pub fn dump_payload(object: &ObjectRef<'_>, limits: &Limits) -> Vec<u8> {
    let mut out = Vec::new();
    write_object(&mut out, object, limits);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A FUNCTION DUMP payload, as Redis 7.0 writes it: each library as an RDB file holds it
/// (`FUNCTION2` and its code), the RDB version (u16 LE) and the CRC-64 (LE) of all that.
/// redis-server's FUNCTION RESTORE takes it (so does a replica's stream).
pub fn function_payload<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        RdbWriter::function(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}
