//! Redis's CRC-64 (the "Jones" polynomial, reflected, initial value 0, no final xor): the
//! checksum that ends an RDB file and a DUMP payload.

/// The polynomial 0xad93d23594c935a9, bit-reversed for the reflected (LSB-first) table.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

/// `TABLES[0]` is the byte-at-a-time table; `TABLES[k][b]` is the CRC of byte `b` followed
/// by `k` zero bytes, so eight input bytes fold in with eight independent lookups
/// (slicing-by-8, as Redis's `crcspeed`): a save checksums every byte it writes.
const TABLES: [[u64; 256]; 8] = {
    let mut tables = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = tables[0][(prev & 0xff) as usize] ^ (prev >> 8);
            i += 1;
        }
        k += 1;
    }
    tables
};

/// Continues `crc` (0 to start) over `bytes`.
pub fn update(mut crc: u64, bytes: &[u8]) -> u64 {
    let t = &TABLES;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let v = crc ^ u64::from_le_bytes(w);
        crc = t[7][(v & 0xff) as usize]
            ^ t[6][((v >> 8) & 0xff) as usize]
            ^ t[5][((v >> 16) & 0xff) as usize]
            ^ t[4][((v >> 24) & 0xff) as usize]
            ^ t[3][((v >> 32) & 0xff) as usize]
            ^ t[2][((v >> 40) & 0xff) as usize]
            ^ t[1][((v >> 48) & 0xff) as usize]
            ^ t[0][(v >> 56) as usize];
    }
    for &byte in words.remainder() {
        crc = t[0][((crc ^ byte as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

pub fn crc64(bytes: &[u8]) -> u64 {
    update(0, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_check_value() {
        // Redis's own crc64 test vector.
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(update(crc64(b"1234"), b"56789"), crc64(b"123456789"));
    }

    /// Slicing-by-8 agrees with the plain byte-at-a-time loop at every length and split.
    #[test]
    fn eight_bytes_at_a_time_matches_one_at_a_time() {
        let bytewise = |mut crc: u64, bytes: &[u8]| {
            for &byte in bytes {
                crc = TABLES[0][((crc ^ byte as u64) & 0xff) as usize] ^ (crc >> 8);
            }
            crc
        };
        let data: Vec<u8> = (0..300u32).map(|i| (i * 131 % 251) as u8).collect();
        for len in 0..data.len() {
            assert_eq!(update(0, &data[..len]), bytewise(0, &data[..len]), "{len}");
        }
        for split in 0..40 {
            let whole = crc64(&data);
            assert_eq!(update(crc64(&data[..split]), &data[split..]), whole);
        }
    }
}
