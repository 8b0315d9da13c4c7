//! Redis's CRC-64 (the "Jones" polynomial, reflected, initial value 0, no final xor): the
//! checksum that ends an RDB file and a DUMP payload.

/// The polynomial 0xad93d23594c935a9, bit-reversed for the reflected (LSB-first) table.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

const TABLE: [u64; 256] = {
    let mut table = [0u64; 256];
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
        table[i] = crc;
        i += 1;
    }
    table
};

/// Continues `crc` (0 to start) over `bytes`.
pub fn update(mut crc: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        crc = TABLE[((crc ^ byte as u64) & 0xff) as usize] ^ (crc >> 8);
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
}
