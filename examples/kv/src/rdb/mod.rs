//! RDB snapshots in Redis 7.0's format (RDB version 10), sans I/O: [`encode`] turns keys
//! into bytes, [`decode`] turns bytes back into keys, and neither touches a file or a
//! socket. The server's glue (`server/rdb_*.rs`) does the I/O: SAVE, BGSAVE, the save
//! points, loading at start-up; DUMP and RESTORE use the same value encodings
//! ([`encode::dump_payload`], [`decode::decode_dump`]).
//!
//! A file is `REDIS0010`, AUX fields, `SELECTDB 0`, `RESIZEDB`, each key (an optional
//! `EXPIRETIME_MS`, the value's type byte, the key, the value), `EOF`, and the CRC-64 of
//! everything before it (little-endian; 0 means "not checked", as Redis's
//! `rdbchecksum no` writes). Values are written in the encodings redis-server 7.0 writes:
//!
//! | value | small (within Redis's default `*-max-listpack-*`, `set-max-intset-entries`) | large |
//! |---|---|---|
//! | string | int-encoded if it is an integer's text of up to 11 bytes, LZF over 20 bytes when it saves 4 | same |
//! | list | `QUICKLIST_2` of packed listpack nodes of up to 8 KiB (`list-max-listpack-size -2`) | same |
//! | set | `SET_INTSET` (all integers, up to 512) | `SET` |
//! | hash | `HASH_LISTPACK` (up to 128 fields of up to 64 bytes) | `HASH` |
//! | sorted set | `ZSET_LISTPACK` (up to 128 members of up to 64 bytes, score order) | `ZSET_2` (binary doubles) |
//! | stream | `STREAM_LISTPACKS_2`: its listpack nodes as they are, metadata, groups ([`stream`]) | same |
//!
//! Decoding also takes every older encoding 7.0 still loads: `LIST`, `SET`, `ZSET` (scores as
//! text), `HASH`, `HASH_ZIPMAP`, `LIST_ZIPLIST`, `ZSET_ZIPLIST`, `HASH_ZIPLIST`,
//! `LIST_QUICKLIST`, `STREAM_LISTPACKS` (5.0 to 6.2), `STREAM_LISTPACKS_3` (7.2), and
//! `EXPIRETIME` in seconds; and corewire's own `COREWIRE_COMMANDS`, which it wrote for
//! streams before it wrote them as Redis does. Module values and module AUX data are
//! refused with an error naming them.
//! Errors carry the byte offset where the file stopped making sense.

pub mod crc64;
pub mod decode;
pub mod encode;
pub mod incremental;
mod intset;
mod listpack;
pub mod lzf;
pub mod stream;
mod ziplist;

use bytes::Bytes;

pub use decode::{decode_dump, decode_function_payload, Decoder, Item, RdbError};
pub use encode::{dump_payload, function_payload, Limits, ObjectRef, RdbWriter};
pub use incremental::IncrementalDecoder;
pub use stream::StreamImage;

/// The RDB version Redis 7.0 writes, and the newest this reads.
pub const RDB_VERSION: u16 = 10;
/// What INFO and the AUX field say the file was written by.
pub const REDIS_VERSION: &str = "7.0.15";

/// Value types (the byte before a key).
pub mod kind {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    /// Redis 7.2 (RDB 11): a small set as a listpack. Read, never written.
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// corewire's own: a value as the commands that rebuild it (RESP records, keyless), which
    /// earlier versions wrote for streams. Redis refuses it as an unknown type; corewire
    /// still reads it back whole.
    pub const COREWIRE_COMMANDS: u8 = 224;
}

/// Opcodes between keys.
pub mod opcode {
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const FUNCTION2: u8 = 245;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// A value as a file holds it, whatever its encoding there. Integers are their decimal text.
#[derive(Debug, Clone, PartialEq)]
pub enum RdbValue {
    String(Bytes),
    List(Vec<Bytes>),
    Set(Vec<Bytes>),
    Hash(Vec<(Bytes, Bytes)>),
    ZSet(Vec<(Bytes, f64)>),
    /// [`kind::COREWIRE_COMMANDS`]: the keyless commands that rebuild the value.
    Commands(Vec<Vec<Bytes>>),
    /// A stream with its nodes, metadata and groups as they are (not rebuilt by commands:
    /// the store takes it whole, so deleted entries, node splits and seen times stay).
    Stream(Box<StreamImage>),
}

impl RdbValue {
    /// A collection with no element (Redis skips such keys on load).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            RdbValue::String(_) => false,
            RdbValue::List(v) | RdbValue::Set(v) => v.is_empty(),
            RdbValue::Hash(v) => v.is_empty(),
            RdbValue::ZSet(v) => v.is_empty(),
            RdbValue::Commands(v) => v.is_empty(),
            // An empty stream is a value (XGROUP CREATE MKSTREAM, XADD MAXLEN 0).
            RdbValue::Stream(_) => false,
        }
    }

    /// The commands, without the key, that rebuild this value (`SET v`, `RPUSH e...`, ...),
    /// at most `per_command` elements each: what RESTORE and the loader run. Empty for a
    /// stream, which the store takes whole ([`RdbValue::Stream`]).
    pub fn rebuild_commands(&self, per_command: usize) -> Vec<Vec<Bytes>> {
        let per = per_command.max(1);
        let batches = |name: &'static str, items: Vec<Bytes>, group: usize| {
            items
                .chunks((per / group).max(1) * group)
                .map(|chunk| {
                    let mut args = Vec::with_capacity(chunk.len() + 1);
                    args.push(Bytes::from_static(name.as_bytes()));
                    args.extend(chunk.iter().cloned());
                    args
                })
                .collect::<Vec<_>>()
        };
        match self {
            RdbValue::Commands(commands) => commands.clone(),
            RdbValue::Stream(_) => Vec::new(),
            RdbValue::String(s) => vec![vec![Bytes::from_static(b"SET"), s.clone()]],
            RdbValue::List(items) => batches("RPUSH", items.clone(), 1),
            RdbValue::Set(items) => batches("SADD", items.clone(), 1),
            RdbValue::Hash(pairs) => batches(
                "HSET",
                pairs
                    .iter()
                    .flat_map(|(f, v)| [f.clone(), v.clone()])
                    .collect(),
                2,
            ),
            RdbValue::ZSet(pairs) => batches(
                "ZADD",
                pairs
                    .iter()
                    .flat_map(|(m, s)| [Bytes::from(format_score(*s)), m.clone()])
                    .collect(),
                2,
            ),
        }
    }
}

/// A score as text that parses back to the same double: an integer's digits when it is one
/// (below 2^52, as Redis's `d2string`), else the shortest round-trip form.
pub fn format_score(score: f64) -> String {
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.into();
    }
    if score.fract() == 0.0 && score.abs() < 4_503_599_627_370_496.0 {
        return format!("{}", score as i64);
    }
    format!("{score:e}")
}

/// Redis's `string2ll`: the text of an i64 exactly (no sign but `-`, no leading zeros, no
/// "-0"), which is when Redis stores a string as an integer.
pub fn strict_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers_are_exactly_redis_string2ll() {
        for ok in [
            "0",
            "1",
            "-1",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            assert_eq!(strict_i64(ok.as_bytes()), Some(ok.parse().unwrap()), "{ok}");
        }
        for no in [
            "",
            "-0",
            "01",
            "+1",
            " 1",
            "1 ",
            "9223372036854775808",
            "1e3",
            "-",
        ] {
            assert_eq!(strict_i64(no.as_bytes()), None, "{no}");
        }
    }

    #[test]
    fn scores_print_back_to_the_same_double() {
        for s in [
            0.0,
            1.0,
            -3.0,
            1.5,
            0.1,
            1e300,
            -2.5e-300,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let text = format_score(s);
            let back: f64 = match text.as_str() {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                t => t.parse().unwrap(),
            };
            assert_eq!(back, s, "{text}");
        }
        assert_eq!(format_score(3.0), "3");
    }

    #[test]
    fn rebuild_commands_keep_pairs_together() {
        let hash = RdbValue::Hash(
            (0..5)
                .map(|i| (Bytes::from(format!("f{i}")), Bytes::from("v")))
                .collect(),
        );
        let commands = hash.rebuild_commands(3);
        // Batches of one pair (3 rounded down to a whole pair is 2 items).
        assert_eq!(commands.len(), 5);
        assert!(commands.iter().all(|c| c.len() == 3 && c[0] == "HSET"));
    }
}

#[cfg(test)]
mod round_trip_tests;
