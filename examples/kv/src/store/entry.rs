use super::value::Value;

/// One key's value. Kept at 32 bytes because every key pays for it: the expiry lives in the
/// store's [`super::expiring::ExpiringIndex`] (most keys have none), the entry only says
/// whether it has one.
#[derive(Debug)]
pub(crate) struct Entry {
    pub value: Value,
    /// When the key was last used, on the store's access clock: what `allkeys-lru` evicts
    /// by (see `memory.rs`).
    pub access: u32,
    /// Redis's logarithmic access counter: what `allkeys-lfu` evicts by.
    pub freq: u8,
    /// Whether the key is in the expiring index.
    pub has_ttl: bool,
}

impl Entry {
    /// A new entry without a TTL, counted as used once at `access`.
    pub fn new(value: Value, access: u32) -> Entry {
        Entry {
            value,
            access,
            freq: super::memory::LFU_INIT,
            has_ttl: false,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn entry_and_value_stay_small() {
        assert_eq!(std::mem::size_of::<super::Value>(), 24);
        assert_eq!(std::mem::size_of::<super::Entry>(), 32);
    }
}
