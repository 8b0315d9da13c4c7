//! Bit arithmetic on byte strings, as Redis's bitops: bit 0 is the most significant bit of
//! byte 0 (SETBIT's order), and bits past the end of a string read as 0. Sans-I/O: the
//! commands in `mod.rs` parse arguments and move values; everything here is plain functions.

/// BITOP's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// The result of BITOP over `sources` (missing keys are empty strings): as long as the
/// longest source, shorter ones padded with zero bytes.
pub fn bitop(op: BitOp, sources: &[&[u8]]) -> Vec<u8> {
    let len = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    let byte = |source: &[u8], i: usize| source.get(i).copied().unwrap_or(0);
    let mut out = vec![0u8; len];
    for (i, slot) in out.iter_mut().enumerate() {
        let first = sources.first().map_or(0, |s| byte(s, i));
        *slot = match op {
            BitOp::Not => !first,
            BitOp::And => sources[1..].iter().fold(first, |acc, s| acc & byte(s, i)),
            BitOp::Or => sources[1..].iter().fold(first, |acc, s| acc | byte(s, i)),
            BitOp::Xor => sources[1..].iter().fold(first, |acc, s| acc ^ byte(s, i)),
        };
    }
    out
}

/// The value of bit `offset` (0 past the end).
pub fn get_bit(value: &[u8], offset: u64) -> bool {
    let byte = (offset >> 3) as usize;
    value
        .get(byte)
        .is_some_and(|b| b & (0x80 >> (offset & 7)) != 0)
}

/// Sets bit `offset` of `value`, which must be long enough; returns the old bit.
pub fn set_bit(value: &mut [u8], offset: u64, on: bool) -> bool {
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    let old = value[byte] & mask != 0;
    if on {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    old
}

/// Set bits among bits `first..=last` (bit offsets, `last` within the string).
pub fn count_bits(value: &[u8], first: u64, last: u64) -> u64 {
    if first > last {
        return 0;
    }
    let (first_byte, last_byte) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut count: u64 = value[first_byte..=last_byte]
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    // The bits of the edge bytes outside the range.
    let head = value[first_byte] & !(0xffu8 >> (first & 7));
    let tail = value[last_byte] & (0x7fu8 >> (last & 7));
    count -= u64::from(head.count_ones()) + u64::from(tail.count_ones());
    count
}

/// The first bit equal to `bit` among bits `first..=last` (bit offsets, `last` within the
/// string), if any.
pub fn find_bit(value: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let skip = if bit { 0x00 } else { 0xff };
    let mut offset = first;
    while offset <= last {
        if offset & 7 == 0 && offset + 7 <= last && value[(offset >> 3) as usize] == skip {
            offset += 8;
            continue;
        }
        if get_bit(value, offset) == bit {
            return Some(offset);
        }
        offset += 1;
    }
    None
}

/// The unsigned integer of `bits` bits at bit `offset` (bits past the end read as 0).
pub fn get_unsigned(value: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |acc, j| {
        (acc << 1) | u64::from(get_bit(value, offset + j))
    })
}

/// The two's complement signed integer of `bits` bits at bit `offset`.
pub fn get_signed(value: &[u8], offset: u64, bits: u32) -> i64 {
    let raw = get_unsigned(value, offset, bits);
    if bits < 64 && raw & (1 << (bits - 1)) != 0 {
        (raw | (u64::MAX << bits)) as i64
    } else {
        raw as i64
    }
}

/// Writes the low `bits` bits of `v` at bit `offset` (`value` must be long enough).
pub fn set_unsigned(value: &mut [u8], offset: u64, bits: u32, v: u64) {
    for j in 0..u64::from(bits) {
        let on = v & (1 << (u64::from(bits) - 1 - j)) != 0;
        set_bit(value, offset + j, on);
    }
}

/// BITFIELD's OVERFLOW behaviours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// `value + incr` stored in an unsigned integer of `bits` bits: `Ok(sum)` when it fits,
/// otherwise `Err(what the overflow behaviour makes of it)` (`None` for FAIL).
pub fn add_unsigned(
    value: u64,
    incr: i64,
    bits: u32,
    overflow: Overflow,
) -> Result<u64, Option<u64>> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let sum = i128::from(value) + i128::from(incr);
    if (0..=i128::from(max)).contains(&sum) {
        return Ok(sum as u64);
    }
    Err(match overflow {
        Overflow::Fail => None,
        Overflow::Sat if sum < 0 => Some(0),
        Overflow::Sat => Some(max),
        Overflow::Wrap => Some((value.wrapping_add(incr as u64)) & max),
    })
}

/// `value + incr` stored in a signed integer of `bits` bits, as [`add_unsigned`].
pub fn add_signed(
    value: i64,
    incr: i64,
    bits: u32,
    overflow: Overflow,
) -> Result<i64, Option<i64>> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let sum = i128::from(value) + i128::from(incr);
    if (i128::from(min)..=i128::from(max)).contains(&sum) {
        return Ok(sum as i64);
    }
    Err(match overflow {
        Overflow::Fail => None,
        Overflow::Sat if sum < 0 => Some(min),
        Overflow::Sat => Some(max),
        Overflow::Wrap => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let mask = u64::MAX << bits;
                if c & (1 << (bits - 1)) != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            Some(c as i64)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_numbered_from_the_most_significant() {
        let mut v = vec![0u8; 2];
        assert!(!set_bit(&mut v, 1, true));
        assert!(!set_bit(&mut v, 15, true));
        assert_eq!(v, [0x40, 0x01]);
        assert!(get_bit(&v, 1) && get_bit(&v, 15) && !get_bit(&v, 0) && !get_bit(&v, 99));
        assert!(set_bit(&mut v, 1, false));
        assert_eq!(v, [0x00, 0x01]);
    }

    #[test]
    fn counts_within_bit_ranges() {
        let v = b"foobar";
        assert_eq!(count_bits(v, 0, 47), 26);
        assert_eq!(count_bits(v, 8, 15), 6);
        assert_eq!(count_bits(v, 5, 30), 17);
        assert_eq!(count_bits(&[0xff], 3, 3), 1);
        assert_eq!(count_bits(&[0xff, 0xff], 3, 12), 10);
        assert_eq!(count_bits(v, 9, 8), 0);
    }

    #[test]
    fn finds_first_bits() {
        let v = [0xff, 0xf0, 0x00];
        assert_eq!(find_bit(&v, false, 0, 23), Some(12));
        assert_eq!(find_bit(&v, true, 12, 23), None);
        assert_eq!(find_bit(&v, true, 2, 23), Some(2));
        assert_eq!(find_bit(&[0, 0, 1], true, 0, 23), Some(23));
        assert_eq!(find_bit(&[0xff; 4], false, 0, 31), None);
    }

    #[test]
    fn bitop_pads_shorter_sources() {
        assert_eq!(bitop(BitOp::And, &[b"\xff\x0f", b"\x0f"]), b"\x0f\x00");
        assert_eq!(bitop(BitOp::Or, &[b"\x01", b"\x10\x02"]), b"\x11\x02");
        assert_eq!(bitop(BitOp::Xor, &[b"\xff", b"\x0f", b""]), b"\xf0");
        assert_eq!(bitop(BitOp::Not, &[b"\x0f"]), b"\xf0");
        assert!(bitop(BitOp::And, &[b"", b""]).is_empty());
    }

    #[test]
    fn fields_read_and_write_across_bytes() {
        let mut v = vec![0u8; 3];
        set_unsigned(&mut v, 5, 8, 0xab);
        assert_eq!(get_unsigned(&v, 5, 8), 0xab);
        assert_eq!(get_signed(&v, 5, 8), 0xab_u8 as i8 as i64);
        assert_eq!(get_unsigned(&v, 100, 63), 0);
        set_unsigned(&mut v, 0, 24, u64::MAX);
        assert_eq!(get_signed(&v, 0, 24), -1);
    }

    #[test]
    fn overflow_behaviours() {
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Wrap), Err(Some(4)));
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Sat), Err(Some(255)));
        assert_eq!(add_unsigned(5, -10, 8, Overflow::Sat), Err(Some(0)));
        assert_eq!(add_unsigned(5, -10, 8, Overflow::Fail), Err(None));
        assert_eq!(add_unsigned(5, 10, 8, Overflow::Fail), Ok(15));
        assert_eq!(add_signed(120, 10, 8, Overflow::Wrap), Err(Some(-126)));
        assert_eq!(add_signed(120, 10, 8, Overflow::Sat), Err(Some(127)));
        assert_eq!(add_signed(-120, -10, 8, Overflow::Sat), Err(Some(-128)));
        assert_eq!(
            add_signed(i64::MAX, 1, 64, Overflow::Wrap),
            Err(Some(i64::MIN))
        );
        assert_eq!(add_signed(-3, 1, 64, Overflow::Fail), Ok(-2));
    }
}
