//! A list stored packed (issue 13: memory per element), like Redis's quicklist of listpacks:
//! a deque of chunks, each one buffer of up to [`CHUNK_BYTES`] holding its elements back to
//! back. An element is `len | bytes | len reversed` (LEB128 lengths; the reversed copy lets a
//! chunk be walked from its end, for RPOP and reverse scans), so a short element costs its
//! bytes plus 2, where a `VecDeque<Bytes>` slot cost 32 bytes plus an allocation.
//!
//! Ends are cheap (one chunk's buffer shifts by one element at most); an index costs a walk
//! over chunk counts and then within one chunk; changes in the middle rewrite one chunk.

use std::collections::VecDeque;
use std::fmt;

use bytes::Bytes;

/// Most bytes a chunk holds before a new one starts (a larger element gets a chunk alone).
/// Small enough that shifting a chunk's buffer at LPUSH/LPOP stays cheap.
const CHUNK_BYTES: usize = 4096;

#[derive(Clone, Default)]
struct Chunk {
    buf: Vec<u8>,
    count: usize,
}

fn varint_len(mut n: usize) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

/// Bytes an element of `len` takes in a chunk.
fn encoded_len(len: usize) -> usize {
    len + 2 * varint_len(len)
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn encode(out: &mut Vec<u8>, item: &[u8]) {
    put_varint(out, item.len());
    out.extend_from_slice(item);
    let at = out.len();
    put_varint(out, item.len());
    out[at..].reverse();
}

/// The element starting at `pos`: (its bytes, where the next one starts).
fn decode_at(buf: &[u8], pos: usize) -> (&[u8], usize) {
    let (mut len, mut shift, mut i) = (0usize, 0, pos);
    loop {
        let byte = buf[i];
        len |= usize::from(byte & 0x7f) << shift;
        i += 1;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (&buf[i..i + len], i + len + varint_len(len))
}

/// The element ending at `end`: (its bytes, where it starts).
fn decode_before(buf: &[u8], end: usize) -> (&[u8], usize) {
    let (mut len, mut shift, mut i) = (0usize, 0, end);
    loop {
        i -= 1;
        let byte = buf[i];
        len |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let start = i - len;
    (&buf[start..i], start - varint_len(len))
}

impl Chunk {
    fn with(item: &[u8]) -> Chunk {
        // Powers of two, so growth by doubling ends at CHUNK_BYTES, not past it.
        let mut buf = Vec::with_capacity(encoded_len(item.len()).next_power_of_two().max(16));
        encode(&mut buf, item);
        Chunk { buf, count: 1 }
    }

    fn fits(&self, item: &[u8]) -> bool {
        self.buf.len() + encoded_len(item.len()) <= CHUNK_BYTES
    }

    fn iter(&self) -> ChunkIter<'_> {
        ChunkIter {
            buf: &self.buf,
            front: 0,
            back: self.buf.len(),
        }
    }

    /// Chunks holding `items` in order, each filled up to [`CHUNK_BYTES`].
    fn pack<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<Chunk> {
        let mut chunks: Vec<Chunk> = Vec::new();
        for item in items {
            match chunks.last_mut() {
                Some(last) if last.fits(item) => {
                    encode(&mut last.buf, item);
                    last.count += 1;
                }
                _ => chunks.push(Chunk::with(item)),
            }
        }
        chunks
    }
}

/// A chunk's elements, from either end.
struct ChunkIter<'a> {
    buf: &'a [u8],
    front: usize,
    back: usize,
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        let (item, next) = decode_at(self.buf, self.front);
        self.front = next;
        Some(item)
    }
}

impl DoubleEndedIterator for ChunkIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let (item, start) = decode_before(self.buf, self.back);
        self.back = start;
        Some(item)
    }
}

#[derive(Clone, Default)]
pub(crate) struct List {
    chunks: VecDeque<Chunk>,
    len: usize,
    /// Payload bytes (the elements' lengths), for the store's byte count.
    pub(super) bytes: usize,
}

impl List {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + '_ {
        self.chunks.iter().flat_map(Chunk::iter)
    }

    /// Elements `from..=to` (in range: `from <= to < len`).
    pub fn range(&self, from: usize, to: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let (chunk, offset) = self.locate(from);
        self.chunks
            .range(chunk..)
            .flat_map(Chunk::iter)
            .skip(offset)
            .take(to + 1 - from)
    }

    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len {
            return None;
        }
        let (chunk, offset) = self.locate(index);
        self.chunks[chunk].iter().nth(offset)
    }

    /// The chunk holding `index` (< len) and the index within it, walking from the nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        if index < self.len / 2 {
            let mut rest = index;
            for (at, chunk) in self.chunks.iter().enumerate() {
                if rest < chunk.count {
                    return (at, rest);
                }
                rest -= chunk.count;
            }
        } else {
            let mut end = self.len;
            for (at, chunk) in self.chunks.iter().enumerate().rev() {
                let start = end - chunk.count;
                if index >= start {
                    return (at, index - start);
                }
                end = start;
            }
        }
        (self.chunks.len(), 0)
    }

    pub fn push_front(&mut self, item: &[u8]) {
        self.len += 1;
        self.bytes += item.len();
        match self.chunks.front_mut() {
            Some(first) if first.fits(item) => {
                let mut encoded = Vec::with_capacity(encoded_len(item.len()));
                encode(&mut encoded, item);
                first.buf.splice(0..0, encoded);
                first.count += 1;
            }
            _ => self.chunks.push_front(Chunk::with(item)),
        }
    }

    pub fn push_back(&mut self, item: &[u8]) {
        self.len += 1;
        self.bytes += item.len();
        match self.chunks.back_mut() {
            Some(last) if last.fits(item) => {
                encode(&mut last.buf, item);
                last.count += 1;
            }
            _ => self.chunks.push_back(Chunk::with(item)),
        }
    }

    pub fn pop_front(&mut self) -> Option<Bytes> {
        let first = self.chunks.front_mut()?;
        let (item, next) = decode_at(&first.buf, 0);
        let item = Bytes::copy_from_slice(item);
        first.buf.drain(..next);
        first.count -= 1;
        if first.count == 0 {
            self.chunks.pop_front();
        }
        self.len -= 1;
        self.bytes -= item.len();
        Some(item)
    }

    pub fn pop_back(&mut self) -> Option<Bytes> {
        let last = self.chunks.back_mut()?;
        let (item, start) = decode_before(&last.buf, last.buf.len());
        let item = Bytes::copy_from_slice(item);
        last.buf.truncate(start);
        last.count -= 1;
        if last.count == 0 {
            self.chunks.pop_back();
        }
        self.len -= 1;
        self.bytes -= item.len();
        Some(item)
    }

    /// Replaces element `index` (< len).
    pub fn set(&mut self, index: usize, item: &[u8]) {
        let (chunk, offset) = self.locate(index);
        let mut old_len = 0;
        self.rewrite(chunk, |items| {
            old_len = std::mem::replace(&mut items[offset], item.to_vec()).len();
        });
        self.bytes = self.bytes + item.len() - old_len;
    }

    /// Inserts before element `index` (`index == len` appends).
    pub fn insert(&mut self, index: usize, item: &[u8]) {
        if index == self.len {
            return self.push_back(item);
        }
        let (chunk, offset) = self.locate(index);
        self.len += 1;
        self.bytes += item.len();
        self.rewrite(chunk, |items| items.insert(offset, item.to_vec()));
    }

    /// Removes the elements at `positions` (ascending, each < len), one chunk rewrite per
    /// chunk touched.
    pub fn remove_positions(&mut self, positions: &[usize]) {
        let mut wanted = positions.iter().copied().peekable();
        let (mut base, mut at) = (0, 0);
        while at < self.chunks.len() && wanted.peek().is_some() {
            let end = base + self.chunks[at].count;
            let mut gone = Vec::new();
            while let Some(position) = wanted.next_if(|&p| p < end) {
                gone.push(position - base);
            }
            base = end;
            if gone.is_empty() {
                at += 1;
                continue;
            }
            let before = self.chunks.len();
            let mut removed_bytes = 0;
            self.rewrite(at, |items| {
                for &i in gone.iter().rev() {
                    removed_bytes += items.remove(i).len();
                }
            });
            self.len -= gone.len();
            self.bytes -= removed_bytes;
            // Past what the chunk became: nothing if it emptied, else one chunk (removal
            // never makes a chunk larger, so it does not split).
            at = at + 1 + self.chunks.len() - before;
        }
    }

    /// Keeps `start..=end` (already clamped, `start <= end < len`), or nothing.
    pub fn retain_range(&mut self, range: Option<(usize, usize)>) {
        let Some((start, end)) = range else {
            *self = List::default();
            return;
        };
        let chunks: VecDeque<Chunk> = Chunk::pack(self.range(start, end)).into();
        let bytes = self.range(start, end).map(<[u8]>::len).sum();
        *self = List {
            chunks,
            len: end + 1 - start,
            bytes,
        };
    }

    /// Rebuilds chunk `at` from its elements as `edit` leaves them: an emptied chunk goes, an
    /// overfull one splits. A chunk is at most a few KiB, so copying it out is cheap.
    fn rewrite(&mut self, at: usize, edit: impl FnOnce(&mut Vec<Vec<u8>>)) {
        let Some(old) = self.chunks.remove(at) else {
            return;
        };
        let mut items: Vec<Vec<u8>> = old.iter().map(<[u8]>::to_vec).collect();
        edit(&mut items);
        for (offset, chunk) in Chunk::pack(items.iter().map(Vec::as_slice))
            .into_iter()
            .enumerate()
        {
            self.chunks.insert(at + offset, chunk);
        }
    }
}

impl PartialEq for List {
    /// Equal elements, however they are split into chunks.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(Bytes::copy_from_slice))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn check(list: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(list.len(), model.len());
        assert_eq!(list.bytes, model.iter().map(Vec::len).sum::<usize>());
        assert!(list.iter().eq(model.iter().map(Vec::as_slice)));
        assert!(list.iter().rev().eq(model.iter().rev().map(Vec::as_slice)));
        assert_eq!(
            list.chunks.iter().map(|c| c.count).sum::<usize>(),
            model.len()
        );
        for (i, item) in model.iter().enumerate() {
            assert_eq!(list.get(i), Some(&item[..]));
        }
        if !model.is_empty() {
            let (from, to) = (model.len() / 3, model.len() - 1);
            assert!(list
                .range(from, to)
                .eq(model.range(from..=to).map(Vec::as_slice)));
        }
    }

    #[test]
    fn matches_a_deque() {
        let mut rng = fastrand::Rng::with_seed(13);
        let mut list = List::default();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        for step in 0..3000 {
            // Mostly short elements, some past one byte of length and some past a chunk.
            let len = match rng.u8(..) {
                0..=200 => rng.usize(..12),
                201..=250 => rng.usize(..300),
                _ => rng.usize(..9000),
            };
            let item: Vec<u8> = (0..len).map(|_| rng.u8(b'a'..b'e')).collect();
            match rng.u8(..8) {
                0 | 1 => {
                    list.push_front(&item);
                    model.push_front(item);
                }
                2 | 3 => {
                    list.push_back(&item);
                    model.push_back(item);
                }
                4 => assert_eq!(list.pop_front().map(|b| b.to_vec()), model.pop_front()),
                5 => assert_eq!(list.pop_back().map(|b| b.to_vec()), model.pop_back()),
                6 if !model.is_empty() => {
                    let i = rng.usize(..=model.len());
                    if rng.bool() && i < model.len() {
                        list.set(i, &item);
                        model[i] = item;
                    } else {
                        list.insert(i, &item);
                        model.insert(i, item);
                    }
                }
                _ if !model.is_empty() => {
                    let mut positions: Vec<usize> =
                        (0..model.len()).filter(|_| rng.u8(..10) == 0).collect();
                    if step % 50 == 0 {
                        let start = rng.usize(..model.len());
                        let end = rng.usize(start..model.len());
                        list.retain_range(Some((start, end)));
                        model = model.range(start..=end).cloned().collect();
                        positions.clear();
                    }
                    list.remove_positions(&positions);
                    for &p in positions.iter().rev() {
                        model.remove(p);
                    }
                }
                _ => {}
            }
            check(&list, &model);
        }
        list.retain_range(None);
        check(&list, &VecDeque::new());
    }

    #[test]
    fn short_elements_cost_two_bytes_each() {
        let mut list = List::default();
        for i in 0..10_000 {
            list.push_back(format!("val{i:06}").as_bytes());
        }
        let stored: usize = list.chunks.iter().map(|c| c.buf.capacity()).sum();
        assert!(stored <= 10_000 * 12, "{stored}");
    }
}
