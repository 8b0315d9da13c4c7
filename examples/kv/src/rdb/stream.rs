//! Streams as Redis 7.0 keeps them in RDB (`STREAM_LISTPACKS_2`, type 19; read also from
//! `STREAM_LISTPACKS`, 15, Redis 5 to 6.2, and `STREAM_LISTPACKS_3`, 21, Redis 7.2):
//!
//! - the nodes: their count, then per node its master ID as a 16-byte string (ms and seq,
//!   big-endian, the radix tree's key) and a listpack of its entries;
//! - the live entry count, the last ID; from 19 on, the first ID, the largest deleted ID and
//!   the count of entries ever added (type 15 has none: they are derived as Redis does);
//! - the groups: their count, then per group its name, last delivered ID, entries read
//!   (from 19 on; -1 is unknown), its PEL (raw 16-byte IDs, each with the last delivery's
//!   Unix ms as 8 bytes LE and the delivery count) and its consumers (name, seen time in
//!   ms, from 21 on an active time, and their pending IDs, raw, which must be in the PEL).
//!
//! A node's listpack starts with its master entry (live count, deleted count, the field
//! names, a 0), then each entry: flags (1 deleted, 2 same fields as the master), the ID as
//! differences from the master's ms and seq, the field count and field-value pairs (or only
//! the values with "same fields"), and the entry's element count (so it can be walked back).
//!
//! [`StreamImage`] is the value with nothing of the store in it: the store converts its own
//! streams to and from it (`store/types/stream/image.rs`).

use bytes::Bytes;

use super::decode::{Decoder, RdbError};
use super::encode::{write_len, write_string};
use super::listpack::{self, ListpackWriter};
use super::{kind, strict_i64};

/// A stream entry ID, ordered as Redis orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Id {
    pub ms: u64,
    pub seq: u64,
}

impl Id {
    pub const MAX: Id = Id {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> Id {
        Id { ms, seq }
    }

    /// The radix tree's key form: ms and seq, big-endian.
    fn raw(self) -> [u8; 16] {
        let mut out = [0; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    fn from_raw(raw: &[u8]) -> Option<Id> {
        let raw: &[u8; 16] = raw.try_into().ok()?;
        let (ms, seq) = raw.split_at(8);
        Some(Id::new(
            u64::from_be_bytes(ms.try_into().ok()?),
            u64::from_be_bytes(seq.try_into().ok()?),
        ))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry {
    pub id: Id,
    /// Flagged deleted (XDEL, trimming inside a node): it still takes room in its node.
    pub deleted: bool,
    pub pairs: Vec<(Bytes, Bytes)>,
}

/// One listpack node: keyed by its master ID (the first ID appended to it), with the field
/// names of its master entry, and its entries in ID order, deleted ones included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamNode {
    pub master: Id,
    pub fields: Vec<Bytes>,
    pub entries: Vec<StreamEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub id: Id,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConsumer {
    pub name: Bytes,
    /// Unix ms.
    pub seen_time: u64,
    /// IDs of the group's PEL delivered to this consumer, in order.
    pub pending: Vec<Id>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamGroup {
    pub name: Bytes,
    pub last_id: Id,
    /// `None` when the file has no such field (type 15): the loader estimates it from the
    /// stream as Redis does. -1 is Redis's "unknown".
    pub entries_read: Option<i64>,
    pub pel: Vec<Pending>,
    pub consumers: Vec<StreamConsumer>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamImage {
    pub nodes: Vec<StreamNode>,
    /// Live entries.
    pub length: u64,
    pub last_id: Id,
    pub first_id: Id,
    pub max_deleted_entry_id: Id,
    pub entries_added: u64,
    pub groups: Vec<StreamGroup>,
}

const DELETED: i64 = 1;
const SAME_FIELDS: i64 = 2;

fn push_int(lp: &mut ListpackWriter, v: i64) {
    lp.push(v.to_string().as_bytes());
}

/// A node's listpack, as Redis's `streamAppendItem` builds it (its counts as they are now).
fn node_listpack(node: &StreamNode) -> Vec<u8> {
    let mut lp = ListpackWriter::default();
    let live = node.entries.iter().filter(|e| !e.deleted).count();
    push_int(&mut lp, live as i64);
    push_int(&mut lp, (node.entries.len() - live) as i64);
    push_int(&mut lp, node.fields.len() as i64);
    for field in &node.fields {
        lp.push(field);
    }
    push_int(&mut lp, 0);
    for entry in &node.entries {
        let same = entry.pairs.len() == node.fields.len()
            && entry
                .pairs
                .iter()
                .zip(&node.fields)
                .all(|((f, _), m)| f == m);
        let flags = if entry.deleted { DELETED } else { 0 } | if same { SAME_FIELDS } else { 0 };
        push_int(&mut lp, flags);
        // Differences as Redis takes them: unsigned, then read as signed.
        push_int(&mut lp, entry.id.ms.wrapping_sub(node.master.ms) as i64);
        push_int(&mut lp, entry.id.seq.wrapping_sub(node.master.seq) as i64);
        let n = entry.pairs.len();
        if !same {
            push_int(&mut lp, n as i64);
        }
        for (field, value) in &entry.pairs {
            if !same {
                lp.push(field);
            }
            lp.push(value);
        }
        let count = if same { n + 3 } else { 2 * n + 4 };
        push_int(&mut lp, count as i64);
    }
    lp.finish()
}

fn write_id(out: &mut Vec<u8>, id: Id) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// The value of a `STREAM_LISTPACKS_2` key (after its type byte).
pub fn write(out: &mut Vec<u8>, stream: &StreamImage, compression: bool) {
    write_as(out, stream, compression, kind::STREAM_LISTPACKS_2);
}

/// The value in the layout of stream type `ty` (15 and 21 only for tests of the reader:
/// 15 drops what 5.0 to 6.2 did not keep, 21 repeats the seen time as the active time).
fn write_as(out: &mut Vec<u8>, stream: &StreamImage, compression: bool, ty: u8) {
    // A node without entries is no node (Redis refuses an empty listpack).
    let nodes: Vec<&StreamNode> = stream
        .nodes
        .iter()
        .filter(|n| !n.entries.is_empty())
        .collect();
    write_len(out, nodes.len() as u64);
    for node in nodes {
        write_string(out, &node.master.raw(), compression);
        write_string(out, &node_listpack(node), compression);
    }
    write_len(out, stream.length);
    write_id(out, stream.last_id);
    if ty != kind::STREAM_LISTPACKS {
        write_id(out, stream.first_id);
        write_id(out, stream.max_deleted_entry_id);
        write_len(out, stream.entries_added);
    }
    write_len(out, stream.groups.len() as u64);
    for group in &stream.groups {
        write_string(out, &group.name, compression);
        write_id(out, group.last_id);
        if ty != kind::STREAM_LISTPACKS {
            write_len(out, group.entries_read.unwrap_or(-1) as u64);
        }
        write_len(out, group.pel.len() as u64);
        for pending in &group.pel {
            out.extend_from_slice(&pending.id.raw());
            out.extend_from_slice(&pending.delivery_time.to_le_bytes());
            write_len(out, pending.delivery_count);
        }
        write_len(out, group.consumers.len() as u64);
        for consumer in &group.consumers {
            write_string(out, &consumer.name, compression);
            out.extend_from_slice(&consumer.seen_time.to_le_bytes());
            if ty == kind::STREAM_LISTPACKS_3 {
                out.extend_from_slice(&consumer.seen_time.to_le_bytes());
            }
            write_len(out, consumer.pending.len() as u64);
            for id in &consumer.pending {
                out.extend_from_slice(&id.raw());
            }
        }
    }
}

/// Walks a node's listpack elements.
struct Elements {
    items: std::vec::IntoIter<Bytes>,
}

impl Elements {
    fn next(&mut self) -> Result<Bytes, String> {
        self.items
            .next()
            .ok_or_else(|| "stream listpack ends inside an entry".to_string())
    }

    fn int(&mut self) -> Result<i64, String> {
        let item = self.next()?;
        strict_i64(&item).ok_or_else(|| "stream listpack with a text where a number belongs".into())
    }

    fn count(&mut self) -> Result<usize, String> {
        usize::try_from(self.int()?).map_err(|_| "stream listpack with a negative count".into())
    }
}

/// A node's entries from its listpack, checked against its master entry's counts.
fn read_node(master: Id, lp: &[u8]) -> Result<StreamNode, String> {
    let items = listpack::decode(lp)?;
    if items.is_empty() {
        return Err("empty listpack inside stream".into());
    }
    let mut e = Elements {
        items: items.into_iter(),
    };
    let live = e.count()?;
    let deleted = e.count()?;
    let nfields = e.count()?;
    let mut fields = Vec::with_capacity(nfields.min(lp.len()));
    for _ in 0..nfields {
        fields.push(e.next()?);
    }
    if e.int()? != 0 {
        return Err("stream master entry without its zero terminator".into());
    }
    let mut entries = Vec::new();
    while let Some(flags) = e.items.next() {
        let flags = strict_i64(&flags).ok_or("stream entry flags that are not a number")?;
        let ms = master.ms.wrapping_add(e.int()? as u64);
        let seq = master.seq.wrapping_add(e.int()? as u64);
        let same = flags & SAME_FIELDS != 0;
        let n = if same { nfields } else { e.count()? };
        let mut pairs = Vec::with_capacity(n.min(lp.len()));
        if same {
            for field in &fields {
                pairs.push((field.clone(), e.next()?));
            }
        } else {
            for _ in 0..n {
                let field = e.next()?;
                pairs.push((field, e.next()?));
            }
        }
        let expected = if same { n + 3 } else { 2 * n + 4 };
        if e.count()? != expected {
            return Err("stream entry whose element count disagrees".into());
        }
        entries.push(StreamEntry {
            id: Id::new(ms, seq),
            deleted: flags & DELETED != 0,
            pairs,
        });
    }
    let flagged = entries.iter().filter(|x| x.deleted).count();
    if flagged != deleted || entries.len() - flagged != live {
        return Err("stream master entry whose counts disagree with its entries".into());
    }
    Ok(StreamNode {
        master,
        fields,
        entries,
    })
}

fn read_id(d: &mut Decoder<'_>) -> Result<Id, RdbError> {
    Ok(Id::new(d.len()?, d.len()?))
}

fn read_raw_id(d: &mut Decoder<'_>) -> Result<Id, RdbError> {
    let at = d.offset();
    Id::from_raw(d.take(16)?).ok_or_else(|| d.error_at(at, "stream ID of the wrong size"))
}

fn read_ms(d: &mut Decoder<'_>) -> Result<u64, RdbError> {
    Ok(u64::from_le_bytes(
        d.take(8)?.try_into().unwrap_or_default(),
    ))
}

/// The value of a stream key of type `ty` (15, 19 or 21), after its type byte.
pub(super) fn read(d: &mut Decoder<'_>, ty: u8) -> Result<StreamImage, RdbError> {
    let mut image = StreamImage::default();
    // A node takes at least its 16-byte key and a 7-byte listpack.
    let nodes = d.count(2)?;
    for _ in 0..nodes {
        let at = d.offset();
        let key = d.string()?;
        let master = Id::from_raw(&key).ok_or_else(|| {
            d.error_at(at, "stream node key entry is not the size of a stream ID")
        })?;
        let lp_at = d.offset();
        let lp = d.string()?;
        let node = read_node(master, &lp).map_err(|why| d.error_at(lp_at, &why))?;
        if image.nodes.last().is_some_and(|last| last.master >= master) {
            return Err(d.error_at(at, "stream nodes out of order or repeated"));
        }
        image.nodes.push(node);
    }
    image.length = d.len()?;
    image.last_id = read_id(d)?;
    if ty == kind::STREAM_LISTPACKS {
        // What Redis derives for a file of 5.0 to 6.2.
        image.entries_added = image.length;
        image.first_id = (image.nodes.iter())
            .flat_map(|n| &n.entries)
            .find(|e| !e.deleted)
            .map_or(Id::MAX, |e| e.id);
    } else {
        image.first_id = read_id(d)?;
        image.max_deleted_entry_id = read_id(d)?;
        image.entries_added = d.len()?;
    }
    let groups = d.count(1)?;
    for _ in 0..groups {
        let name = d.string()?;
        let last_id = read_id(d)?;
        let entries_read = match ty {
            kind::STREAM_LISTPACKS => None,
            _ => Some(d.len()? as i64),
        };
        let pel_len = d.count(16 + 8 + 1)?;
        let mut pel = Vec::with_capacity(pel_len);
        for _ in 0..pel_len {
            let id = read_raw_id(d)?;
            let delivery_time = read_ms(d)?;
            pel.push(Pending {
                id,
                delivery_time,
                delivery_count: d.len()?,
            });
        }
        let consumer_count = d.count(1 + 8 + 1)?;
        let mut consumers = Vec::with_capacity(consumer_count);
        for _ in 0..consumer_count {
            let name = d.string()?;
            let seen_time = read_ms(d)?;
            if ty == kind::STREAM_LISTPACKS_3 {
                // The active time (Redis 7.2): no place for it here.
                read_ms(d)?;
            }
            let n = d.count(16)?;
            let mut pending = Vec::with_capacity(n);
            for _ in 0..n {
                pending.push(read_raw_id(d)?);
            }
            consumers.push(StreamConsumer {
                name,
                seen_time,
                pending,
            });
        }
        image.groups.push(StreamGroup {
            name,
            last_id,
            entries_read,
            pel,
            consumers,
        });
    }
    Ok(image)
}

#[cfg(test)]
mod tests;
