//! LZF, the compression of RDB strings (liblzf's format, written here: the `lzf` crate
//! wraps the C library, and the format is small).
//!
//! A stream is a sequence of runs. A control byte `c < 32` starts `c + 1` literal bytes; any
//! other starts a back reference of length `(c >> 5) + 2` (with `c >> 5 == 7`, a further byte
//! adds to the length) to `((c & 31) << 8 | next byte) + 1` bytes back in the output.

use std::cell::RefCell;

/// Longest back reference: 7 + 255 in the length bytes, plus the implied 2.
const MAX_REF: usize = 264;
/// Farthest back reference (13 bits of offset, plus one).
const MAX_OFF: usize = 1 << 13;
const MAX_LIT: usize = 32;
const HASH_LOG: u32 = 14;

/// The hash table of the compressor: one per thread, never cleared. A slot holds
/// `base + position + 1` of the call that filled it; a call starts with `base` past every
/// value written before, so an older call's slots read as empty (what a zeroed table
/// gives, and the same output) without zeroing 128 KiB for each string: an RDB save
/// compresses every string over 20 bytes, and zeroing a fresh table per string was most of
/// a save's time.
struct Table {
    slots: Vec<u64>,
    base: u64,
}

thread_local! {
    static TABLE: RefCell<Table> = const {
        RefCell::new(Table {
            slots: Vec::new(),
            base: 0,
        })
    };
}

/// Compresses `input`; `None` unless the result is at most `limit` bytes (Redis stores a
/// compressed string only if it saves at least 4 bytes).
pub fn compress(input: &[u8], limit: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(limit.min(input.len()));
    compress_into(input, limit, &mut out).then_some(out)
}

/// [`compress`] appending to `out`: whether `input` compressed to at most `limit` bytes
/// (if not, `out` is as it was).
pub fn compress_into(input: &[u8], limit: usize, out: &mut Vec<u8>) -> bool {
    TABLE.with(|table| match table.try_borrow_mut() {
        Ok(mut table) => {
            let table = &mut *table;
            if table.slots.is_empty() {
                table.slots = vec![0; 1 << HASH_LOG];
            }
            let ok = compress_with(input, limit, out, &mut table.slots, table.base);
            table.base += input.len() as u64 + 1;
            ok
        }
        // Not reentered in practice; a fresh table keeps it correct if it ever is.
        Err(_) => compress_with(input, limit, out, &mut vec![0; 1 << HASH_LOG], 0),
    })
}

fn compress_with(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
    table: &mut [u64],
    base: u64,
) -> bool {
    let n = input.len();
    let start = out.len();
    let mut literal_start = 0;
    let mut ip = 0;
    let hash = |p: usize| {
        let v = (input[p] as u32) << 16 | (input[p + 1] as u32) << 8 | input[p + 2] as u32;
        (v.wrapping_mul(2_654_435_761) >> (32 - HASH_LOG)) as usize
    };
    let flush = |out: &mut Vec<u8>, from: usize, to: usize| {
        for run in input[from..to].chunks(MAX_LIT) {
            out.push((run.len() - 1) as u8);
            out.extend_from_slice(run);
        }
    };
    while ip + 2 < n {
        let h = hash(ip);
        let slot = table[h];
        table[h] = base + ip as u64 + 1;
        if slot > base {
            let r = (slot - base - 1) as usize;
            let off = ip - r - 1;
            if off < MAX_OFF && input[r..r + 3] == input[ip..ip + 3] {
                let max = (n - ip).min(MAX_REF);
                let mut len = 3;
                while len < max && input[r + len] == input[ip + len] {
                    len += 1;
                }
                flush(out, literal_start, ip);
                let l = len - 2;
                let high = (off >> 8) as u8;
                if l < 7 {
                    out.push(high | (l as u8) << 5);
                } else {
                    out.push(high | 7 << 5);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                ip += len;
                literal_start = ip;
                if out.len() - start > limit {
                    out.truncate(start);
                    return false;
                }
                continue;
            }
        }
        ip += 1;
    }
    flush(out, literal_start, n);
    if out.len() - start > limit {
        out.truncate(start);
        return false;
    }
    true
}

/// Decompresses `input`, which must produce exactly `len` bytes.
pub fn decompress(input: &[u8], len: usize) -> Result<Vec<u8>, &'static str> {
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < MAX_LIT {
            let run = ctrl + 1;
            let bytes = input
                .get(ip..ip + run)
                .ok_or("LZF literal past the input")?;
            if out.len() + run > len {
                return Err("LZF output longer than declared");
            }
            out.extend_from_slice(bytes);
            ip += run;
        } else {
            let mut l = ctrl >> 5;
            if l == 7 {
                l += *input.get(ip).ok_or("LZF reference past the input")? as usize;
                ip += 1;
            }
            let low = *input.get(ip).ok_or("LZF reference past the input")? as usize;
            ip += 1;
            let back = ((ctrl & 0x1f) << 8 | low) + 1;
            let count = l + 2;
            if back > out.len() {
                return Err("LZF reference before the start");
            }
            if out.len() + count > len {
                return Err("LZF output longer than declared");
            }
            let start = out.len() - back;
            for i in 0..count {
                let byte = out[start + i];
                out.push(byte);
            }
        }
    }
    if out.len() != len {
        return Err("LZF output shorter than declared");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let cases: Vec<Vec<u8>> = vec![
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            b"abcabcabcabcabcabcabcabcabcabcabcabc hello hello hello".to_vec(),
            (0..20_000u32).map(|i| (i % 251) as u8).collect(),
            (0..5000u32).map(|i| (i * 7 % 13) as u8).collect(),
            vec![b'x'; 100_000],
        ];
        for input in cases {
            let packed = compress(&input, input.len()).expect("compressible");
            assert!(packed.len() < input.len());
            assert_eq!(decompress(&packed, input.len()).unwrap(), input);
        }
    }

    /// The shared table gives what a fresh, zeroed one gives, whatever ran before.
    #[test]
    fn output_does_not_depend_on_earlier_calls() {
        let inputs: Vec<Vec<u8>> = (0..50u32)
            .map(|i| {
                (0..(i * 37 % 300 + 21))
                    .map(|j| (j * (i + 3) % 7) as u8 + b'a')
                    .collect()
            })
            .collect();
        for input in &inputs {
            let mut fresh = Vec::new();
            let fresh_ok = compress_with(
                input,
                input.len(),
                &mut fresh,
                &mut vec![0; 1 << HASH_LOG],
                0,
            );
            let mut out = b"prefix".to_vec();
            assert_eq!(compress_into(input, input.len(), &mut out), fresh_ok);
            if fresh_ok {
                assert_eq!(&out[6..], &fresh[..]);
                assert_eq!(decompress(&out[6..], input.len()).unwrap(), *input);
            } else {
                assert_eq!(out, b"prefix");
            }
        }
    }

    #[test]
    fn incompressible_input_is_refused_and_bad_streams_are_errors() {
        let noise: Vec<u8> = (0..64u32).map(|i| (i * 97 % 256) as u8 ^ 0x5a).collect();
        assert_eq!(compress(&noise, noise.len() - 4), None);
        assert!(decompress(&[0x20, 0x00], 3).is_err()); // reference before the start
        assert!(decompress(&[0x05, b'a'], 6).is_err()); // literal past the input
        assert!(decompress(&[0x00, b'a'], 2).is_err()); // shorter than declared
    }
}
