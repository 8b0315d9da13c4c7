//! Intsets (SET_INTSET): element width in bytes (u32 LE: 2, 4 or 8), count (u32 LE), then
//! the elements ascending, little-endian, each as wide as the widest needs.

use bytes::Bytes;

/// `values` sorted ascending without duplicates.
pub fn encode(values: &[i64]) -> Vec<u8> {
    let width = values.iter().fold(2usize, |w, &v| {
        if i16::try_from(v).is_ok() {
            w
        } else if i32::try_from(v).is_ok() {
            w.max(4)
        } else {
            8
        }
    });
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for &v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

pub fn decode(is: &[u8]) -> Result<Vec<Bytes>, String> {
    if is.len() < 8 {
        return Err("intset shorter than its header".into());
    }
    let width = u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize;
    let count = u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(format!("intset with element width {width}"));
    }
    if count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(is.len()) {
        return Err("intset length disagrees with its count".into());
    }
    let mut out = Vec::with_capacity(count);
    let mut previous = None;
    for chunk in is[8..].chunks_exact(width) {
        let mut le = [0u8; 8];
        le[..width].copy_from_slice(chunk);
        let shift = 64 - 8 * width as u32;
        let v = (i64::from_le_bytes(le) << shift) >> shift;
        if previous.is_some_and(|p| p >= v) {
            return Err("intset not in ascending order".into());
        }
        previous = Some(v);
        out.push(Bytes::from(v.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_each_width() {
        for values in [
            vec![-3i64, 0, 7],
            vec![-70_000, 5],
            vec![i64::MIN, -1, i64::MAX],
        ] {
            let encoded = encode(&values);
            let got: Vec<i64> = decode(&encoded)
                .unwrap()
                .iter()
                .map(|b| std::str::from_utf8(b).unwrap().parse().unwrap())
                .collect();
            assert_eq!(got, values);
        }
        assert_eq!(encode(&[1, 2])[..4], 2u32.to_le_bytes());
        assert_eq!(encode(&[1, 70_000])[..4], 4u32.to_le_bytes());
    }

    #[test]
    fn refuses_disorder_and_bad_lengths() {
        let mut bad = encode(&[1, 2]);
        bad.swap(8, 10);
        assert!(decode(&bad).is_err());
        assert!(decode(&encode(&[1, 2])[..11]).is_err());
    }
}
