//! Metadata: the key/value pairs a call carries beside its message (gRPC's custom headers).
//! Over gRPC they are HTTP/2 headers; over corewire's framing they ride in the frame's
//! attachment, encoded by [`Metadata::encode`] (empty metadata is an empty attachment, so a
//! call without any costs nothing).

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

/// A call's metadata: ordered `(key, value)` pairs; a key may repeat. Keys are lowercase
/// (`[a-z0-9_.-]`, not starting with `grpc-`, which gRPC reserves); a key ending in `-bin`
/// holds bytes, any other printable ASCII text.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    entries: Vec<(Box<str>, Bytes)>,
}

/// A key or value metadata cannot carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidMetadata(pub String);

impl fmt::Display for InvalidMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidMetadata {}

/// Whether `key` is a metadata key a caller may set.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with("grpc-")
        && key
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-'))
}

fn valid_text(value: &[u8]) -> bool {
    value.iter().all(|&b| (0x20..=0x7e).contains(&b))
}

impl Metadata {
    /// No entries.
    pub fn new() -> Metadata {
        Metadata::default()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Add a text entry. Panics on a key or value metadata cannot carry (see
    /// [`try_insert`](Metadata::try_insert)).
    pub fn insert(&mut self, key: &str, value: &str) -> &mut Metadata {
        self.try_insert(key, value)
            .unwrap_or_else(|e| panic!("{e}"));
        self
    }

    /// Add a text entry, or say why it cannot be carried.
    pub fn try_insert(&mut self, key: &str, value: &str) -> Result<(), InvalidMetadata> {
        if !valid_key(key) || key.ends_with("-bin") {
            return Err(InvalidMetadata(format!(
                "{key:?} is not a text metadata key"
            )));
        }
        if !valid_text(value.as_bytes()) {
            return Err(InvalidMetadata(format!(
                "metadata {key}: values are printable ASCII (use a -bin key for bytes)"
            )));
        }
        self.entries
            .push((key.into(), Bytes::copy_from_slice(value.as_bytes())));
        Ok(())
    }

    /// Add a binary entry; `key` must end in `-bin`. Panics on a bad key.
    pub fn insert_bin(&mut self, key: &str, value: impl Into<Bytes>) -> &mut Metadata {
        assert!(
            valid_key(key) && key.ends_with("-bin"),
            "{key:?} is not a binary metadata key (they end in -bin)"
        );
        self.entries.push((key.into(), value.into()));
        self
    }

    /// The first text value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| &**k == key)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The first value of `key`, as bytes (any key; for `-bin` keys the decoded bytes).
    pub fn get_bin(&self, key: &str) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &v[..])
    }

    /// Every entry in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.entries.iter().map(|(k, v)| (&**k, &v[..]))
    }

    /// Append an entry received from a peer, checked as
    /// [`try_insert`](Metadata::try_insert) would (any value bytes for a `-bin` key), to `out`
    /// in [`encode`](Metadata::encode)'s format: metadata that is only passed on as an
    /// attachment needs no `Metadata` (nor its allocations) in between.
    pub(crate) fn encode_received(
        out: &mut BytesMut,
        key: &str,
        value: &[u8],
    ) -> Result<(), InvalidMetadata> {
        check_received(key, value)?;
        out.reserve(6 + key.len() + value.len());
        put_entry(out, key, value);
        Ok(())
    }

    /// The attachment that carries this metadata over corewire's framing: per entry a `u16`
    /// key length, the key, a `u32` value length, the value (little endian).
    #[inline]
    pub fn encode(&self) -> Bytes {
        // Most replies carry none: no call for them.
        if self.entries.is_empty() {
            return Bytes::new();
        }
        self.encode_entries()
    }

    fn encode_entries(&self) -> Bytes {
        let len = self
            .entries
            .iter()
            .map(|(k, v)| 6 + k.len() + v.len())
            .sum();
        let mut out = BytesMut::with_capacity(len);
        for (k, v) in &self.entries {
            put_entry(&mut out, k, v);
        }
        out.freeze()
    }

    /// The metadata an attachment carries ([`encode`](Metadata::encode)'s format); `Err` for
    /// bytes that are not that.
    #[inline]
    pub fn decode(attachment: &Bytes) -> Result<Metadata, InvalidMetadata> {
        // Most calls carry none: no call for them.
        if attachment.is_empty() {
            return Ok(Metadata::new());
        }
        Metadata::decode_entries(attachment)
    }

    fn decode_entries(attachment: &Bytes) -> Result<Metadata, InvalidMetadata> {
        let mut meta = Metadata::new();
        let mut at = 0;
        let bad = || InvalidMetadata("malformed metadata attachment".into());
        while at < attachment.len() {
            let klen = read_len::<2>(attachment, &mut at).ok_or_else(bad)?;
            let key = attachment.get(at..at + klen).ok_or_else(bad)?;
            let key = std::str::from_utf8(key).map_err(|_| bad())?;
            at += klen;
            let vlen = read_len::<4>(attachment, &mut at).ok_or_else(bad)?;
            if attachment.len() - at < vlen {
                return Err(bad());
            }
            let value = attachment.slice(at..at + vlen);
            at += vlen;
            check_received(key, &value)?;
            meta.entries.push((key.into(), value));
        }
        Ok(meta)
    }
}

/// One entry in [`Metadata::encode`]'s format.
fn put_entry(out: &mut BytesMut, key: &str, value: &[u8]) {
    out.put_u16_le(key.len() as u16);
    out.put_slice(key.as_bytes());
    out.put_u32_le(value.len() as u32);
    out.put_slice(value);
}

/// Whether a peer's entry is one metadata can carry (any value bytes for a `-bin` key).
fn check_received(key: &str, value: &[u8]) -> Result<(), InvalidMetadata> {
    if !valid_key(key) {
        return Err(InvalidMetadata(format!("bad metadata key {key:?}")));
    }
    if !key.ends_with("-bin") && !valid_text(value) {
        return Err(InvalidMetadata(format!(
            "metadata {key}: value not printable ASCII"
        )));
    }
    Ok(())
}

fn read_len<const N: usize>(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let raw: [u8; N] = bytes.get(*at..*at + N)?.try_into().ok()?;
    *at += N;
    let mut wide = [0u8; 8];
    wide[..N].copy_from_slice(&raw);
    usize::try_from(u64::from_le_bytes(wide)).ok()
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.entries
                    .iter()
                    .map(|(k, v)| (k, String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_through_an_attachment() {
        let mut m = Metadata::new();
        m.insert("x-user", "alice")
            .insert("x-user", "bob")
            .insert_bin("trace-bin", vec![0u8, 255, 7]);
        let back = Metadata::decode(&m.encode()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.get("x-user"), Some("alice"));
        assert_eq!(back.get_bin("trace-bin"), Some(&[0u8, 255, 7][..]));
        assert!(Metadata::new().encode().is_empty());
        assert!(Metadata::decode(&Bytes::new()).unwrap().is_empty());
    }

    #[test]
    fn bad_keys_values_and_attachments_are_refused() {
        let mut m = Metadata::new();
        assert!(m.try_insert("Upper", "v").is_err());
        assert!(m.try_insert("grpc-status", "0").is_err());
        assert!(m.try_insert("x-bin", "v").is_err());
        assert!(m.try_insert("x", "line\nbreak").is_err());
        assert!(m.is_empty());
        for bad in [&b"\x05\x00ab"[..], b"\x01\x00a\xff\xff\xff\xff", b"\x01"] {
            assert!(Metadata::decode(&Bytes::copy_from_slice(bad)).is_err());
        }
    }
}
