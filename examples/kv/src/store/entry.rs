use super::value::Value;

/// One key's value and optional expiry.
#[derive(Debug)]
pub(crate) struct Entry {
    pub value: Value,
    pub expiry: Option<Expiry>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Expiry {
    /// Unix time in milliseconds after which the key is gone.
    pub at_ms: u64,
    /// Position of the key in the store's [`super::expiring::ExpiringIndex`].
    pub slot: usize,
}

impl Entry {
    /// Redis semantics: a key expiring at `t` is still visible at `t` and gone at `t + 1`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        matches!(self.expiry, Some(expiry) if now_ms > expiry.at_ms)
    }

    pub fn expire_at(&self) -> Option<u64> {
        self.expiry.map(|expiry| expiry.at_ms)
    }
}
