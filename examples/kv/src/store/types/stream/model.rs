//! A stream value: its entries in ID order, in nodes split where Redis's listpack nodes
//! split, the metadata Redis 7.0 keeps (last ID, first ID, max deleted ID, entries added)
//! and the consumer groups.
//!
//! Memory, as Redis's rax of listpacks: a B-tree keyed by each node's master ID (the first
//! ID appended to it), each node one byte buffer of its entries back to back. An entry is
//! its ID as deltas from the master, a flag byte (deleted, same fields) and varint-length
//! strings; an entry whose field names are the node's master fields (the usual case: every
//! entry of a stream has the same fields) stores only its values, Redis's `SAMEFIELDS`.
//! Deleted entries stay in their node, flagged, until the node goes (as in Redis), so node
//! splits, approximate trimming and XINFO's `radix-tree-keys` come out as Redis's.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::group::Group;
use super::id::StreamId;
use super::node;
use crate::reply::{Bulks, Reply};

/// An entry as read: its ID and field-value pairs.
pub type Entry = (StreamId, Vec<(Bytes, Bytes)>);

/// An entry as its node holds it: its ID, whether it is flagged deleted, its pairs.
pub type NodeEntry = (StreamId, bool, Vec<(Bytes, Bytes)>);

const DELETED: u8 = 1;
const SAME_FIELDS: u8 = 2;

/// One node: Redis's listpack bookkeeping and the packed entries.
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
    /// The entries: `varint(ms delta) varint(seq: delta when the ms is the master's, else
    /// itself) flags [varint(count) (varint(len) field)...] (varint(len) value)...`.
    data: Vec<u8>,
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
    nodes: BTreeMap<StreamId, Node>,
    /// Live entries.
    length: usize,
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty), as Redis records it.
    pub first_id: StreamId,
    pub max_deleted_entry_id: StreamId,
    pub entries_added: u64,
    /// Consumer groups by name, in name order (Redis's radix tree order).
    pub groups: BTreeMap<Bytes, Group>,
    /// Bytes of the nodes' buffers.
    bytes: usize,
}

/// Fixed cost of a node besides its buffer: its B-tree slot and bookkeeping.
const NODE_COST: usize = 16 + std::mem::size_of::<Node>();

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn get_varint(data: &[u8], at: &mut usize) -> u64 {
    let mut n = 0u64;
    let mut shift = 0;
    while let Some(&byte) = data.get(*at) {
        *at += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            break;
        }
        shift += 7;
    }
    n
}

/// One entry's place in its node's buffer.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: StreamId,
    /// Offset of the flag byte.
    flags_at: usize,
    flags: u8,
}

impl Node {
    /// The entries in order, deleted ones included.
    fn slots(&self, master: StreamId) -> impl Iterator<Item = Slot> + '_ {
        let data = &self.data;
        let fields = self.fields.len() as u64;
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= data.len() {
                return None;
            }
            let ms_delta = get_varint(data, &mut at);
            let seq = get_varint(data, &mut at);
            let id = if ms_delta == 0 {
                StreamId::new(master.ms, master.seq + seq)
            } else {
                StreamId::new(master.ms + ms_delta, seq)
            };
            let flags_at = at;
            let flags = data[at];
            at += 1;
            let strings = if flags & SAME_FIELDS != 0 {
                fields
            } else {
                2 * get_varint(data, &mut at)
            };
            for _ in 0..strings {
                let len = get_varint(data, &mut at) as usize;
                at += len;
            }
            Some(Slot {
                id,
                flags_at,
                flags,
            })
        })
    }

    fn pairs(&self, slot: Slot) -> Vec<(Bytes, Bytes)> {
        let data = &self.data;
        let mut at = slot.flags_at + 1;
        let take = |at: &mut usize| {
            let len = get_varint(data, at) as usize;
            let bytes = Bytes::copy_from_slice(&data[*at..*at + len]);
            *at += len;
            bytes
        };
        if slot.flags & SAME_FIELDS != 0 {
            self.fields
                .iter()
                .map(|field| (field.clone(), take(&mut at)))
                .collect()
        } else {
            let n = get_varint(data, &mut at);
            (0..n)
                .map(|_| {
                    let field = take(&mut at);
                    (field, take(&mut at))
                })
                .collect()
        }
    }

    /// An entry's pairs as the flat array of bulks a reply carries, written from the
    /// node's bytes (no string copied out one by one).
    fn pairs_reply(&self, slot: Slot) -> Reply {
        let data = &self.data;
        let mut at = slot.flags_at + 1;
        let take = |at: &mut usize| {
            let len = get_varint(data, at) as usize;
            let bytes = &data[*at..*at + len];
            *at += len;
            bytes
        };
        if slot.flags & SAME_FIELDS != 0 {
            let names: usize = self.fields.iter().map(|f| f.len()).sum();
            let mut out = Bulks::builder(2 * self.fields.len(), 2 * names);
            for field in self.fields.iter() {
                out.push(field);
                out.push(take(&mut at));
            }
            Reply::Bulks(out.finish())
        } else {
            let n = get_varint(data, &mut at) as usize;
            let mut out = Bulks::builder(2 * n, 16 * n);
            for _ in 0..2 * n {
                out.push(take(&mut at));
            }
            Reply::Bulks(out.finish())
        }
    }

    /// Every entry in order, deleted ones included: its ID, whether it is deleted, its pairs.
    pub(super) fn all_entries(&self, master: StreamId) -> Vec<NodeEntry> {
        self.slots(master)
            .map(|slot| (slot.id, slot.flags & DELETED != 0, self.pairs(slot)))
            .collect()
    }

    /// A node as appends would have made it, from its master ID and fields and its entries
    /// (in ID order, none before `master`; the caller checked).
    pub(super) fn from_entries(
        master: StreamId,
        fields: Box<[Bytes]>,
        entries: &[NodeEntry],
    ) -> Node {
        let mut data = Vec::new();
        let (mut live, mut deleted, mut bytes) = (0, 0, 0);
        for (id, is_deleted, pairs) in entries {
            let refs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
            let same =
                fields.len() == pairs.len() && fields.iter().zip(pairs).all(|(f, (g, _))| f == g);
            let ms_delta = id.ms - master.ms;
            let seq = if ms_delta == 0 {
                id.seq - master.seq
            } else {
                id.seq
            };
            bytes += node::entry(ms_delta, seq, &refs, same);
            put_varint(&mut data, ms_delta);
            put_varint(&mut data, seq);
            data.push(if same { SAME_FIELDS } else { 0 } | if *is_deleted { DELETED } else { 0 });
            if !same {
                put_varint(&mut data, pairs.len() as u64);
            }
            for (field, value) in pairs {
                if !same {
                    put_varint(&mut data, field.len() as u64);
                    data.extend_from_slice(field);
                }
                put_varint(&mut data, value.len() as u64);
                data.extend_from_slice(value);
            }
            if *is_deleted {
                deleted += 1;
            } else {
                live += 1;
            }
        }
        let names: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
        data.shrink_to_fit();
        Node {
            live,
            deleted,
            last: entries.last().map_or(master, |(id, _, _)| *id),
            bytes: bytes + node::EMPTY + node::master(live, deleted, &names),
            fields,
            data,
        }
    }

    fn find(&self, master: StreamId, id: StreamId) -> Option<Slot> {
        self.slots(master)
            .take_while(|slot| slot.id <= id)
            .find(|slot| slot.id == id && slot.flags & DELETED == 0)
    }
}

/// The live entries of `node` within `start..=end`.
fn live_in(
    master: StreamId,
    node: &Node,
    start: StreamId,
    end: StreamId,
) -> impl Iterator<Item = (Slot, &Node)> + '_ {
    node.slots(master)
        .filter(move |slot| slot.flags & DELETED == 0 && slot.id >= start && slot.id <= end)
        .map(move |slot| (slot, node))
}

impl Stream {
    /// A stream of whole nodes (each holding a live entry, keyed by master ID, none
    /// overlapping the next: the caller checked) and its metadata, without groups.
    pub(super) fn from_nodes(
        nodes: BTreeMap<StreamId, Node>,
        last_id: StreamId,
        first_id: StreamId,
        max_deleted_entry_id: StreamId,
        entries_added: u64,
    ) -> Stream {
        let length = nodes.values().map(|n| n.live as usize).sum();
        let bytes = nodes.values().map(|n| n.data.capacity()).sum();
        Stream {
            nodes,
            length,
            last_id,
            first_id,
            max_deleted_entry_id,
            entries_added,
            groups: BTreeMap::new(),
            bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Bytes held, for the store's accounting: the nodes, and each group's pending entries
    /// and consumers.
    pub fn payload_len(&self) -> usize {
        let groups: usize = (self.groups.iter())
            .map(|(name, group)| name.len() + group.payload_len())
            .sum();
        self.bytes + self.nodes.len() * NODE_COST + groups
    }

    /// The listpack nodes (XINFO's `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub(super) fn nodes(&self) -> &BTreeMap<StreamId, Node> {
        &self.nodes
    }

    fn node_of(&self, id: StreamId) -> Option<(StreamId, &Node)> {
        self.nodes
            .range(..=id)
            .next_back()
            .map(|(master, node)| (*master, node))
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.node_of(id)
            .is_some_and(|(master, node)| node.find(master, id).is_some())
    }

    /// The last live entry's ID (`streamLastValidID`), `None` when empty.
    pub fn last_live(&self) -> Option<StreamId> {
        self.nodes.iter().rev().find_map(|(master, node)| {
            // A node with nothing deleted ends with a live entry: its last one, no scan.
            if node.deleted == 0 {
                return (node.live > 0).then_some(node.last);
            }
            node.slots(*master)
                .filter(|slot| slot.flags & DELETED == 0)
                .last()
                .map(|slot| slot.id)
        })
    }

    pub fn first_live(&self) -> Option<StreamId> {
        self.nodes.iter().find_map(|(master, node)| {
            node.slots(*master)
                .find(|slot| slot.flags & DELETED == 0)
                .map(|slot| slot.id)
        })
    }

    /// An entry's field-value pairs.
    pub fn get(&self, id: StreamId) -> Option<Vec<(Bytes, Bytes)>> {
        let (master, node) = self.node_of(id)?;
        node.find(master, id).map(|slot| node.pairs(slot))
    }

    /// Live entries with IDs in `start..=end`, in order (reversed with `rev`).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = Entry> + '_> {
        self.range_with(start, end, rev, |slot, node| (slot.id, node.pairs(slot)))
    }

    /// [`Self::range`]'s entries as replies (`[id, [field, value, ...]]`), the pairs written
    /// straight from the node's bytes as one array of bulks.
    pub fn range_replies(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = Reply> + '_> {
        self.range_with(start, end, rev, |slot, node| {
            Reply::Array(vec![
                Reply::Bulk(slot.id.to_bytes()),
                node.pairs_reply(slot),
            ])
        })
    }

    fn range_with<T: 'static>(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        make: fn(Slot, &Node) -> T,
    ) -> Box<dyn Iterator<Item = T> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        // The node holding `start` may begin before it.
        let first = self.node_of(start).map_or(start, |(master, _)| master);
        let nodes = self.nodes.range(first..=end);
        let entry = move |(slot, node): (Slot, &Node)| make(slot, node);
        if rev {
            Box::new(nodes.rev().flat_map(move |(master, node)| {
                let slots: Vec<(Slot, &Node)> = live_in(*master, node, start, end).collect();
                slots.into_iter().rev().map(entry)
            }))
        } else {
            Box::new(
                nodes
                    .flat_map(move |(master, node)| live_in(*master, node, start, end))
                    .map(entry),
            )
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
        let reuse = self
            .nodes
            .iter_mut()
            .next_back()
            .and_then(|(master, node)| {
                let full = limits.max_entries > 0
                    && (node.live + node.deleted) as usize >= limits.max_entries;
                if node.bytes + payload < max_bytes && !full {
                    Some(*master)
                } else {
                    // Full for good: give back the buffer's spare room.
                    let before = node.data.capacity();
                    node.data.shrink_to_fit();
                    self.bytes -= before - node.data.capacity();
                    None
                }
            });
        let master = reuse.unwrap_or_else(|| {
            let names: Vec<&[u8]> = pairs.iter().map(|(f, _)| *f).collect();
            let node = Node {
                live: 0,
                deleted: 0,
                last: id,
                bytes: node::EMPTY + node::master(1, 0, &names),
                fields: pairs
                    .iter()
                    .map(|(f, _)| Bytes::copy_from_slice(f))
                    .collect(),
                data: Vec::new(),
            };
            self.nodes.insert(id, node);
            id
        });
        let node = self.nodes.get_mut(&master).expect("the last node");
        let same = node.fields.len() == pairs.len()
            && node
                .fields
                .iter()
                .zip(pairs)
                .all(|(f, (g, _))| f[..] == **g);
        let before = node::int(node.live as i64);
        node.live += 1;
        node.bytes += node::int(node.live as i64) - before;
        let ms_delta = id.ms - master.ms;
        let seq = if ms_delta == 0 {
            id.seq - master.seq
        } else {
            id.seq
        };
        node.bytes += node::entry(ms_delta, seq, pairs, same);
        node.last = id;
        let capacity = node.data.capacity();
        let data = &mut node.data;
        put_varint(data, ms_delta);
        put_varint(data, seq);
        data.push(if same { SAME_FIELDS } else { 0 });
        if !same {
            put_varint(data, pairs.len() as u64);
        }
        for (field, value) in pairs {
            if !same {
                put_varint(data, field.len() as u64);
                data.extend_from_slice(field);
            }
            put_varint(data, value.len() as u64);
            data.extend_from_slice(value);
        }
        self.bytes = self.bytes + node.data.capacity() - capacity;
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    /// Marks `id` deleted in its node (the node goes when nothing live is left in it).
    /// Updates neither `first_id` nor `max_deleted_entry_id` (the callers do, as Redis).
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((master, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let master = *master;
        let Some(slot) = node.find(master, id) else {
            return false;
        };
        self.length -= 1;
        if node.live <= 1 {
            self.remove_buffer(master);
        } else {
            node.data[slot.flags_at] |= DELETED;
            node.live -= 1;
            node.deleted += 1;
        }
        true
    }

    fn remove_buffer(&mut self, master: StreamId) -> Option<Node> {
        let node = self.nodes.remove(&master)?;
        self.bytes -= node.data.capacity();
        Some(node)
    }

    /// Removes the node at `master` and its live entries; returns how many.
    pub(super) fn remove_node(&mut self, master: StreamId) -> u64 {
        let live = self.remove_buffer(master).map_or(0, |node| node.live);
        self.length -= live as usize;
        live
    }

    /// Flags live entries of the node at `master` deleted, in order, until `stop` (given
    /// the entry and the stream's length) says enough; the node stays (exact trimming
    /// inside a node). Returns how many.
    pub(super) fn delete_in_node(
        &mut self,
        master: StreamId,
        mut stop: impl FnMut(StreamId, usize) -> bool,
    ) -> u64 {
        let Some(node) = self.nodes.get_mut(&master) else {
            return 0;
        };
        let slots: Vec<Slot> = node
            .slots(master)
            .filter(|slot| slot.flags & DELETED == 0)
            .collect();
        let mut deleted = 0;
        for slot in slots {
            if stop(slot.id, self.length) {
                break;
            }
            node.data[slot.flags_at] |= DELETED;
            self.length -= 1;
            deleted += 1;
        }
        node.live -= deleted;
        node.deleted += deleted;
        deleted
    }

    /// After entries left the head: the first live ID, or 0-0 when empty.
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.first_live().unwrap_or_default();
    }

    /// Whether an XDEL'd ID may lie in `start..` (`streamRangeHasTombstones`): the lag and
    /// entries-read estimates are only exact without one.
    pub fn range_has_tombstones(&self, start: StreamId) -> bool {
        if self.is_empty() || self.max_deleted_entry_id.is_zero() {
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
        if self.is_empty() && id <= self.last_id {
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
            let len = self.length as u64;
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
    fn the_last_live_id_and_replies_follow_deletions() {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_entries: 2,
            max_bytes: 4096,
        };
        for ms in 1..=4 {
            add(&mut s, ms, &[(b"f", b"v")], limits);
        }
        add(&mut s, 5, &[(b"g", b"w"), (b"h", b"")], limits);
        assert_eq!(s.last_live(), Some(StreamId::new(5, 0)));
        // The last node's last entry deleted: its other one is the last live.
        assert!(s.delete(StreamId::new(5, 0)));
        assert_eq!(s.last_live(), Some(StreamId::new(4, 0)));
        assert!(s.delete(StreamId::new(4, 0)));
        assert_eq!(s.last_live(), Some(StreamId::new(3, 0)));
        // The replies carry what `range` reads, in either direction.
        add(&mut s, 6, &[(b"g", b"w"), (b"h", b"")], limits);
        for rev in [false, true] {
            let replies: Vec<Reply> = s.range_replies(StreamId::MIN, StreamId::MAX, rev).collect();
            let expected: Vec<Reply> = s
                .range(StreamId::MIN, StreamId::MAX, rev)
                .map(|(id, pairs)| super::super::entry_reply(id, pairs))
                .collect();
            assert_eq!(replies, expected);
            assert_eq!(replies.len(), 4);
        }
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
