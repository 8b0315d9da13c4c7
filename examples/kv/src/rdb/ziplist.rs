//! The encodings before listpacks, which Redis 7.0 still loads: ziplists (HASH_ZIPLIST,
//! ZSET_ZIPLIST, LIST_ZIPLIST and each LIST_QUICKLIST node) and zipmaps (HASH_ZIPMAP).
//! Read only: 7.0 never writes them.

use bytes::Bytes;

/// The elements of a ziplist: a header (total bytes u32 LE, offset of the last entry u32 LE,
/// count u16 LE), entries of (previous entry's length, encoding, data), and 0xFF.
pub fn decode(zl: &[u8]) -> Result<Vec<Bytes>, String> {
    const HEADER: usize = 10;
    if zl.len() < HEADER + 1 {
        return Err("ziplist shorter than its header".into());
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    if total != zl.len() {
        return Err(format!(
            "ziplist header says {total} bytes, it has {}",
            zl.len()
        ));
    }
    let get = |from: usize, n: usize| zl.get(from..from + n).ok_or("ziplist entry past its end");
    let mut out = Vec::new();
    let mut p = HEADER;
    loop {
        let first = *zl.get(p).ok_or("ziplist without its end byte")?;
        if first == 0xff {
            if p + 1 != zl.len() {
                return Err("bytes after the ziplist's end byte".into());
            }
            break;
        }
        // The previous entry's length: 1 byte, or 0xFE and 4 bytes.
        p += if first == 0xfe { 5 } else { 1 };
        let enc = *get(p, 1)?.first().unwrap_or(&0);
        let element = match enc >> 6 {
            0 => {
                let len = (enc & 0x3f) as usize;
                let s = get(p + 1, len)?;
                p += 1 + len;
                Bytes::copy_from_slice(s)
            }
            1 => {
                let b = get(p, 2)?;
                let len = ((b[0] & 0x3f) as usize) << 8 | b[1] as usize;
                let s = get(p + 2, len)?;
                p += 2 + len;
                Bytes::copy_from_slice(s)
            }
            2 => {
                let b = get(p + 1, 4)?;
                let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
                let s = get(p + 5, len)?;
                p += 5 + len;
                Bytes::copy_from_slice(s)
            }
            _ => {
                let n = match enc {
                    0xc0 => 2,
                    0xd0 => 4,
                    0xe0 => 8,
                    0xf0 => 3,
                    0xfe => 1,
                    0xf1..=0xfd => 0,
                    _ => return Err(format!("ziplist entry with unknown encoding 0x{enc:02x}")),
                };
                let v = if n == 0 {
                    (enc & 0x0f) as i64 - 1
                } else {
                    let raw = get(p + 1, n)?;
                    let mut le = [0u8; 8];
                    le[..n].copy_from_slice(raw);
                    let shift = 64 - 8 * n as u32;
                    (i64::from_le_bytes(le) << shift) >> shift
                };
                p += 1 + n;
                Bytes::from(v.to_string())
            }
        };
        out.push(element);
    }
    Ok(out)
}

/// The field/value pairs of a zipmap: a count byte, then entries of (length, field,
/// length, free byte count, value, free bytes), and 0xFF. A length is one byte below 254,
/// else 254 and 4 bytes (LE).
pub fn decode_zipmap(zm: &[u8]) -> Result<Vec<(Bytes, Bytes)>, String> {
    let err = || "zipmap entry past its end".to_string();
    let mut p = 1;
    let len_at = |p: &mut usize| -> Result<Option<usize>, String> {
        let b = *zm.get(*p).ok_or_else(err)?;
        match b {
            0xff => Ok(None),
            0xfe => {
                let l = zm.get(*p + 1..*p + 5).ok_or_else(err)?;
                *p += 5;
                Ok(Some(u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize))
            }
            n => {
                *p += 1;
                Ok(Some(n as usize))
            }
        }
    };
    let mut out = Vec::new();
    while let Some(flen) = len_at(&mut p)? {
        let field = zm.get(p..p + flen).ok_or_else(err)?;
        p += flen;
        let vlen = len_at(&mut p)?.ok_or_else(err)?;
        let free = *zm.get(p).ok_or_else(err)? as usize;
        p += 1;
        let value = zm.get(p..p + vlen).ok_or_else(err)?;
        p += vlen + free;
        out.push((Bytes::copy_from_slice(field), Bytes::copy_from_slice(value)));
    }
    if p + 1 != zm.len() {
        return Err("bytes after the zipmap's end byte".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist built by hand the way Redis lays one out.
    fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        for e in entries {
            let start = body.len();
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xfe);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            body.extend_from_slice(e);
            prev = body.len() - start;
        }
        let mut zl = vec![0u8; 10];
        zl.extend_from_slice(&body);
        zl.push(0xff);
        let total = zl.len() as u32;
        zl[..4].copy_from_slice(&total.to_le_bytes());
        zl[8..10].copy_from_slice(&(entries.len() as u16).to_le_bytes());
        zl
    }

    #[test]
    fn decodes_every_entry_encoding() {
        let long = vec![b'z'; 300];
        let mut e14 = vec![0x40 | (300 >> 8) as u8, (300 & 0xff) as u8];
        e14.extend_from_slice(&long);
        let zl = ziplist(&[
            b"\x03abc",
            &e14,
            b"\xf1",             // 0
            b"\xfd",             // 12
            b"\xfe\x80",         // -128
            b"\xc0\x00\x80",     // -32768
            b"\xf0\xff\xff\x7f", // 8388607
            b"\xd0\x00\x00\x00\x80",
            b"\xe0\xff\xff\xff\xff\xff\xff\xff\x7f",
        ]);
        let got = decode(&zl).unwrap();
        let want: Vec<Bytes> = [
            &b"abc"[..],
            &long,
            b"0",
            b"12",
            b"-128",
            b"-32768",
            b"8388607",
            b"-2147483648",
            b"9223372036854775807",
        ]
        .iter()
        .map(|s| Bytes::copy_from_slice(s))
        .collect();
        assert_eq!(got, want);
        assert!(decode(&zl[..zl.len() - 1]).is_err());
    }

    #[test]
    fn decodes_a_zipmap() {
        let zm = b"\x02\x03foo\x03\x00bar\x01a\x02\x01xy\x00\xff";
        let got = decode_zipmap(zm).unwrap();
        assert_eq!(
            got,
            vec![
                (Bytes::from("foo"), Bytes::from("bar")),
                (Bytes::from("a"), Bytes::from("xy"))
            ]
        );
        assert!(decode_zipmap(&zm[..zm.len() - 1]).is_err());
    }
}
