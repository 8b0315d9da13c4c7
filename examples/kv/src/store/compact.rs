//! The byte string the keyspace stores keys and string values in (memory per key).
//!
//! A `Bytes` handle is 32 bytes plus a separate allocation (and a second one, its shared
//! header, once it is cloned). Most keys and many values are short, so this type keeps up to
//! [`INLINE`] bytes inside its own 24 bytes and longer ones in one exact-size boxed slice.
//! Reading a value out (GET) copies it, as Redis copies into its reply buffer; the reply
//! encoder copies every bulk into the output buffer anyway, so the extra copy is of the
//! value's size once.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;

/// Longest string kept inline: 24 bytes less the enum's tag and the length byte.
pub(crate) const INLINE: usize = 22;

#[derive(Clone)]
pub(crate) enum CompactBytes {
    Inline {
        len: u8,
        buf: [u8; INLINE],
    },
    Heap(Box<[u8]>),
    /// A string APPEND grew: kept with the vector's spare capacity so repeated appends are
    /// amortised O(appended bytes), like Redis's sds. Boxed (one pointer, not the vector's
    /// three words) so the type stays 24 bytes.
    #[allow(clippy::box_collection)]
    Growable(Box<Vec<u8>>),
}

impl CompactBytes {
    pub fn new(bytes: &[u8]) -> CompactBytes {
        if bytes.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..bytes.len()].copy_from_slice(bytes);
            CompactBytes::Inline {
                len: bytes.len() as u8,
                buf,
            }
        } else {
            CompactBytes::Heap(bytes.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            CompactBytes::Inline { len, buf } => &buf[..usize::from(*len)],
            CompactBytes::Heap(bytes) => bytes,
            CompactBytes::Growable(bytes) => bytes,
        }
    }

    /// The bytes as a vector to append to, reusing the allocation where there is one.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            CompactBytes::Inline { .. } => self.as_slice().to_vec(),
            CompactBytes::Heap(bytes) => bytes.into_vec(),
            CompactBytes::Growable(bytes) => *bytes,
        }
    }

    /// Makes room for `needed` bytes in a string that grows (APPEND, SETBIT, SETRANGE past its
    /// end) as Redis's `sdsMakeRoomFor` does: twice the new length below 1 MiB, the new length
    /// plus 1 MiB above. `Vec`'s own doubling would leave a large bitmap grown bit by bit with
    /// up to twice its length allocated.
    pub fn reserve_growth(bytes: &mut Vec<u8>, needed: usize) {
        const GROW_LIMIT: usize = 1 << 20;
        if needed <= bytes.capacity() {
            return;
        }
        let target = if needed < GROW_LIMIT {
            needed * 2
        } else {
            needed + GROW_LIMIT
        };
        bytes.reserve_exact(target - bytes.len());
    }

    /// The result of an append: inline if short, else the vector with its spare capacity.
    pub fn appended(bytes: Vec<u8>) -> CompactBytes {
        if bytes.len() <= INLINE {
            CompactBytes::new(&bytes)
        } else {
            CompactBytes::Growable(Box::new(bytes))
        }
    }

    /// Runs `f` on the bytes as a vector that may grow, in place, leaving the representation
    /// [`Self::appended`] would give the result: a growable string is changed where it lies
    /// (no allocation), a heap one becomes growable with its allocation kept, an inline one
    /// is copied out and back.
    pub fn change<T>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
        if let CompactBytes::Growable(bytes) = self {
            let out = f(bytes);
            if bytes.len() <= INLINE {
                *self = CompactBytes::new(self.as_slice());
            }
            return out;
        }
        let mut bytes = std::mem::take(self).into_vec();
        let out = f(&mut bytes);
        *self = CompactBytes::appended(bytes);
        out
    }

    /// An owned copy for a reply or a log record.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_slice())
    }
}

impl Default for CompactBytes {
    fn default() -> Self {
        CompactBytes::new(&[])
    }
}

impl From<&[u8]> for CompactBytes {
    fn from(bytes: &[u8]) -> Self {
        CompactBytes::new(bytes)
    }
}

impl From<&Bytes> for CompactBytes {
    fn from(bytes: &Bytes) -> Self {
        CompactBytes::new(bytes)
    }
}

impl From<Bytes> for CompactBytes {
    fn from(bytes: Bytes) -> Self {
        CompactBytes::new(&bytes)
    }
}

impl From<Vec<u8>> for CompactBytes {
    fn from(bytes: Vec<u8>) -> Self {
        if bytes.len() <= INLINE {
            CompactBytes::new(&bytes)
        } else {
            // Reuses the vector's allocation (shrunk to fit).
            CompactBytes::Heap(bytes.into_boxed_slice())
        }
    }
}

impl Deref for CompactBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for CompactBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Lets maps keyed by this type be looked up with `&[u8]`; [`Hash`] hashes as the slice does.
impl Borrow<[u8]> for CompactBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Hash for CompactBytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq for CompactBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for CompactBytes {}

impl PartialEq<[u8]> for CompactBytes {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Bytes> for CompactBytes {
    fn eq(&self, other: &Bytes) -> bool {
        self.as_slice() == &other[..]
    }
}

/// Byte order (memcmp), as sorted sets order members.
impl Ord for CompactBytes {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl PartialOrd for CompactBytes {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for CompactBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_three_words() {
        assert_eq!(std::mem::size_of::<CompactBytes>(), 24);
    }

    #[test]
    fn a_change_in_place_leaves_what_an_append_would() {
        for (len, grow) in [(1, 3), (INLINE, 1), (INLINE + 5, 100), (40, 0)] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut compact = CompactBytes::new(&data);
            // Twice: the second change finds the growable form the first left.
            for _ in 0..2 {
                let mut expected = compact.as_slice().to_vec();
                expected.resize(expected.len() + grow, 7);
                compact.change(|bytes| bytes.resize(bytes.len() + grow, 7));
                assert_eq!(compact.as_slice(), &expected[..]);
                let appended = CompactBytes::appended(expected);
                assert_eq!(
                    std::mem::discriminant(&compact),
                    std::mem::discriminant(&appended)
                );
            }
        }
        // Shrunk to inline length: inline again, as `appended` makes it.
        let mut compact = CompactBytes::appended(vec![1; 100]);
        compact.change(|bytes| bytes.truncate(3));
        assert!(matches!(compact, CompactBytes::Inline { len: 3, .. }));
    }

    #[test]
    fn round_trips_inline_and_heap() {
        for len in [0, 1, INLINE - 1, INLINE, INLINE + 1, 1000] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let compact = CompactBytes::new(&data);
            assert_eq!(compact.as_slice(), &data[..]);
            assert_eq!(CompactBytes::from(data.clone()), compact);
            assert_eq!(compact.to_bytes(), Bytes::from(data));
            assert_eq!(
                matches!(compact, CompactBytes::Inline { .. }),
                len <= INLINE
            );
            let mut grown = compact.into_vec();
            grown.push(7);
            let appended = CompactBytes::appended(grown.clone());
            assert_eq!(appended.as_slice(), &grown[..]);
        }
    }

    #[test]
    fn hashes_as_its_slice() {
        use std::hash::BuildHasher;
        let state = foldhash::fast::FixedState::default();
        let compact = CompactBytes::new(b"key:1");
        assert_eq!(state.hash_one(&compact), state.hash_one(&b"key:1"[..]));
    }

    #[test]
    fn growth_is_redis_greedy_policy() {
        // Grown 4 KiB at a time past 3 MiB, as a bitmap set bit by bit grows.
        let mut bytes = Vec::new();
        let mut most_over_limit = 0;
        while bytes.len() < 3 << 20 {
            let needed = bytes.len() + 4096;
            CompactBytes::reserve_growth(&mut bytes, needed);
            assert!(bytes.capacity() >= needed);
            bytes.resize(needed, 0);
            if needed >= 1 << 20 {
                most_over_limit = most_over_limit.max(bytes.capacity() - needed);
            } else {
                assert!(bytes.capacity() <= 2 * needed);
            }
        }
        // Above 1 MiB at most 1 MiB spare (Vec's doubling would leave up to 2 MiB here).
        assert!(most_over_limit <= 1 << 20, "{most_over_limit}");
    }
}
