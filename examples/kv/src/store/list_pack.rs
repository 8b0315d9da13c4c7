//! A list stored packed (memory per element), like Redis's quicklist of listpacks:
//! a deque of chunks, each one buffer of up to [`CHUNK_BYTES`] holding its elements back to
//! back. An element is `len | bytes | len reversed` (LEB128 lengths; the reversed copy lets a
//! chunk be walked from its end, for RPOP and reverse scans), so a short element costs its
//! bytes plus 2, where a `VecDeque<Bytes>` slot cost 32 bytes plus an allocation.
//!
//! Ends are cheap: a chunk's elements sit at the end of its buffer's used part with a gap
//! before them, so LPUSH writes into the gap and LPOP widens it, neither shifting the chunk
//! (shifting up to 4 KiB per LPUSH, and a temporary vector per element, was most of LPUSH's
//! cost); the gap is refilled by doubling, as a vector grows at the back. An index costs a walk
//! over chunk counts and then within one chunk; changes in the middle rewrite one chunk.

use std::collections::VecDeque;
use std::fmt;

use bytes::Bytes;

/// Most bytes a chunk holds before a new one starts (a larger element gets a chunk alone).
/// Small enough that shifting a chunk's buffer at LPUSH/LPOP stays cheap.
const CHUNK_BYTES: usize = 4096;

#[derive(Clone, Default)]
struct Chunk {
    /// The elements are `buf[start..]`; `buf[..start]` is the gap LPUSH writes into.
    buf: Vec<u8>,
    /// `u32`s (a chunk is a few KiB, or one element) keep a chunk at 32 bytes.
    start: u32,
    count: u32,
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

/// [`encode`] into `dst`, which is exactly [`encoded_len`] long.
fn encode_into(dst: &mut [u8], item: &[u8]) {
    let (mut n, mut at) = (item.len(), 0);
    while n >= 0x80 {
        dst[at] = (n as u8 & 0x7f) | 0x80;
        n >>= 7;
        at += 1;
    }
    dst[at] = n as u8;
    let header = at + 1;
    dst[header..header + item.len()].copy_from_slice(item);
    let (front, back) = dst.split_at_mut(header + item.len());
    for (to, from) in back.iter_mut().zip(front[..header].iter().rev()) {
        *to = *from;
    }
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
        Chunk {
            buf,
            start: 0,
            count: 1,
        }
    }

    /// The encoded elements.
    fn data(&self) -> &[u8] {
        &self.buf[self.start as usize..]
    }

    fn fits(&self, item: &[u8]) -> bool {
        self.data().len() + encoded_len(item.len()) <= CHUNK_BYTES
    }

    fn iter(&self) -> ChunkIter<'_> {
        let buf = self.data();
        ChunkIter {
            buf,
            front: 0,
            back: buf.len(),
        }
    }

    fn push_front(&mut self, item: &[u8]) {
        let need = encoded_len(item.len());
        if (self.start as usize) < need {
            self.open_front(need);
        }
        let start = self.start as usize - need;
        encode_into(&mut self.buf[start..start + need], item);
        self.start = start as u32;
        self.count += 1;
    }

    /// Makes a gap of at least `need` bytes before the elements: within the buffer's
    /// capacity if it has room, else in one twice as large (powers of two, as `with` and
    /// vector growth make, so a full chunk is [`CHUNK_BYTES`] whichever end it grew at).
    fn open_front(&mut self, need: usize) {
        let used = self.data().len();
        let cap = self.buf.capacity().max(16);
        let cap = if used + need <= cap {
            cap
        } else {
            (used + need).next_power_of_two()
        };
        if cap <= self.buf.capacity() {
            let start = self.start as usize;
            self.buf.resize(cap, 0);
            self.buf.copy_within(start..start + used, cap - used);
        } else {
            let mut buf = Vec::with_capacity(cap);
            buf.resize(cap - used, 0);
            buf.extend_from_slice(self.data());
            self.buf = buf;
        }
        self.start = (cap - used) as u32;
    }

    fn push_back(&mut self, item: &[u8]) {
        // A gap left by LPOPs is reused before the buffer grows, so it never doubles around
        // unused bytes.
        if self.start > 0 && self.buf.len() + encoded_len(item.len()) > self.buf.capacity() {
            self.buf.drain(..self.start as usize);
            self.start = 0;
        }
        encode(&mut self.buf, item);
        self.count += 1;
    }

    fn pop_front(&mut self) -> Bytes {
        let (item, next) = decode_at(self.data(), 0);
        let item = Bytes::copy_from_slice(item);
        self.start += next as u32;
        self.count -= 1;
        item
    }

    fn pop_back(&mut self) -> Bytes {
        let data = self.data();
        let (item, start) = decode_before(data, data.len());
        let item = Bytes::copy_from_slice(item);
        self.buf.truncate(self.start as usize + start);
        self.count -= 1;
        item
    }

    /// Chunks holding `items` in order, each filled up to [`CHUNK_BYTES`].
    fn pack<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<Chunk> {
        let mut chunks: Vec<Chunk> = Vec::new();
        for item in items {
            match chunks.last_mut() {
                Some(last) if last.fits(item) => last.push_back(item),
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

    /// Its buffers: what freeing it costs in allocations (Redis's quicklist nodes).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
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
                if rest < chunk.count as usize {
                    return (at, rest);
                }
                rest -= chunk.count as usize;
            }
        } else {
            let mut end = self.len;
            for (at, chunk) in self.chunks.iter().enumerate().rev() {
                let start = end - chunk.count as usize;
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
            Some(first) if first.fits(item) => first.push_front(item),
            _ => self.chunks.push_front(Chunk::with(item)),
        }
    }

    pub fn push_back(&mut self, item: &[u8]) {
        self.len += 1;
        self.bytes += item.len();
        match self.chunks.back_mut() {
            Some(last) if last.fits(item) => last.push_back(item),
            _ => self.chunks.push_back(Chunk::with(item)),
        }
    }

    pub fn pop_front(&mut self) -> Option<Bytes> {
        let first = self.chunks.front_mut()?;
        let item = first.pop_front();
        if first.count == 0 {
            self.chunks.pop_front();
        }
        self.len -= 1;
        self.bytes -= item.len();
        Some(item)
    }

    pub fn pop_back(&mut self) -> Option<Bytes> {
        let last = self.chunks.back_mut()?;
        let item = last.pop_back();
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
            let end = base + self.chunks[at].count as usize;
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
            list.chunks.iter().map(|c| c.count as usize).sum::<usize>(),
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

    #[test]
    fn pushing_at_the_front_costs_what_pushing_at_the_back_does() {
        let mut list = List::default();
        for i in 0..10_000 {
            list.push_front(format!("val{i:06}").as_bytes());
        }
        let stored: usize = list.chunks.iter().map(|c| c.buf.capacity()).sum();
        assert!(stored <= 10_000 * 12, "{stored}");
        assert!(list.chunks.iter().all(|c| c.buf.capacity() <= CHUNK_BYTES));
        assert_eq!(list.get(0), Some(&b"val009999"[..]));
        assert_eq!(list.get(9_999), Some(&b"val000000"[..]));
    }

    #[test]
    fn a_gap_left_by_pops_is_reused_not_grown_around() {
        let mut list = List::default();
        let mut model = VecDeque::new();
        // Fill one chunk from the back, empty most of it from the front, refill at the back
        // and then the front: the buffer never grows past a chunk.
        for round in 0..4 {
            for i in 0..400 {
                let item = format!("r{round}i{i:04}").into_bytes();
                list.push_back(&item);
                model.push_back(item);
            }
            for _ in 0..350 {
                assert_eq!(list.pop_front().map(|b| b.to_vec()), model.pop_front());
            }
            for i in 0..300 {
                let item = format!("f{round}i{i:04}").into_bytes();
                list.push_front(&item);
                model.push_front(item);
            }
            check(&list, &model);
            assert!(list.chunks.iter().all(|c| c.buf.capacity() <= CHUNK_BYTES));
        }
    }

    #[test]
    fn encode_into_matches_encode() {
        for len in [0, 1, 127, 128, 300, 20_000] {
            let item = vec![7u8; len];
            let mut expected = Vec::new();
            encode(&mut expected, &item);
            let mut got = vec![0; encoded_len(len)];
            encode_into(&mut got, &item);
            assert_eq!(got, expected, "{len}");
        }
    }
}
