use super::value::Value;

/// One key's value and optional expiry. Kept small (40 bytes) because every key pays for
/// it: the expiry is boxed, as most keys have none.
#[derive(Debug)]
pub(crate) struct Entry {
    pub value: Value,
    pub expiry: Option<Box<Expiry>>,
    /// When the key was last used, on the store's access clock: what `allkeys-lru` evicts
    /// by (see `memory.rs`).
    pub access: u32,
    /// Redis's logarithmic access counter: what `allkeys-lfu` evicts by.
    pub freq: u8,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Expiry {
    /// Unix time in milliseconds after which the key is gone.
    pub at_ms: u64,
    /// Position of the key in the store's [`super::expiring::ExpiringIndex`].
    pub slot: usize,
}

impl Entry {
    /// A new entry, counted as used once at `access`.
    pub fn new(value: Value, expiry: Option<Expiry>, access: u32) -> Entry {
        Entry {
            value,
            expiry: expiry.map(Box::new),
            access,
            freq: super::memory::LFU_INIT,
        }
    }

    /// Redis semantics: a key expiring at `t` is still visible at `t` and gone at `t + 1`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        matches!(&self.expiry, Some(expiry) if now_ms > expiry.at_ms)
    }

    pub fn expire_at(&self) -> Option<u64> {
        self.expiry.as_ref().map(|expiry| expiry.at_ms)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn entry_and_value_stay_small() {
        assert_eq!(std::mem::size_of::<super::Value>(), 24);
        assert_eq!(std::mem::size_of::<super::Entry>(), 40);
    }
}
