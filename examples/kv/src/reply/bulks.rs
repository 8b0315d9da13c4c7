//! An array of bulk strings kept in its wire form (LRANGE_100 spent a fifth of the
//! shard building a `Reply::Bulk` per element, each an allocation and a copy, and as much again
//! freeing them after the encode). The elements are written as RESP straight from the
//! collection into one buffer: one allocation per reply, and encoding it is one copy. RESP2
//! and RESP3 write an array of bulk strings the same way.

use bytes::{Bytes, BytesMut};

use super::Reply;
use crate::resp;

/// `*N`, then `$len` and the bytes of each of the N elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bulks {
    count: usize,
    wire: Bytes,
}

/// Writes the elements of a [`Bulks`] whose count is known up front.
pub struct BulksBuilder {
    count: usize,
    written: usize,
    wire: BytesMut,
}

impl Bulks {
    /// A builder for `count` elements of about `bytes` bytes in all.
    pub fn builder(count: usize, bytes: usize) -> BulksBuilder {
        // Per element: `$`, up to 10 digits for the usual lengths, and two CRLFs.
        let mut wire = BytesMut::with_capacity(24 + bytes + count * 8);
        resp::write_array_header(&mut wire, count);
        BulksBuilder {
            count,
            written: 0,
            wire,
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The whole array as RESP.
    pub fn wire(&self) -> &[u8] {
        &self.wire
    }

    /// The elements, read back from the wire form (for the rare reader that needs them one by
    /// one: a RESP3 shape, a test).
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let wire = &self.wire[..];
        // Past the `*N\r\n` header.
        let mut at = wire
            .iter()
            .position(|&b| b == b'\n')
            .map_or(wire.len(), |i| i + 1);
        std::iter::from_fn(move || {
            let rest = wire.get(at..).filter(|rest| !rest.is_empty())?;
            let cr = rest.iter().position(|&b| b == b'\r')?;
            let len = usize::try_from(crate::number::parse_i64(&rest[1..cr])?).ok()?;
            let start = cr + 2;
            at += start + len + 2;
            Some(&rest[start..start + len])
        })
    }

    /// The same array as bulk replies.
    pub fn to_replies(&self) -> Vec<Reply> {
        (self.iter())
            .map(|item| Reply::Bulk(Bytes::copy_from_slice(item)))
            .collect()
    }
}

impl BulksBuilder {
    pub fn push(&mut self, item: &[u8]) {
        assert!(self.written < self.count, "more elements than announced");
        self.written += 1;
        resp::write_bulk(&mut self.wire, item);
    }

    /// The array; panics unless exactly the announced count was pushed (the header says it).
    pub fn finish(self) -> Bulks {
        assert_eq!(self.written, self.count, "fewer elements than announced");
        Bulks {
            count: self.count,
            wire: self.wire.freeze(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_an_array_of_bulks_and_reads_back() {
        let items: [&[u8]; 4] = [b"a", b"", b"0123456789ab", b"\r\n$1\r\n"];
        let mut builder = Bulks::builder(items.len(), 20);
        items.iter().for_each(|item| builder.push(item));
        let bulks = builder.finish();
        let as_array = Reply::Array(
            (items.iter())
                .map(|item| Reply::Bulk(Bytes::copy_from_slice(item)))
                .collect(),
        );
        let mut expected = BytesMut::new();
        as_array.encode(&mut expected);
        assert_eq!(bulks.wire(), &expected[..]);
        assert_eq!(bulks.iter().collect::<Vec<_>>(), items);
        assert_eq!(Reply::Bulks(bulks.clone()), as_array);
        assert_eq!(as_array, Reply::Bulks(bulks.clone()));
        let hash = |reply: &Reply| {
            std::hash::BuildHasher::hash_one(&foldhash::fast::FixedState::default(), reply)
        };
        assert_eq!(hash(&Reply::Bulks(bulks)), hash(&as_array));
        let empty = Bulks::builder(0, 0).finish();
        assert!(empty.is_empty());
        assert_eq!(Reply::Bulks(empty), Reply::Array(Vec::new()));
    }

    #[test]
    #[should_panic(expected = "fewer elements")]
    fn a_short_array_is_refused() {
        let mut builder = Bulks::builder(2, 1);
        builder.push(b"a");
        builder.finish();
    }
}
