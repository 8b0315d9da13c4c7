//! Key placement with Redis Cluster's hash slots: CRC16 (XMODEM) of the key, or of its
//! `{hash tag}`, modulo 16384; slots map onto shards by `slot % shards`.
//!
//! Chosen over a seeded general-purpose hash because it is specified, identical in every
//! process and version (AOF files are per shard, so placement must be stable across restarts
//! with the same shard count), and gives clients the familiar hash-tag tool to keep related
//! keys on one shard so multi-key commands do not fan out.

pub const SLOT_COUNT: u16 = 16384;

pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOT_COUNT
}

/// The shard owning `key` among `shards` (which must be at least 1; 0 is treated as 1).
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    usize::from(key_slot(key)) % shards
}

/// The part of the key that is hashed: the content of the first `{...}` if non-empty.
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(len) if len > 0 => &key[open + 1..open + 1 + len],
        _ => key,
    }
}

const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ byte)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_xmodem() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_redis_cluster() {
        // Values from `CLUSTER KEYSLOT` on Redis.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags_colocate_keys() {
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // Empty or unterminated tags hash the whole key.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOT_COUNT);
        assert_eq!(key_slot(b"foo{bar"), crc16(b"foo{bar") % SLOT_COUNT);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") % SLOT_COUNT);
    }

    #[test]
    fn shards_are_in_range_and_spread() {
        let shards = 4;
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            let shard = shard_of(format!("key:{i}").as_bytes(), shards);
            counts[shard] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
        assert_eq!(shard_of(b"anything", 1), 0);
        assert_eq!(shard_of(b"anything", 0), 0);
    }
}
