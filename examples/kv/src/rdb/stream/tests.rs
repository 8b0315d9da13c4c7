//! Streams written and read back in every layout, payloads redis-server 7.0 and 5.0 wrote,
//! and damage refused with an error (never a panic).

use super::*;
use crate::rdb::{crc64, decode_dump, dump_payload, Limits, ObjectRef, RdbValue};

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_owned())
}

fn entry(ms: u64, seq: u64, deleted: bool, pairs: &[(&str, &str)]) -> StreamEntry {
    StreamEntry {
        id: Id::new(ms, seq),
        deleted,
        pairs: pairs.iter().map(|(f, v)| (b(f), b(v))).collect(),
    }
}

/// A payload of `stream` in layout `ty`, and what it reads back as.
fn payload_as(stream: &StreamImage, ty: u8) -> Vec<u8> {
    let mut out = vec![ty];
    write_as(&mut out, stream, true, ty);
    out.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn read_back(payload: &[u8]) -> StreamImage {
    match decode_dump(payload) {
        Ok(RdbValue::Stream(image)) => *image,
        other => panic!("not a stream: {other:?}"),
    }
}

fn round_trip(stream: &StreamImage) {
    let payload = dump_payload(
        &ObjectRef::Stream(Box::new(stream.clone())),
        &Limits::default(),
    );
    assert_eq!(payload[0], kind::STREAM_LISTPACKS_2);
    assert_eq!(read_back(&payload), *stream);
}

fn with_groups() -> StreamImage {
    StreamImage {
        nodes: vec![
            StreamNode {
                master: Id::new(1, 1),
                fields: vec![b("f"), b("g")],
                entries: vec![
                    entry(1, 1, false, &[("f", "v"), ("g", "2")]),
                    entry(1, 5, true, &[("f", "v2"), ("g", "3")]),
                    // The seq below the master's: a negative difference.
                    entry(2, 0, false, &[("other", "x")]),
                    entry(3, 0, false, &[("f", "-9223372036854775808"), ("g", "")]),
                ],
            },
            StreamNode {
                master: Id::new(u64::MAX - 1, 7),
                fields: vec![b("only")],
                entries: vec![entry(u64::MAX, 0, false, &[("only", "1")])],
            },
        ],
        length: 4,
        last_id: Id::new(u64::MAX, 0),
        first_id: Id::new(1, 1),
        max_deleted_entry_id: Id::new(1, 5),
        entries_added: 5,
        groups: vec![
            StreamGroup {
                name: b("grp"),
                last_id: Id::new(2, 0),
                entries_read: Some(-1),
                pel: vec![
                    Pending {
                        id: Id::new(1, 1),
                        delivery_time: 1_796_557_663_382,
                        delivery_count: 1,
                    },
                    Pending {
                        id: Id::new(2, 0),
                        delivery_time: 7,
                        delivery_count: 300,
                    },
                ],
                consumers: vec![
                    StreamConsumer {
                        name: b("alice"),
                        seen_time: 1_796_557_663_382,
                        pending: vec![Id::new(1, 1), Id::new(2, 0)],
                    },
                    StreamConsumer {
                        name: b("bob"),
                        seen_time: 9,
                        pending: vec![],
                    },
                ],
            },
            StreamGroup {
                name: b("other"),
                last_id: Id::default(),
                entries_read: Some(0),
                pel: vec![],
                consumers: vec![],
            },
        ],
    }
}

#[test]
fn empty_streams_round_trip() {
    round_trip(&StreamImage::default());
    // Emptied by XDEL, with a group: no node, the metadata stays.
    round_trip(&StreamImage {
        last_id: Id::new(5, 5),
        max_deleted_entry_id: Id::new(5, 5),
        entries_added: 3,
        groups: with_groups().groups[1..].to_vec(),
        ..StreamImage::default()
    });
}

#[test]
fn deleted_entries_other_fields_and_groups_round_trip() {
    round_trip(&with_groups());
}

#[test]
fn big_streams_span_nodes_and_compress() {
    let value = "some value that repeats ".repeat(8);
    let nodes: Vec<StreamNode> = (0..20u64)
        .map(|n| StreamNode {
            master: Id::new(1000 + n * 100, 0),
            fields: vec![b("name"), b("payload")],
            entries: (0..100u64)
                .map(|i| {
                    let name = format!("item {i}");
                    let pairs = [("name", name.as_str()), ("payload", value.as_str())];
                    entry(1000 + n * 100 + i, i % 3, i % 10 == 9, &pairs)
                })
                .collect(),
        })
        .collect();
    let stream = StreamImage {
        nodes,
        length: 20 * 90,
        last_id: Id::new(1000 + 19 * 100 + 99, 0),
        first_id: Id::new(1000, 0),
        entries_added: 2000,
        ..StreamImage::default()
    };
    round_trip(&stream);
    let payload = dump_payload(&ObjectRef::Stream(Box::new(stream)), &Limits::default());
    // LZF over listpacks of repeated values.
    assert!(
        payload.len() < 20 * 100 * value.len() / 4,
        "{}",
        payload.len()
    );
}

/// redis-server 7.0.15's DUMP after `XADD s 1-1 f v g 2`, `XADD s 1-5 f v2 g 3`,
/// `XADD s 2-0 other x`, `XADD s 3-0 f 1 g 4`, `XDEL s 1-5`, `XGROUP CREATE s grp 0`,
/// `XREADGROUP GROUP grp alice COUNT 2 STREAMS s >`, `XGROUP CREATECONSUMER s grp bob`.
const REDIS_7_PAYLOAD: &[u8] = b"\x13\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01@RR\x00\x00\x00\x1f\x00\x03\x01\x01\x01\x02\x01\x81f\x02\x81g\x02\x00\x01\x02\x01\x00\x01\x00\x01\x81v\x02\x02\x01\x05\x01\x03\x01\x00\x01\x04\x01\x82v2\x03\x03\x01\x05\x01\x00\x01\x01\x01\xdf\xff\x02\x01\x01\x85other\x06\x81x\x02\x06\x01\x02\x01\x02\x01\xdf\xff\x02\x01\x01\x04\x01\x05\x01\xff\x03\x03\x00\x01\x01\x01\x05\x04\x01\x03grp\x02\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x96l.K\xa2\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x96l.K\xa2\x01\x00\x00\x01\x02\x05alice\x96l.K\xa2\x01\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x03bob\xa0l.K\xa2\x01\x00\x00\x00\n\x005\xbd\xf5\x19X\x1a\x8aU";

#[test]
fn reads_redis_7_and_writes_the_same_bytes() {
    let image = read_back(REDIS_7_PAYLOAD);
    assert_eq!(image.length, 3);
    assert_eq!(image.nodes.len(), 1);
    let entries = &image.nodes[0].entries;
    assert_eq!(entries.len(), 4);
    assert!(entries[1].deleted && entries[1].id == Id::new(1, 5));
    assert_eq!(entries[2].id, Id::new(2, 0));
    assert_eq!(entries[2].pairs, vec![(b("other"), b("x"))]);
    assert_eq!(
        (
            image.first_id,
            image.max_deleted_entry_id,
            image.entries_added
        ),
        (Id::new(1, 1), Id::new(1, 5), 4)
    );
    let group = &image.groups[0];
    assert_eq!(
        (group.entries_read, group.last_id),
        (Some(-1), Id::new(2, 0))
    );
    assert_eq!(group.pel.len(), 2);
    assert_eq!(group.pel[0].delivery_time, 1_796_557_663_382);
    assert_eq!(
        group.consumers[0].pending,
        vec![Id::new(1, 1), Id::new(2, 0)]
    );
    assert_eq!(group.consumers[1].name, "bob");
    let ours = dump_payload(&ObjectRef::Stream(Box::new(image)), &Limits::default());
    assert_eq!(ours, REDIS_7_PAYLOAD);
}

/// The payload of Redis's own test "Loading from legacy (Redis <= v6.2.x, rdb_ver < 10)
/// persistence" (type 15, DUMPed by 5.0).
const REDIS_5_PAYLOAD: &[u8] = b"\x0F\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xC3\x40\x4A\x40\x57\x16\x57\x00\x00\x00\x23\x00\x02\x01\x04\x01\x01\x01\x84\x64\x61\x74\x61\x05\x00\x01\x03\x01\x00\x20\x01\x03\x81\x61\x02\x04\x20\x0A\x00\x01\x40\x0A\x00\x62\x60\x0A\x00\x02\x40\x0A\x00\x63\x60\x0A\x40\x22\x01\x81\x64\x20\x0A\x40\x39\x20\x0A\x00\x65\x60\x0A\x00\x05\x40\x0A\x00\x66\x20\x0A\x00\xFF\x02\x06\x00\x02\x02\x67\x31\x05\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x01\x03\x63\x31\x31\x3E\xF7\x83\x43\x7A\x01\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x02\x67\x32\x00\x00\x00\x00\x09\x00\x3D\x52\xEF\x68\x67\x52\x1D\xFA";

#[test]
fn reads_redis_5_streams_deriving_what_they_lack() {
    let image = read_back(REDIS_5_PAYLOAD);
    assert_eq!(image.length, 2);
    assert_eq!(image.entries_added, 2);
    assert_eq!(image.first_id, Id::new(5, 0));
    assert_eq!(image.max_deleted_entry_id, Id::default());
    assert_eq!(image.groups.len(), 2);
    assert!(image.groups.iter().all(|g| g.entries_read.is_none()));
    assert_eq!(image.groups[0].consumers[0].pending.len(), 4);
}

#[test]
fn reads_the_5_0_and_7_2_layouts() {
    let mut stream = with_groups();
    let back = read_back(&payload_as(&stream, kind::STREAM_LISTPACKS_3));
    assert_eq!(back, stream);
    let back = read_back(&payload_as(&stream, kind::STREAM_LISTPACKS));
    stream.entries_added = stream.length;
    stream.max_deleted_entry_id = Id::default();
    stream.groups.iter_mut().for_each(|g| g.entries_read = None);
    assert_eq!(back, stream);
    // A type-15 stream with nothing live: Redis records the largest ID as the first.
    let back = read_back(&payload_as(&StreamImage::default(), kind::STREAM_LISTPACKS));
    assert_eq!(back.first_id, Id::MAX);
}

/// `payload` with its body changed by `f` and the checksum made right again.
fn tampered(payload: &[u8], f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut body = payload[..payload.len() - 10].to_vec();
    f(&mut body);
    body.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64::crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

#[test]
fn damage_is_an_error() {
    let good = REDIS_7_PAYLOAD;
    assert!(decode_dump(good).is_ok());
    // Every truncation of the body, and every single byte changed: an error or a value,
    // never a panic.
    for cut in 1..good.len() - 10 {
        let bad = tampered(good, |b| b.truncate(cut));
        assert!(decode_dump(&bad).is_err(), "cut at {cut}");
    }
    for at in 1..good.len() - 10 {
        for x in [1u8, 0x80, 0xff] {
            let _ = decode_dump(&tampered(good, |b| b[at] ^= x));
        }
    }
    // The node key is not 16 bytes.
    let short_key = tampered(good, |b| {
        b[2] = 0x0f;
        b.remove(3);
    });
    assert!(decode_dump(&short_key).is_err());
    // A master entry whose live count is wrong (3 becomes 4).
    let at = good
        .windows(3)
        .position(|w| w == [0x1f, 0x00, 0x03])
        .unwrap()
        + 2;
    let wrong_count = tampered(good, |b| b[at] = 0x04);
    assert!(decode_dump(&wrong_count).is_err());
}

#[test]
fn listpack_node_errors_name_the_problem() {
    let node = &with_groups().nodes[0];
    let lp = node_listpack(node);
    assert_eq!(read_node(node.master, &lp).unwrap(), *node);
    // The last element is the last entry's element count.
    let mut items = listpack::decode(&lp).unwrap();
    *items.last_mut().unwrap() = b("99");
    let mut w = ListpackWriter::default();
    items.iter().for_each(|i| w.push(i));
    let err = read_node(node.master, &w.finish()).unwrap_err();
    assert!(err.contains("element count"), "{err}");
    let empty = ListpackWriter::default().finish();
    assert!(read_node(node.master, &empty)
        .unwrap_err()
        .contains("empty"));
}
