//! A stream to and from its RDB form ([`StreamImage`], Redis's `STREAM_LISTPACKS_2`): the
//! nodes as they are (deleted entries and node boundaries kept, so XINFO and approximate
//! trimming after a load come out as before it), the metadata, and the groups with their
//! PELs, delivery times and counts, and consumers' seen times.
//!
//! A file is checked before it becomes a value, since the commands rely on what a file
//! could break: IDs in order inside and across nodes, the length equal to the live entries,
//! every pending entry owned by exactly one consumer of its group.

use std::collections::BTreeMap;

use super::group::{Consumer, Group, Nack};
use super::id::StreamId;
use super::model::{Node, NodeEntry, Stream};
use crate::rdb::stream::{Id, Pending, StreamConsumer, StreamEntry, StreamGroup, StreamNode};
use crate::rdb::StreamImage;

fn id_of(id: StreamId) -> Id {
    Id::new(id.ms, id.seq)
}

fn stream_id(id: Id) -> StreamId {
    StreamId::new(id.ms, id.seq)
}

/// `stream` as an RDB file holds it.
pub fn to_image(stream: &Stream) -> StreamImage {
    let nodes = (stream.nodes().iter())
        .map(|(master, node)| StreamNode {
            master: id_of(*master),
            fields: node.fields.to_vec(),
            entries: (node.all_entries(*master).into_iter())
                .map(|(id, deleted, pairs)| StreamEntry {
                    id: id_of(id),
                    deleted,
                    pairs,
                })
                .collect(),
        })
        .collect();
    let groups = (stream.groups.iter())
        .map(|(name, group)| StreamGroup {
            name: name.clone(),
            last_id: id_of(group.last_id),
            entries_read: Some(group.entries_read),
            pel: (group.pel.iter())
                .map(|(id, nack)| Pending {
                    id: id_of(*id),
                    delivery_time: nack.delivery_time,
                    delivery_count: nack.delivery_count,
                })
                .collect(),
            consumers: (group.consumers.iter())
                .map(|(name, consumer)| StreamConsumer {
                    name: name.clone(),
                    seen_time: consumer.seen_time,
                    pending: consumer.pending.iter().map(|id| id_of(*id)).collect(),
                })
                .collect(),
        })
        .collect();
    StreamImage {
        nodes,
        length: stream.len() as u64,
        last_id: id_of(stream.last_id),
        first_id: id_of(stream.first_id),
        max_deleted_entry_id: id_of(stream.max_deleted_entry_id),
        entries_added: stream.entries_added,
        groups,
    }
}

/// The stream an RDB file holds, or why it cannot be one.
pub fn from_image(image: StreamImage) -> Result<Stream, String> {
    let mut nodes = BTreeMap::new();
    let mut previous: Option<StreamId> = None;
    for node in image.nodes {
        let master = stream_id(node.master);
        if previous.is_some_and(|p| master <= p) {
            return Err(format!("stream node {master} overlaps the node before it"));
        }
        let entries: Vec<NodeEntry> = (node.entries.into_iter())
            .map(|e| (stream_id(e.id), e.deleted, e.pairs))
            .collect();
        for (id, _, _) in &entries {
            if *id < master || previous.is_some_and(|p| *id <= p) {
                return Err(format!("stream entry {id} out of order"));
            }
            previous = Some(*id);
        }
        // A node with nothing live left is gone in Redis; one in a file is dropped here.
        if entries.iter().all(|(_, deleted, _)| *deleted) {
            continue;
        }
        let node = Node::from_entries(master, node.fields.into_boxed_slice(), &entries);
        nodes.insert(master, node);
    }
    let mut stream = Stream::from_nodes(
        nodes,
        stream_id(image.last_id),
        stream_id(image.first_id),
        stream_id(image.max_deleted_entry_id),
        image.entries_added,
    );
    if stream.len() as u64 != image.length {
        return Err(format!(
            "stream length {} inconsistent with its {} entries",
            image.length,
            stream.len()
        ));
    }
    if previous.is_some_and(|last| last > stream.last_id) {
        return Err("stream entry after the stream's last ID".into());
    }
    for group in image.groups {
        let name = group.name.clone();
        let built = group_of(group, &stream)?;
        if stream.groups.insert(name.clone(), built).is_some() {
            return Err(format!(
                "duplicated consumer group name {}",
                String::from_utf8_lossy(&name)
            ));
        }
    }
    Ok(stream)
}

fn group_of(image: StreamGroup, stream: &Stream) -> Result<Group, String> {
    let last_id = stream_id(image.last_id);
    // A file of Redis 5.0 to 6.2 has no entries-read: Redis estimates it.
    let entries_read = image
        .entries_read
        .unwrap_or_else(|| stream.entries_read_at(last_id).map_or(-1, |n| n as i64));
    let mut group = Group::new(last_id, entries_read);
    let mut unowned: BTreeMap<StreamId, Pending> = BTreeMap::new();
    for pending in image.pel {
        if unowned.insert(stream_id(pending.id), pending).is_some() {
            return Err("duplicated global PEL entry loading stream consumer group".into());
        }
    }
    for consumer in image.consumers {
        let mut pending = std::collections::BTreeSet::new();
        for id in consumer.pending {
            let id = stream_id(id);
            let nack = unowned
                .remove(&id)
                .ok_or("consumer entry not found in group global PEL")?;
            group.pel.insert(
                id,
                Nack {
                    consumer: consumer.name.clone(),
                    delivery_time: nack.delivery_time,
                    delivery_count: nack.delivery_count,
                },
            );
            pending.insert(id);
        }
        let added = Consumer {
            seen_time: consumer.seen_time,
            pending,
        };
        if group.consumers.insert(consumer.name, added).is_some() {
            return Err("duplicate stream consumer detected".into());
        }
    }
    if !unowned.is_empty() {
        return Err("stream CG PEL entry without consumer".into());
    }
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::types::stream::model::NodeLimits;
    use bytes::Bytes;

    fn sample() -> Stream {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_entries: 3,
            max_bytes: 4096,
        };
        for ms in 1..=10u64 {
            let value = ms.to_string();
            let pairs: Vec<(&[u8], &[u8])> = if ms == 5 {
                vec![(&b"other"[..], value.as_bytes())]
            } else {
                vec![(&b"f"[..], value.as_bytes()), (&b"g"[..], &b"x"[..])]
            };
            s.append(StreamId::new(ms, ms % 3), &pairs, limits);
        }
        s.delete(StreamId::new(2, 2));
        s.max_deleted_entry_id = StreamId::new(2, 2);
        let mut group = Group::new(StreamId::new(4, 1), 4);
        group.create_consumer(b"alice", 1000);
        group.create_consumer(b"idle", 2000);
        group.deliver_new(StreamId::new(3, 0), &Bytes::from("alice"), 1500);
        group.assign(StreamId::new(4, 1), &Bytes::from("alice"), 1600, 7);
        s.groups.insert(Bytes::from("g1"), group);
        s.groups
            .insert(Bytes::from("g0"), Group::new(StreamId::default(), 0));
        s
    }

    #[test]
    fn a_stream_comes_back_with_its_nodes_and_groups() {
        let s = sample();
        let image = to_image(&s);
        assert_eq!(image.nodes.len(), s.node_count());
        assert!(image.nodes[0].entries[1].deleted);
        let back = from_image(image.clone()).unwrap();
        assert_eq!(to_image(&back), image);
        assert_eq!(back.len(), 9);
        assert_eq!(back.groups, s.groups);
        let all: Vec<_> = back.range(StreamId::MIN, StreamId::MAX, false).collect();
        let want: Vec<_> = s.range(StreamId::MIN, StreamId::MAX, false).collect();
        assert_eq!(all, want);
    }

    #[test]
    fn inconsistent_files_are_refused() {
        let mut image = to_image(&sample());
        image.length += 1;
        assert!(from_image(image).unwrap_err().contains("length"));
        let mut image = to_image(&sample());
        image.groups[1].consumers[0].pending.clear();
        assert!(from_image(image).unwrap_err().contains("without consumer"));
        let mut image = to_image(&sample());
        image.nodes.swap(0, 1);
        assert!(from_image(image).unwrap_err().contains("overlaps"));
        let mut image = to_image(&sample());
        image.nodes[0].entries.swap(0, 1);
        assert!(from_image(image).unwrap_err().contains("out of order"));
    }
}
