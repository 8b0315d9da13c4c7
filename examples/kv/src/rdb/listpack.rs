//! Listpacks (Redis 7's compact sequence, the payload of HASH_LISTPACK, ZSET_LISTPACK and
//! each QUICKLIST_2 node): a 6-byte header (total bytes, u32 LE; element count, u16 LE,
//! 65535 when unknown), the entries, and an end byte 0xFF. Each entry is its encoding and
//! data, then its own length written backwards (so the list can be walked from the end).

use bytes::Bytes;

use super::strict_i64;

const HEADER: usize = 6;
const END: u8 = 0xff;

/// Builds a listpack entry by entry.
#[derive(Debug)]
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        ListpackWriter {
            buf: vec![0; HEADER],
            count: 0,
        }
    }
}

impl ListpackWriter {
    /// Bytes the listpack would take with what was pushed so far.
    pub fn len(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Appends `element`, as an integer when its text is one (as Redis's `lpAppend`).
    pub fn push(&mut self, element: &[u8]) {
        let start = self.buf.len();
        match strict_i64(element) {
            Some(v) => encode_int(&mut self.buf, v),
            None => encode_str(&mut self.buf, element),
        }
        let entry_len = self.buf.len() - start;
        encode_backlen(&mut self.buf, entry_len);
        self.count += 1;
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(END);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = if self.count < 65535 {
            self.count as u16
        } else {
            65535
        };
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

fn encode_int(buf: &mut Vec<u8>, v: i64) {
    if (0..=127).contains(&v) {
        buf.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = if v < 0 { (1 << 13) + v } else { v } as u16;
        buf.push((u >> 8) as u8 | 0xc0);
        buf.push(u as u8);
    } else if (-32768..=32767).contains(&v) {
        buf.push(0xf1);
        buf.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-8_388_608..=8_388_607).contains(&v) {
        buf.push(0xf2);
        buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if i32::try_from(v).is_ok() {
        buf.push(0xf3);
        buf.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        buf.push(0xf4);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

fn encode_str(buf: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 64 {
        buf.push(0x80 | len as u8);
    } else if len < 4096 {
        buf.push(0xe0 | (len >> 8) as u8);
        buf.push(len as u8);
    } else {
        buf.push(0xf0);
        buf.extend_from_slice(&(len as u32).to_le_bytes());
    }
    buf.extend_from_slice(s);
}

/// The entry's length, most significant 7 bits first; every byte but the first has the
/// high bit set (read from the end, the last byte read is the one without it).
fn encode_backlen(buf: &mut Vec<u8>, l: usize) {
    let bytes = backlen_size(l);
    for i in (0..bytes).rev() {
        let part = ((l >> (7 * i)) & 127) as u8;
        buf.push(if i == bytes - 1 { part } else { part | 128 });
    }
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The elements of a listpack, integers as their decimal text.
pub fn decode(lp: &[u8]) -> Result<Vec<Bytes>, String> {
    if lp.len() < HEADER + 1 {
        return Err("listpack shorter than its header".into());
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return Err(format!(
            "listpack header says {total} bytes, it has {}",
            lp.len()
        ));
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]) as usize;
    let mut out = Vec::new();
    let mut p = HEADER;
    let get = |from: usize, n: usize| lp.get(from..from + n).ok_or("listpack entry past its end");
    loop {
        let b = *lp.get(p).ok_or("listpack without its end byte")?;
        if b == END {
            if p + 1 != lp.len() {
                return Err("bytes after the listpack's end byte".into());
            }
            break;
        }
        let start = p;
        let element: Bytes = if b & 0x80 == 0 {
            p += 1;
            Bytes::from((b & 0x7f).to_string())
        } else if b & 0xc0 == 0x80 {
            let len = (b & 0x3f) as usize;
            let s = get(p + 1, len)?;
            p += 1 + len;
            Bytes::copy_from_slice(s)
        } else if b & 0xe0 == 0xc0 {
            let lo = *get(p + 1, 1)?.first().unwrap_or(&0);
            let u = ((b & 0x1f) as i64) << 8 | lo as i64;
            p += 2;
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            Bytes::from(v.to_string())
        } else if b & 0xf0 == 0xe0 {
            let lo = *get(p + 1, 1)?.first().unwrap_or(&0);
            let len = ((b & 0x0f) as usize) << 8 | lo as usize;
            let s = get(p + 2, len)?;
            p += 2 + len;
            Bytes::copy_from_slice(s)
        } else {
            match b {
                0xf0 => {
                    let l = get(p + 1, 4)?;
                    let len = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
                    let s = get(p + 5, len)?;
                    p += 5 + len;
                    Bytes::copy_from_slice(s)
                }
                0xf1..=0xf4 => {
                    let n = match b {
                        0xf1 => 2,
                        0xf2 => 3,
                        0xf3 => 4,
                        _ => 8,
                    };
                    let raw = get(p + 1, n)?;
                    let mut le = [0u8; 8];
                    le[..n].copy_from_slice(raw);
                    // Sign-extend from n bytes.
                    let shift = 64 - 8 * n as u32;
                    let v = (i64::from_le_bytes(le) << shift) >> shift;
                    p += 1 + n;
                    Bytes::from(v.to_string())
                }
                _ => return Err(format!("listpack entry with unknown encoding 0x{b:02x}")),
            }
        };
        let entry_len = p - start;
        let back = backlen_size(entry_len);
        let stored = get(p, back)?;
        let mut value = 0usize;
        for (i, byte) in stored.iter().enumerate() {
            value = value << 7 | (byte & 127) as usize;
            if (i > 0) != (byte & 128 != 0) {
                return Err("listpack entry with a damaged back length".into());
            }
        }
        if value != entry_len {
            return Err("listpack entry whose back length disagrees".into());
        }
        p += back;
        out.push(element);
    }
    if declared != 65535 && declared != out.len() {
        return Err(format!(
            "listpack header says {declared} elements, it has {}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_encoding() {
        let long = "x".repeat(5000);
        let mid = "y".repeat(300);
        let elements: Vec<String> = [
            "0",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-32768",
            "32767",
            "40000",
            "-8388608",
            "8388607",
            "8388608",
            "2147483647",
            "-2147483649",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "007",
            "-0",
            "+1",
            "",
            "hello",
            &mid,
            &long,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut w = ListpackWriter::default();
        for e in &elements {
            w.push(e.as_bytes());
        }
        let lp = w.finish();
        let back: Vec<String> = decode(&lp)
            .unwrap()
            .iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect();
        assert_eq!(back, elements);
    }

    #[test]
    fn small_ints_take_one_byte_and_damage_is_an_error() {
        let mut w = ListpackWriter::default();
        w.push(b"5");
        let lp = w.finish();
        // header, 0x05, backlen 1, end
        assert_eq!(lp, [9, 0, 0, 0, 1, 0, 5, 1, 0xff]);
        let mut bad = lp.clone();
        bad[7] = 2;
        assert!(decode(&bad).is_err());
        assert!(decode(&lp[..8]).is_err());
    }
}
