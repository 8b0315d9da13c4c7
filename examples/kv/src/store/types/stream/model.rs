//! A stream value: its entries in ID order, the listpack nodes Redis would hold them in, the
//! metadata Redis 7.0 keeps (last ID, first ID, max deleted ID, entries added) and the
//! consumer groups.
//!
//! Memory: each entry is one packed buffer (varint lengths, then bytes) in a B-tree keyed by
//! its ID. An entry whose field names are its node's master fields (the usual case: every
//! entry of a stream has the same fields) stores only its values, Redis's `SAMEFIELDS`
//! compression. The nodes themselves are only bookkeeping (counts, bytes, last ID, master
//! fields), kept so that node splits, approximate trimming and XINFO's `radix-tree-keys`
//! come out as Redis's.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::group::Group;
use super::id::StreamId;
use super::node;

/// One packed entry: a flag byte (1: values only, fields are the node's), then
/// `varint(len) bytes` for each field and value (values only when flagged).
type Packed = Box<[u8]>;

/// An entry as read: its ID and field-value pairs.
pub type Entry = (StreamId, Vec<(Bytes, Bytes)>);

/// One listpack node's bookkeeping, keyed by its master ID (the first ID appended to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Entries not deleted.
    pub live: u64,
    /// Entries flagged deleted (XDEL, exact trimming) still taking room in the node.
    pub deleted: u64,
    /// The last entry appended, deleted or not (`lpGetEdgeStreamID`).
    pub last: StreamId,
    /// The listpack's size in bytes as Redis would have it.
    pub bytes: usize,
    /// The master entry's field names.
    pub fields: Box<[Bytes]>,
}

/// Where a new node splits off: Redis's `stream-node-max-entries` / `stream-node-max-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    pub max_entries: usize,
    pub max_bytes: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_entries: 100,
            max_bytes: 4096,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stream {
    entries: BTreeMap<StreamId, Packed>,
    nodes: BTreeMap<StreamId, Node>,
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty), as Redis records it.
    pub first_id: StreamId,
    pub max_deleted_entry_id: StreamId,
    pub entries_added: u64,
    /// Consumer groups by name, in name order (Redis's radix tree order).
    pub groups: BTreeMap<Bytes, Group>,
    /// Bytes of the packed entries.
    bytes: usize,
}

/// Fixed cost of an entry besides its packed bytes: its B-tree slot (ID and buffer pointer).
const ENTRY_COST: usize = 16 + 16;

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn get_varint(data: &[u8], at: &mut usize) -> usize {
    let mut n = 0usize;
    let mut shift = 0;
    while let Some(&byte) = data.get(*at) {
        *at += 1;
        n |= ((byte & 0x7f) as usize) << shift;
        if byte < 0x80 {
            break;
        }
        shift += 7;
    }
    n
}

fn pack(pairs: &[(&[u8], &[u8])], same_fields: bool) -> Packed {
    let size: usize = pairs.iter().map(|(f, v)| f.len() + v.len() + 4).sum();
    let mut out = Vec::with_capacity(size + 1);
    out.push(u8::from(same_fields));
    for (field, value) in pairs {
        if !same_fields {
            put_varint(&mut out, field.len());
            out.extend_from_slice(field);
        }
        put_varint(&mut out, value.len());
        out.extend_from_slice(value);
    }
    out.into_boxed_slice()
}

fn unpack(packed: &[u8], fields: &[Bytes]) -> Vec<(Bytes, Bytes)> {
    let mut at = 1;
    let take = |at: &mut usize| {
        let len = get_varint(packed, at);
        let bytes = Bytes::copy_from_slice(&packed[*at..*at + len]);
        *at += len;
        bytes
    };
    if packed.first() == Some(&1) {
        fields
            .iter()
            .map(|field| (field.clone(), take(&mut at)))
            .collect()
    } else {
        let mut pairs = Vec::new();
        while at < packed.len() {
            let field = take(&mut at);
            let value = take(&mut at);
            pairs.push((field, value));
        }
        pairs
    }
}

impl Stream {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held, for the store's accounting: entries, and each group's pending entries
    /// and consumers.
    pub fn payload_len(&self) -> usize {
        let groups: usize = (self.groups.iter())
            .map(|(name, group)| name.len() + group.payload_len())
            .sum();
        self.bytes + self.entries.len() * ENTRY_COST + groups
    }

    /// The listpack nodes (XINFO's `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub(super) fn nodes(&self) -> &BTreeMap<StreamId, Node> {
        &self.nodes
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.entries.contains_key(&id)
    }

    /// The last live entry's ID (`streamLastValidID`), `None` when empty.
    pub fn last_live(&self) -> Option<StreamId> {
        self.entries.keys().next_back().copied()
    }

    pub fn first_live(&self) -> Option<StreamId> {
        self.entries.keys().next().copied()
    }

    fn master_fields(&self, id: StreamId) -> &[Bytes] {
        self.nodes
            .range(..=id)
            .next_back()
            .map_or(&[][..], |(_, node)| &node.fields)
    }

    /// An entry's field-value pairs.
    pub fn get(&self, id: StreamId) -> Option<Vec<(Bytes, Bytes)>> {
        let packed = self.entries.get(&id)?;
        Some(unpack(packed, self.master_fields(id)))
    }

    /// Live entries with IDs in `start..=end`, in order (reversed with `rev`).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = Entry> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let decode = move |(id, packed): (&StreamId, &Packed)| {
            (*id, unpack(packed, self.master_fields(*id)))
        };
        let range = self.entries.range(start..=end);
        if rev {
            Box::new(range.rev().map(decode))
        } else {
            Box::new(range.map(decode))
        }
    }

    /// Appends an entry with `id` (greater than `last_id`: the caller checked) into the last
    /// node, or a new one where Redis's `streamAppendItem` starts one.
    pub fn append(&mut self, id: StreamId, pairs: &[(&[u8], &[u8])], limits: NodeLimits) {
        let max_bytes = match limits.max_bytes {
            0 => node::MAX_SIZE,
            n => n.min(node::MAX_SIZE),
        };
        let payload: usize = pairs.iter().map(|(f, v)| f.len() + v.len()).sum();
        let last = self.nodes.iter_mut().next_back();
        let reuse = last.filter(|(_, node)| {
            let full =
                limits.max_entries > 0 && (node.live + node.deleted) as usize >= limits.max_entries;
            node.bytes + payload < max_bytes && !full
        });
        let (master, node) = match reuse {
            Some((&master, node)) => (master, node),
            None => {
                let fields: Box<[Bytes]> = pairs
                    .iter()
                    .map(|(f, _)| Bytes::copy_from_slice(f))
                    .collect();
                let names: Vec<&[u8]> = pairs.iter().map(|(f, _)| *f).collect();
                let node = Node {
                    live: 0,
                    deleted: 0,
                    last: id,
                    bytes: node::EMPTY + node::master(1, 0, &names),
                    fields,
                };
                self.nodes.insert(id, node);
                (id, self.nodes.get_mut(&id).expect("just inserted"))
            }
        };
        let same = node.fields.len() == pairs.len()
            && node
                .fields
                .iter()
                .zip(pairs)
                .all(|(f, (g, _))| f[..] == **g);
        let before = node::int(node.live as i64);
        node.live += 1;
        node.bytes += node::int(node.live as i64) - before;
        node.bytes += node::entry(
            id.ms - master.ms,
            id.seq.wrapping_sub(master.seq),
            pairs,
            same,
        );
        node.last = id;
        let packed = pack(pairs, same);
        self.bytes += packed.len();
        self.entries.insert(id, packed);
        self.entries_added += 1;
        self.last_id = id;
        if self.entries.len() == 1 {
            self.first_id = id;
        }
    }

    /// Marks `id` deleted in its node (the node goes when nothing live is left in it).
    /// Updates neither `first_id` nor `max_deleted_entry_id` (the callers do, as Redis).
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some(packed) = self.entries.remove(&id) else {
            return false;
        };
        self.bytes -= packed.len();
        if let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() {
            if node.live <= 1 {
                self.nodes.remove(&master);
            } else {
                node.live -= 1;
                node.deleted += 1;
            }
        }
        true
    }

    /// Removes the node at `master` and its live entries; returns how many.
    pub(super) fn remove_node(&mut self, master: StreamId) -> u64 {
        let end = self.nodes.range(master..).nth(1).map(|(id, _)| *id);
        let Some(node) = self.nodes.remove(&master) else {
            return 0;
        };
        let ids: Vec<StreamId> = match end {
            Some(end) => self.entries.range(master..end).map(|(id, _)| *id).collect(),
            None => self.entries.range(master..).map(|(id, _)| *id).collect(),
        };
        for id in &ids {
            if let Some(packed) = self.entries.remove(id) {
                self.bytes -= packed.len();
            }
        }
        debug_assert_eq!(ids.len() as u64, node.live);
        ids.len() as u64
    }

    /// Flags live entries of the node at `master` deleted while `stop` says go on; the node
    /// stays (exact trimming inside a node). Returns how many.
    pub(super) fn delete_in_node(
        &mut self,
        master: StreamId,
        mut stop: impl FnMut(StreamId, usize) -> bool,
    ) -> u64 {
        let next = self.nodes.range(master..).nth(1).map(|(id, _)| *id);
        let ids: Vec<StreamId> = match next {
            Some(end) => self.entries.range(master..end).map(|(id, _)| *id).collect(),
            None => self.entries.range(master..).map(|(id, _)| *id).collect(),
        };
        let mut deleted = 0;
        for id in ids {
            if stop(id, self.entries.len()) {
                break;
            }
            if let Some(packed) = self.entries.remove(&id) {
                self.bytes -= packed.len();
                deleted += 1;
            }
        }
        if let Some(node) = self.nodes.get_mut(&master) {
            node.live -= deleted;
            node.deleted += deleted;
        }
        deleted
    }

    /// After entries left the head: the first live ID, or 0-0 when empty.
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.first_live().unwrap_or_default();
    }

    /// Whether an XDEL'd ID may lie in `start..` (`streamRangeHasTombstones`): the lag and
    /// entries-read estimates are only exact without one.
    pub fn range_has_tombstones(&self, start: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_entry_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_entry_id {
            return false;
        }
        start <= self.max_deleted_entry_id
    }

    /// How many entries were added up to `id` (`streamEstimateDistanceFromFirstEverEntry`),
    /// when that can be known.
    pub fn entries_read_at(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.entries.is_empty() && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        let xdel_before_first = self.max_deleted_entry_id < self.first_id;
        if self.max_deleted_entry_id.is_zero() || xdel_before_first {
            let len = self.entries.len() as u64;
            if id < self.first_id {
                return Some(self.entries_added - len);
            } else if id == self.first_id {
                return Some(self.entries_added - len + 1);
            }
        }
        None
    }

    /// A group's lag (`streamReplyWithCGLag`): `None` when it cannot be known.
    pub fn lag(&self, group: &Group) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if group.entries_read >= 0 && !self.range_has_tombstones(group.last_id) {
            return Some(self.entries_added.saturating_sub(group.entries_read as u64));
        }
        self.entries_read_at(group.last_id)
            .map(|read| self.entries_added.saturating_sub(read))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(stream: &mut Stream, ms: u64, pairs: &[(&[u8], &[u8])], limits: NodeLimits) {
        stream.append(StreamId::new(ms, 0), pairs, limits);
    }

    #[test]
    fn entries_round_trip_with_and_without_master_fields() {
        let mut s = Stream::default();
        let limits = NodeLimits::default();
        add(&mut s, 1, &[(b"a", b"1"), (b"b", b"2")], limits);
        add(&mut s, 2, &[(b"a", b"3"), (b"b", b"4")], limits);
        add(&mut s, 3, &[(b"c", b"")], limits);
        assert_eq!(s.len(), 3);
        assert_eq!(s.node_count(), 1);
        let got = s.get(StreamId::new(2, 0)).unwrap();
        assert_eq!(got[1], (Bytes::from("b"), Bytes::from("4")));
        assert_eq!(
            s.get(StreamId::new(3, 0)).unwrap(),
            vec![(Bytes::from("c"), Bytes::new())]
        );
        let rev: Vec<u64> = s
            .range(StreamId::MIN, StreamId::MAX, true)
            .map(|(id, _)| id.ms)
            .collect();
        assert_eq!(rev, vec![3, 2, 1]);
        assert_eq!(
            (s.first_id, s.last_id, s.entries_added),
            (StreamId::new(1, 0), StreamId::new(3, 0), 3)
        );
    }

    #[test]
    fn nodes_split_by_entries_and_go_when_emptied() {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_entries: 2,
            max_bytes: 4096,
        };
        for ms in 1..=5 {
            add(&mut s, ms, &[(b"f", b"v")], limits);
        }
        assert_eq!(s.node_count(), 3);
        assert!(s.delete(StreamId::new(1, 0)));
        assert_eq!(s.node_count(), 3);
        assert!(s.delete(StreamId::new(2, 0)));
        assert_eq!(s.node_count(), 2);
        assert!(!s.delete(StreamId::new(2, 0)));
        // A deleted entry still takes its node's room.
        assert!(s.delete(StreamId::new(5, 0)));
        add(&mut s, 6, &[(b"f", b"v")], limits);
        assert_eq!(s.node_count(), 2);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn nodes_split_by_bytes() {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_entries: 0,
            max_bytes: 100,
        };
        for ms in 1..=10 {
            add(&mut s, ms, &[(b"field", b"some value of 20 b.")], limits);
        }
        assert!(s.node_count() > 2);
    }
}
