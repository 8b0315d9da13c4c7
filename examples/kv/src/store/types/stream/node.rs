//! The sizes of Redis's listpack encoding, so the stream's nodes split where Redis's do:
//! a node (a radix-tree key holding a listpack) takes entries until it has
//! `stream-node-max-entries` of them (deleted ones count) or its bytes reach
//! `stream-node-max-bytes`. Approximate trimming (`~`) removes whole nodes only, so its
//! results depend on these boundaries.

use crate::number::parse_i64;

/// Listpack header (total bytes, element count) and end marker.
pub const EMPTY: usize = 6 + 1;

/// Redis's `STREAM_LISTPACK_MAX_SIZE`: the node size cap when the option is 0 or above it.
pub const MAX_SIZE: usize = 1 << 30;

/// Bytes of the back-length field for an element of `len` bytes.
fn backlen(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// An integer element.
pub fn int(value: i64) -> usize {
    let encoded = match value {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    };
    encoded + backlen(encoded)
}

/// A string element (stored as an integer when it reads as one, as `lpEncodeGetType`).
pub fn string(value: &[u8]) -> usize {
    if value.len() <= 20 {
        if let Some(n) = parse_i64(value) {
            return int(n);
        }
    }
    let encoded = match value.len() {
        0..=63 => 1 + value.len(),
        64..=4095 => 2 + value.len(),
        _ => 5 + value.len(),
    };
    encoded + backlen(encoded)
}

/// One entry appended to a node whose master entry has ID `master`:
/// flags, ms and seq deltas, [field count], [fields], values, element count.
pub fn entry(delta_ms: u64, delta_seq: u64, pairs: &[(&[u8], &[u8])], same_fields: bool) -> usize {
    let as_int = |v: u64| int(i64::try_from(v).unwrap_or(i64::MAX));
    let mut size = int(if same_fields { 2 } else { 0 }) + as_int(delta_ms) + as_int(delta_seq);
    let n = pairs.len();
    if !same_fields {
        size += int(n as i64);
        size += pairs.iter().map(|(f, _)| string(f)).sum::<usize>();
    }
    size += pairs.iter().map(|(_, v)| string(v)).sum::<usize>();
    let count = if same_fields { n + 3 } else { 2 * n + 4 };
    size + int(count as i64)
}

/// The master entry of a new node: live and deleted counts, field count, fields, terminator.
pub fn master(live: u64, deleted: u64, fields: &[&[u8]]) -> usize {
    int(live as i64)
        + int(deleted as i64)
        + int(fields.len() as i64)
        + fields.iter().map(|f| string(f)).sum::<usize>()
        + int(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_sizes_follow_the_listpack_encoding() {
        assert_eq!(int(5), 2);
        assert_eq!(int(200), 3);
        assert_eq!(int(40000), 5);
        assert_eq!(string(b"abc"), 5);
        assert_eq!(string(b"123"), 2);
        assert_eq!(string(&[b'x'; 100]), 102 + 1);
        assert_eq!(string(&[b'x'; 200]), 202 + 2);
        // The first entry of a node shares the master's fields.
        let pair: (&[u8], &[u8]) = (b"item", b"1");
        assert_eq!(entry(0, 0, &[pair], true), 2 + 2 + 2 + 2 + 2);
        assert_eq!(master(1, 0, &[b"item"]), 2 + 2 + 2 + 6 + 2);
    }
}
