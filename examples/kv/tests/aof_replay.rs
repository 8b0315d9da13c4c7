//! AOF round trips through the public API: a store logs into an `AofWriter`, the batches form
//! the "file", and replay rebuilds the keyspace, also from torn and corrupted files.

use bytes::{Bytes, BytesMut};
use corewire_kv::aof::{replay, AofWriter, CorruptReason, FsyncPolicy, RecordReader};
use corewire_kv::change::NoLog;
use corewire_kv::store::Store;
use corewire_kv::{Command, Reply};

fn command(line: &str) -> Command {
    Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()).unwrap()
}

const SCRIPT: &[(&str, u64)] = &[
    ("SET a 1", 1_000),
    ("SET b hello EX 100", 1_000),
    ("INCRBY a 41", 1_100),
    ("APPEND b _world", 1_200),
    ("MSET c 3 d 4", 1_300),
    ("SET tmp x PX 10", 1_300),
    ("GET tmp", 1_400), // lazily expires tmp
    ("EXPIRE c 5", 1_500),
    ("DEL d", 1_600),
    ("GETSET a 7", 1_700),
    ("PERSIST b", 1_800),
    ("SET e 5 NX", 1_900),
];

/// Runs the script against a store with an AOF; returns the store, the file image and the
/// record boundaries (LSNs) in the file.
fn build_log() -> (Store, Bytes, Vec<usize>) {
    let mut store = Store::default();
    let mut aof = AofWriter::new(FsyncPolicy::Always, 0, 0);
    let mut file = BytesMut::new();
    let mut boundaries = vec![0];
    for &(line, now) in SCRIPT {
        let before = aof.appended_lsn();
        let reply = store.execute(command(line), now, &mut aof);
        assert!(!reply.is_error(), "{line}: {reply:?}");
        if aof.appended_lsn() > before {
            // One batch per command here so every record boundary is visible.
            let batch = aof.take_batch().expect("a write produced records");
            assert_eq!(batch.offset as usize, file.len());
            file.extend_from_slice(&batch.bytes);
            aof.write_completed(batch.end()).unwrap();
            boundaries.push(file.len());
        }
    }
    (store, file.freeze(), boundaries)
}

fn rebuild(commands: Vec<Command>) -> Store {
    let mut store = Store::default();
    for command in commands {
        let reply = store.apply_replayed(command);
        assert!(!reply.is_error(), "{reply:?}");
    }
    store
}

fn observe(store: &mut Store, now: u64) -> Vec<Reply> {
    ["a", "b", "c", "d", "e", "tmp"]
        .iter()
        .flat_map(|key| {
            [
                store.execute(command(&format!("GET {key}")), now, &mut NoLog),
                store.execute(command(&format!("PTTL {key}")), now, &mut NoLog),
            ]
        })
        .collect()
}

#[test]
fn replay_rebuilds_the_keyspace() {
    let (mut original, file, boundaries) = build_log();
    let replayed = replay(file.clone());
    assert_eq!(replayed.corrupt_tail, None);
    assert_eq!(replayed.valid_len, file.len());
    // GET tmp logged its expiry, SET e NX was a no-op: 11 records for 12 commands.
    assert_eq!(replayed.commands.len(), boundaries.len() - 1);
    let mut rebuilt = rebuild(replayed.commands);
    for now in [2_000, 6_600, 200_000] {
        assert_eq!(
            observe(&mut rebuilt, now),
            observe(&mut original, now),
            "at {now}"
        );
    }
}

#[test]
fn every_truncation_point_yields_the_longest_whole_prefix() {
    let (_, file, boundaries) = build_log();
    for cut in 0..=file.len() {
        let replayed = replay(file.slice(..cut));
        let whole = boundaries.iter().rposition(|&b| b <= cut).unwrap();
        assert_eq!(replayed.valid_len, boundaries[whole], "cut at {cut}");
        assert_eq!(replayed.commands.len(), whole, "cut at {cut}");
        match replayed.corrupt_tail {
            None => assert_eq!(cut, boundaries[whole]),
            Some(tail) => {
                assert_eq!(tail.offset, boundaries[whole]);
                assert!(
                    matches!(
                        tail.reason,
                        CorruptReason::TruncatedHeader { .. }
                            | CorruptReason::TruncatedPayload { .. }
                    ),
                    "cut at {cut}: {tail}"
                );
            }
        }
    }
}

#[test]
fn a_flipped_byte_stops_replay_at_its_record() {
    let (_, file, boundaries) = build_log();
    for position in 0..file.len() {
        let mut damaged = file.to_vec();
        damaged[position] ^= 0x40;
        let replayed = replay(Bytes::from(damaged));
        let record = boundaries.iter().rposition(|&b| b <= position).unwrap();
        let tail = replayed.corrupt_tail.expect("damage must be detected");
        assert_eq!(tail.offset, boundaries[record], "flip at {position}");
        assert_eq!(replayed.valid_len, boundaries[record]);
        assert_eq!(replayed.commands.len(), record);
    }
}

#[test]
fn checksummed_garbage_is_reported_as_such() {
    let mut file = BytesMut::new();
    assert!(corewire_kv::aof::encode_record(
        &mut file,
        b"*1\r\n$4\r\nPING\r\n"
    ));
    let replayed = replay(file.clone().freeze());
    assert_eq!(replayed.valid_len, 0);
    assert!(matches!(
        replayed.corrupt_tail.unwrap().reason,
        CorruptReason::InvalidCommand { .. }
    ));

    let mut file = BytesMut::new();
    assert!(corewire_kv::aof::encode_record(&mut file, b"SET a b\r\n"));
    assert_eq!(
        replay(file.freeze()).corrupt_tail.unwrap().reason,
        CorruptReason::MalformedPayload
    );
}

#[test]
fn the_reader_streams_and_stops_after_an_error() {
    let (_, file, boundaries) = build_log();
    let cut = boundaries[3] + 5;
    let mut reader = RecordReader::new(file.slice(..cut));
    assert_eq!(reader.by_ref().take(3).filter(Result::is_ok).count(), 3);
    assert!(matches!(reader.next(), Some(Err(_))));
    assert!(reader.next().is_none());
    assert_eq!(reader.valid_len(), boundaries[3]);
}

#[test]
fn appending_after_recovery_continues_the_file() {
    let (_, file, boundaries) = build_log();
    // Crash mid-record: recover, truncate, append more, replay the whole thing.
    let torn = file.slice(..boundaries[5] + 3);
    let recovered = replay(torn.clone());
    let mut store = rebuild(recovered.commands);
    let mut aof = AofWriter::new(FsyncPolicy::EverySec, recovered.valid_len as u64, 0);
    let mut image = BytesMut::from(&torn[..recovered.valid_len]);
    store.execute(command("SET z last"), 3_000, &mut aof);
    let batch = aof.take_batch().unwrap();
    assert_eq!(batch.offset as usize, image.len());
    image.extend_from_slice(&batch.bytes);
    let replayed = replay(image.freeze());
    assert_eq!(replayed.corrupt_tail, None);
    let mut rebuilt = rebuild(replayed.commands);
    assert_eq!(
        rebuilt.execute(command("GET z"), 3_000, &mut NoLog),
        Reply::Bulk(Bytes::from("last"))
    );
    assert_eq!(observe(&mut rebuilt, 3_000), observe(&mut store, 3_000));
}
